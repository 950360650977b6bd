/** Runs wrk and parses its `--latency` report. */
import { runToCompletion, systemBinary } from './procs.ts';
import { HOST } from './net.ts';

export interface WrkReport {
  rps: number;
  requests: number;
  p50: number;
  p75: number;
  p90: number;
  p99: number;
  /** Socket errors (connect + read + write + timeout) plus non-2xx/3xx responses. */
  errors: number;
}

export interface WrkLoad {
  threads: number;
  connections: number;
  seconds: number;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

/** "712.34us" / "1.23ms" / "2.00s" → milliseconds. */
export function durationMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) throw new Error(`wrk: cannot parse duration "${text}"`);
  return Number(m[1]) * UNIT_MS[m[2]];
}

function percentile(out: string, p: string): number {
  const m = new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out);
  if (!m) throw new Error(`wrk: no ${p}% latency in output (was --latency passed?)`);
  return durationMs(m[1]);
}

export function parseWrk(out: string): WrkReport {
  const rps = /^Requests\/sec:\s+([\d.]+)/m.exec(out);
  const total = /^\s+(\d+) requests in/m.exec(out);
  if (!rps || !total) throw new Error(`wrk: unexpected output:\n${out}`);
  let errors = 0;
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  if (sock) errors += Number(sock[1]) + Number(sock[2]) + Number(sock[3]) + Number(sock[4]);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  if (non2xx) errors += Number(non2xx[1]);
  return {
    rps: Number(rps[1]), requests: Number(total[1]), errors,
    p50: percentile(out, '50'), p75: percentile(out, '75'), p90: percentile(out, '90'), p99: percentile(out, '99'),
  };
}

export async function runWrk(port: number, load: WrkLoad): Promise<WrkReport> {
  const args = [
    `-t${load.threads}`, `-c${load.connections}`, `-d${load.seconds}s`, '--latency', `http://${HOST}:${port}/`,
  ];
  const r = await runToCompletion('wrk', systemBinary('wrk'), args, (load.seconds + 20) * 1000);
  if (r.timedOut) throw new Error(`wrk did not finish within ${load.seconds + 20} s`);
  if (r.code !== 0) throw new Error(`wrk exited ${String(r.code)}: ${r.stderr.trim() || r.stdout.trim()}`);
  return parseWrk(r.stdout);
}
