/**
 * What made the probe's slow requests slow during an xds-scale push:
 * `node bench/tools/probe-timeline.ts DIR [ROW] [--list]` with DIR from XDS_SCALE_KEEP (best with
 * LOOP_MONITOR_WALL_MS=3 in the environment, so the loop monitor records short gaps too).
 * A request is slow when its latency is over 2x the idle p99 (the acceptance line). For each, the
 * time between its due time and its answer is split into: GC pauses of the proxy, loop gaps of the
 * proxy's threads (in wall time, and how much of it the thread had a CPU), and the rest (time the
 * proxy's loops came round: the probe's own side, or the kernel). --list prints every slow request.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface ProbeFile { idleFrom: number; pushFrom: number; pushTo: number; samples: Array<[number, number, number]> }
/** [start, end] in epoch ms, plus the thread's CPU ms for a loop gap or the kind for a GC pause. */
type Span = [number, number, number];

const args = process.argv.slice(2);
const [dir, row = 'delta-1'] = args.filter((a) => !a.startsWith('--'));
if (!dir) {
  process.stderr.write('usage: probe-timeline.ts DIR [ROW] [--list]\n');
  process.exit(2);
}
const probe = JSON.parse(readFileSync(path.join(dir, `probe-${row}.json`), 'utf8')) as ProbeFile;
const monitorDir = path.join(dir, `loop-${row}`);
const gaps: Span[] = [], pauses: Span[] = [];
for (const f of readdirSync(monitorDir).filter((x) => x.endsWith('.json'))) {
  const rows = JSON.parse(readFileSync(path.join(monitorDir, f), 'utf8')) as number[][];
  if (f.startsWith('loop-')) for (const [end, cpu, wall] of rows) gaps.push([end - wall, end, cpu]);
  if (f.startsWith('pauses-')) for (const [end, ms, kind] of rows) pauses.push([end - ms, end, kind]);
}

const quantile = (sorted: readonly number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const overlap = (a0: number, a1: number, b0: number, b1: number): number => Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
const sum = (xs: readonly number[]): number => xs.reduce((a, x) => a + x, 0);
const f1 = (x: number): string => x.toFixed(1);

const idle = probe.samples.filter(([due]) => due >= probe.idleFrom && due < probe.pushFrom).map(([, ms]) => ms).sort((a, b) => a - b);
const push = probe.samples.filter(([due]) => due >= probe.pushFrom && due < probe.pushTo);
const pushMs = push.map(([, ms]) => ms).sort((a, b) => a - b);
const slowOver = 2 * quantile(idle, 0.99);
const allowed = pushMs.length - Math.floor(0.99 * pushMs.length) - 1;
console.log(`idle: ${idle.length} requests, p50 ${f1(quantile(idle, 0.5))} p99 ${f1(quantile(idle, 0.99))} ms`);
console.log(`push: ${pushMs.length} requests in ${f1((probe.pushTo - probe.pushFrom) / 1000)} s, p50 ${f1(quantile(pushMs, 0.5))} p99 ${f1(quantile(pushMs, 0.99))} max ${f1(pushMs.at(-1) ?? NaN)} ms; ${pushMs.filter((ms) => ms > slowOver).length} over ${f1(slowOver)} ms (p99 <= 2x idle allows ${allowed})`);

const inPush = ([start]: Span): boolean => start >= probe.pushFrom && start < probe.pushTo;
const pushPauses = pauses.filter(inPush);
const byKind = (kind: number): string => { const p = pushPauses.filter((x) => x[2] === kind); return `${p.length} (${sum(p.map(([s, e]) => e - s)).toFixed(0)} ms, longest ${f1(Math.max(0, ...p.map(([s, e]) => e - s)))})`; };
console.log(`GC pauses >= 1 ms in the push: scavenges ${byKind(1)}, mark-compacts ${byKind(4)}`);

let latency = 0, inGc = 0, inGaps = 0, gapCpu = 0;
for (const [due, ms] of push.filter(([, ms]) => ms > slowOver).sort((a, b) => a[0] - b[0])) {
  const end = due + ms;
  const gc = sum(pauses.map(([s, e]) => overlap(due, end, s, e)));
  const hit = gaps.filter(([s, e]) => overlap(due, end, s, e) > 0);
  const wall = sum(hit.map(([s, e]) => overlap(due, end, s, e)));
  const cpu = sum(hit.map(([s, e, c]) => (c * overlap(due, end, s, e)) / (e - s)));
  latency += ms; inGc += gc; inGaps += wall; gapCpu += cpu;
  if (args.includes('--list')) console.log(`  +${(due - probe.pushFrom).toFixed(0).padStart(5)} ms: ${f1(ms).padStart(6)} ms, GC ${f1(gc)}, loop gaps ${f1(wall)} wall / ${f1(cpu)} CPU [${hit.map(([s, e, c]) => `${(e - s).toFixed(0)}w/${c.toFixed(0)}c`).join(' ')}]`);
}
const pct = (x: number): string => `${((100 * x) / latency).toFixed(0)}%`;
console.log(`slow requests' time, ${latency.toFixed(0)} ms: GC pauses ${inGc.toFixed(0)} ms (${pct(inGc)}); loop gaps ${inGaps.toFixed(0)} ms (${pct(inGaps)}), ` +
  `of which the thread ran ${gapCpu.toFixed(0)} ms and waited for a CPU (or on GC helpers) ${(inGaps - gapCpu).toFixed(0)} ms (${pct(inGaps - gapCpu)}); outside any loop gap ${(latency - inGaps).toFixed(0)} ms (${pct(latency - inGaps)})`);
