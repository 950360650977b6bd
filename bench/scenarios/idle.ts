/**
 * Idle scenario (`--only idle`): a bare Node process, nginx and skua-proxy with a trivial static config,
 * each left idle for a few seconds, three runs, medians (lib/idle.ts; bench/tools/idle-footprint.ts is
 * the same measurement on its own). The goal: skua's RssAnon at most 25 MB over bare Node's.
 */
import { progress } from '../lib/progress.ts';
import { medianSample, sampleBareNode, sampleNginx, sampleSkua, type IdleOptions, type IdleSample } from '../lib/idle.ts';
import { buildSuffix } from '../lib/builds.ts';
import type { CheckOutcome, Column, Options, Row, ScenarioResult, TargetName } from '../lib/types.ts';

const RUNS = 3;
const WAIT_MS = 5000;
export const IDLE_GOAL_ANON_OVER_NODE_MB = 25;
const CHECK_NAME = `idle skua-proxy RssAnon <= ${IDLE_GOAL_ANON_OVER_NODE_MB} MB over bare Node`;

const COLUMNS: Column[] = [
  { key: 'rssMb', title: 'VmRSS MB', digits: 1, better: 'lower' },
  { key: 'anonMb', title: 'RssAnon MB', digits: 1, better: 'lower' },
  { key: 'heapUsedMb', title: 'heapUsed MB', digits: 1, better: 'lower' },
  { key: 'anonOverNodeMb', title: 'RssAnon over bare node MB', digits: 1, better: 'lower' },
];

interface Case { target: TargetName; key?: string; label: string; sample: (o: IdleOptions) => Promise<IdleSample> }
const CASES: readonly Case[] = [
  { target: 'direct', label: 'bare node (no proxy)', sample: sampleBareNode },
  { target: 'nginx', label: 'nginx, 1 worker', sample: sampleNginx },
  { target: 'skua', label: 'skua-proxy, trivial static config', sample: sampleSkua },
];

export async function runIdle(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const o: IdleOptions = { waitMs: WAIT_MS, skuaMain: opts.skuaMain, cold: false, dir };
  const cases = CASES.filter((c) => c.target === 'direct' || opts.targets.includes(c.target)).flatMap((c): Case[] => (c.target !== 'skua' ? [c]
    : opts.builds.map((b) => ({ ...c, key: b.name || undefined, label: c.label + buildSuffix(b), sample: (x: IdleOptions) => sampleSkua({ ...x, skuaMain: b.main, env: b.env }) }))));
  const samples = cases.map((): IdleSample[] => []);
  const errors = cases.map((): string | undefined => undefined);
  for (let run = 0; run < RUNS; run++) {
    progress('idle', `run ${run + 1}/${RUNS}: ${cases.map((c) => c.label).join(', ')}, ${WAIT_MS / 1000} s idle each`);
    for (const [i, c] of cases.entries()) {
      if (errors[i]) continue;
      try { samples[i].push(await c.sample(o)); } catch (err) { errors[i] = (err as Error).message; }
    }
  }
  const bare = samples[0].length ? medianSample(samples[0]) : undefined;
  const rows: Row[] = cases.map((c, i) => {
    const key = c.key;
    if (errors[i] || samples[i].length === 0) return { target: c.target, key, label: c.label, metrics: {}, error: errors[i] ?? 'no sample' };
    const m = medianSample(samples[i]);
    const metrics: Record<string, number> = { rssMb: m.rssMb, anonMb: m.anonMb };
    if (m.heapUsedMb !== undefined) metrics.heapUsedMb = m.heapUsedMb;
    if (bare) metrics.anonOverNodeMb = m.anonMb - bare.anonMb;
    return { target: c.target, key, label: c.label, metrics, samples: samples[i].map((s) => s.anonMb) };
  });
  for (const r of rows) if (!r.error) progress('idle', `${r.label}: VmRSS ${r.metrics.rssMb.toFixed(1)} MB, RssAnon ${r.metrics.anonMb.toFixed(1)} MB`);
  return {
    scenario: 'idle', title: 'idle footprint: bare Node, nginx and skua-proxy with a trivial static config',
    startedAt, seconds: (performance.now() - t0) / 1000, primary: 'anonMb', columns: COLUMNS, rows,
    settings: {
      runs: `${RUNS}, medians; each process idle ${WAIT_MS / 1000} s before sampling`,
      memory: 'VmRSS and RssAnon from /proc/PID/status (nginx: master + worker); heapUsed: V8 (skua: admin /memory)',
      skua: `${opts.skuaMain} -c <trivial static config> over a warmed compile cache (bin/warm-compile-cache.js, as the image)`,
    },
  };
}

/** The idle row: RssAnon at most 25 MB over bare Node's. */
export function idleChecks(results: ScenarioResult[]): CheckOutcome[] {
  const res = results.find((r) => r.scenario === 'idle');
  const skua = res?.rows.find((r) => r.target === 'skua');
  const over = skua?.metrics.anonOverNodeMb;
  if (!res || !skua) return [];
  if (over === undefined) return [{ name: CHECK_NAME, status: 'FAIL', min: IDLE_GOAL_ANON_OVER_NODE_MB, need: `need <= ${IDLE_GOAL_ANON_OVER_NODE_MB} MB`, detail: skua.error ?? 'no bare node sample' }];
  return [{ name: CHECK_NAME, status: over <= IDLE_GOAL_ANON_OVER_NODE_MB ? 'PASS' : 'FAIL', min: IDLE_GOAL_ANON_OVER_NODE_MB, need: `need <= ${IDLE_GOAL_ANON_OVER_NODE_MB} MB`, detail: `${over.toFixed(1)} MB over` }];
}
