/** What the topologies' checks share: assertions, polling until a behaviour shows, a proxy's counters. */
import { getFrom, HOST } from './net.ts';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(what);
}

/** Polls `probe` until it returns a value; a probe that throws says why it is not there yet. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const got = await probe().catch((err: Error) => { last = err.message; return undefined; });
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ` (${last})` : ''}`);
    await sleep(everyMs);
  }
}

/** A proxy's counters and gauges from its admin `/stats?format=json`. */
export async function stats(adminPort: number, host = HOST): Promise<Map<string, number>> {
  const r = await getFrom(host, adminPort, '/stats?format=json');
  return new Map((JSON.parse(r.body) as { stats: Array<{ name: string; value: number }> }).stats.map((s) => [s.name, s.value]));
}
