// h2load's summary, parsed: what a load run asked for, what came back, and the body bytes.
export interface H2loadSummary {
  readonly total: number;
  readonly started: number;
  readonly done: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly errored: number;
  readonly timeout: number;
  readonly status: { readonly '2xx': number; readonly '3xx': number; readonly '4xx': number; readonly '5xx': number };
  /** Response body bytes (h2load's "data"). */
  readonly dataBytes: number;
}

export function parseH2load(out: string): H2loadSummary {
  const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  const traffic = /traffic: .*?\((\d+)\) data/.exec(out);
  if (!req || !codes || !traffic) throw new Error(`not an h2load summary:\n${out.slice(-2000)}`);
  const n = (s: string): number => Number(s);
  return {
    total: n(req[1]), started: n(req[2]), done: n(req[3]), succeeded: n(req[4]), failed: n(req[5]), errored: n(req[6]), timeout: n(req[7]),
    status: { '2xx': n(codes[1]), '3xx': n(codes[2]), '4xx': n(codes[3]), '5xx': n(codes[4]) },
    dataBytes: n(traffic[1]),
  };
}
