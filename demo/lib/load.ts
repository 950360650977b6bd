/**
 * The load phase: `connections` loops share one keep-alive agent and send requests from a weighted
 * mix until the duration or the request cap is reached (bounded in count and time).
 */
import http from 'node:http';
import { HOST } from './net.ts';
import type { LoadTarget } from './topology.ts';

export interface LoadOptions {
  readonly durationMs: number;
  readonly connections: number;
  readonly maxRequests: number;
  /** Response header whose values are counted (the observed traffic split). */
  readonly splitHeader?: string;
  /** Polled between requests: true ends the load early (Ctrl-C). */
  readonly stopped?: () => boolean;
}

export interface TargetResult {
  readonly target: LoadTarget;
  latenciesMs: number[];
  unexpected: number;
}

export interface LoadResult {
  readonly targets: TargetResult[];
  readonly statuses: Map<string, number>;
  readonly errors: Map<string, number>;
  readonly split: Map<string, number>;
  sent: number;
  elapsedMs: number;
}

const bump = (m: Map<string, number>, k: string): void => { m.set(k, (m.get(k) ?? 0) + 1); };

function once(agent: http.Agent, t: LoadTarget, out: LoadResult, tr: TargetResult, splitHeader: string | undefined): Promise<void> {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = http.request({ host: t.host ?? HOST, port: t.port, path: t.path, headers: t.headers, agent, timeout: 5000 }, (res) => {
      res.on('data', () => {});
      res.on('end', () => {
        tr.latenciesMs.push(performance.now() - started);
        const status = res.statusCode ?? 0;
        bump(out.statuses, String(status));
        if (status !== t.expect) tr.unexpected++;
        const v = splitHeader ? res.headers[splitHeader] : undefined;
        if (typeof v === 'string') bump(out.split, v);
        resolve();
      });
      res.on('error', (err) => { bump(out.errors, err.message); resolve(); });
    });
    req.on('timeout', () => req.destroy(new Error('timeout after 5 s')));
    req.on('error', (err: Error & { code?: string }) => { bump(out.errors, err.code ?? err.message); resolve(); });
    req.end();
  });
}

/** Picks a target by weight from a precomputed cumulative table. */
function picker(targets: readonly LoadTarget[]): () => number {
  const total = targets.reduce((a, t) => a + t.weight, 0);
  const cum: number[] = [];
  let acc = 0;
  for (const t of targets) { acc += t.weight / total; cum.push(acc); }
  return () => {
    const r = Math.random();
    for (let i = 0; i < cum.length; i++) if (r < cum[i]) return i;
    return cum.length - 1;
  };
}

export async function runLoad(targets: readonly LoadTarget[], opts: LoadOptions): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections });
  const out: LoadResult = { targets: targets.map((target) => ({ target, latenciesMs: [], unexpected: 0 })), statuses: new Map(), errors: new Map(), split: new Map(), sent: 0, elapsedMs: 0 };
  const pick = picker(targets);
  const started = performance.now();
  const deadline = started + opts.durationMs;
  const loop = async (): Promise<void> => {
    while (performance.now() < deadline && out.sent < opts.maxRequests && !opts.stopped?.()) {
      out.sent++;
      const i = pick();
      await once(agent, targets[i], out, out.targets[i], opts.splitHeader);
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, loop));
  out.elapsedMs = performance.now() - started;
  agent.destroy();
  return out;
}

/** Nearest-rank percentile of an unsorted sample (sorted in place). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
