/**
 * L4 scenario: one TCP stream of `l4Bytes` through each target into a Node
 * sink, timed end to end by the source (connect → sink's ack of the last
 * byte). The same sink and source serve every target. The sink is warmed
 * first; each target then gets WARMUP_RUNS unrecorded runs and `l4Runs`
 * measured runs (fresh source process per target), median reported.
 */
import path from 'node:path';
import { progress } from '../lib/progress.ts';
import { runToCompletion, startProcess, stopProcess, tailOf } from '../lib/procs.ts';
import { freePort, waitForPort } from '../lib/net.ts';
import { REPO_ROOT, launchTarget, prepareTarget, stopTarget, type RunningTarget } from '../lib/targets.ts';
import type { Column, Options, Row, ScenarioResult, TargetName } from '../lib/types.ts';

const SINK = path.join(REPO_ROOT, 'bench/tools/tcp-sink.ts');
const SOURCE = path.join(REPO_ROOT, 'bench/tools/tcp-source.ts');
const WARMUP_RUNS = 2;
/** Unrecorded direct streams that warm the (long-lived) sink's JIT before any target. */
const SINK_WARMUP_RUNS = 4;

export const L4_COLUMNS: Column[] = [
  { key: 'gbps', title: 'Gb/s (median)', digits: 2, better: 'higher' },
  { key: 'gbpsBest', title: 'Gb/s (best)', digits: 2, better: 'higher' },
  { key: 'ms', title: 'ms (median)', digits: 1, better: 'lower' },
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

interface SourceLine {
  run: number;
  bytes: number;
  seconds: number;
}

/** Runs the source for warm-up + measured runs; returns measured seconds per run. */
async function pushStreams(port: number, opts: Options): Promise<number[]> {
  const runs = WARMUP_RUNS + opts.l4Runs;
  const args = [SOURCE, String(port), String(opts.l4Bytes), String(runs)];
  const r = await runToCompletion('tcp-source', process.execPath, args, runs * 60_000 + 5000);
  if (r.timedOut) throw new Error('tcp-source timed out');
  if (r.code !== 0) throw new Error(`tcp-source exited ${String(r.code)}: ${r.stderr.trim()}`);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as SourceLine);
  if (lines.length !== runs) throw new Error(`tcp-source reported ${lines.length} of ${runs} runs`);
  return lines.slice(WARMUP_RUNS).map((l) => l.seconds);
}

async function load(running: RunningTarget, opts: Options): Promise<Pick<Row, 'metrics' | 'samples'>> {
  const scope = `l4 ${running.target}`;
  progress(scope, `pushing ${WARMUP_RUNS} warm-up + ${opts.l4Runs} measured streams of ${opts.l4Bytes / 1e6} MB`);
  const seconds = await pushStreams(running.port, opts);
  const gbps = seconds.map((s) => (opts.l4Bytes * 8) / s / 1e9);
  const metrics = { gbps: median(gbps), gbpsBest: Math.max(...gbps), ms: median(seconds) * 1000 };
  progress(scope, `${metrics.gbps.toFixed(2)} Gb/s median (runs: ${gbps.map((g) => g.toFixed(2)).join(' ')})`);
  return { metrics, samples: gbps };
}

/** Start one target, push the streams, stop it; failures become the row's `error`. */
async function measure(target: TargetName, opts: Options, dir: string, sinkPort: number): Promise<Row> {
  const prepared = await prepareTarget(target, 'tcp', sinkPort, dir);
  const row: Row = { target, label: prepared.label, metrics: {}, config: prepared.config };
  progress(`l4 ${target}`, `starting ${prepared.label}`);
  let running: RunningTarget | undefined;
  try {
    running = await launchTarget(prepared, opts.skuaMain);
    Object.assign(row, await load(running, opts));
  } catch (err) {
    const logs = running?.proc ? tailOf(running.proc) : '';
    row.error = (err as Error).message + (logs ? `\n${running?.label} output:\n${logs}` : '');
    progress(`l4 ${target}`, `FAILED: ${row.error}`);
  } finally {
    if (running) await stopTarget(running);
  }
  return row;
}

export async function runL4(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const sinkPort = await freePort();
  progress('l4', `starting tcp sink on 127.0.0.1:${sinkPort}`);
  const sink = startProcess('tcp-sink', process.execPath, [SINK, String(sinkPort)]);
  const rows: Row[] = [];
  try {
    await waitForPort(sinkPort, sink);
    progress('l4', `warming the sink (${SINK_WARMUP_RUNS + WARMUP_RUNS} direct streams, not recorded)`);
    await pushStreams(sinkPort, { ...opts, l4Runs: SINK_WARMUP_RUNS });
    for (const target of opts.targets) rows.push(await measure(target, opts, dir, sinkPort));
  } finally {
    await stopProcess(sink);
  }
  return {
    scenario: 'l4',
    title: `TCP proxy, one ${opts.l4Bytes / 1e6} MB stream (Node source → proxy → Node sink)`,
    startedAt,
    seconds: (performance.now() - t0) / 1000,
    primary: 'gbps',
    columns: L4_COLUMNS,
    rows,
    settings: {
      bytes: opts.l4Bytes,
      measuredRuns: opts.l4Runs,
      warmupRuns: WARMUP_RUNS,
      workers: 'nginx (stream) worker_processes 1; haproxy mode tcp nbthread 1; skua-proxy --concurrency 1',
    },
  };
}
