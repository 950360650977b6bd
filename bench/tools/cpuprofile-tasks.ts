/**
 * What ran in the long tasks the loop monitor saw (bench/tools/loop-monitor.ts): for each gap between
 * two of its ticks over --over ms of thread CPU time, longest first, the samples of the same thread's
 * V8 .cpuprofile (node --cpu-prof) within the gap: its heaviest call path and the functions that spent
 * its time (self time, '(garbage collector)' included). The monitor's rows carry the profile's clock.
 *   node bench/tools/cpuprofile-tasks.ts --loop loop-PID-TID.json CPU.*.PID.TID.*.cpuprofile [--over 10] [--top 8] [--tasks 15]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Frame { functionName: string; url: string; lineNumber: number }
interface Node { id: number; callFrame: Frame; children?: number[] }
interface Profile { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number }
/** A loop-monitor row: [endEpochMs, cpuMs, wallMs, endMonoUs]. */
type Gap = [number, number, number, number];

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { loop: { type: 'string' }, over: { type: 'string', default: '10' }, top: { type: 'string', default: '8' }, tasks: { type: 'string', default: '15' } },
});
if (!values.loop || positionals.length !== 1) throw new Error('usage: cpuprofile-tasks.ts --loop loop-PID-TID.json PROFILE.cpuprofile [--over MS] [--top N] [--tasks N]');

const short = (url: string): string => url.replace(/^file:\/\/.*?\/(packages|node_modules)\//, '$1/').replace(/^.*\/node_modules\/\.pnpm\/[^/]+\/node_modules\//, '');
const label = (f: Frame): string => `${f.functionName || '(anonymous)'}${f.url ? ` ${short(f.url)}:${f.lineNumber + 1}` : ''}`;

const p = JSON.parse(readFileSync(positionals[0], 'utf8')) as Profile;
const gaps = (JSON.parse(readFileSync(values.loop, 'utf8')) as Gap[]).filter((g) => g[1] >= Number(values.over) && g[3]).sort((a, b) => b[1] - a[1]);
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
// Each sample's time and the time it stands for (the delta to the next sample).
const at: number[] = [];
let t = p.startTime;
for (let i = 0; i < p.samples.length; i++) at.push(t += p.timeDeltas[i] ?? 0);
console.log(`${positionals[0]}: ${gaps.length} gaps of ${values.over} ms CPU or more`);
for (const [, cpuMs, wallMs, endUs] of gaps.slice(0, Number(values.tasks))) {
  const fromUs = endUs - wallMs * 1000;
  const self = new Map<string, number>(), inclusive = new Map<number, number>();
  let sampledUs = 0;
  for (let i = 0; i < at.length; i++) {
    if (at[i] < fromUs || at[i] > endUs) continue;
    const us = (at[i + 1] ?? at[i]) - at[i], id = p.samples[i];
    sampledUs += us;
    const f = byId.get(id)!.callFrame;
    self.set(label(f), (self.get(label(f)) ?? 0) + us);
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) inclusive.set(n, (inclusive.get(n) ?? 0) + us);
  }
  // The heaviest path: from the root, the child that carried most of the gap's time; JS frames only.
  const path: string[] = [];
  for (let n: Node | undefined = p.nodes[0]; n;) {
    const next: number | undefined = (n.children ?? []).filter((c) => inclusive.has(c)).sort((a, b) => inclusive.get(b)! - inclusive.get(a)!)[0];
    n = next === undefined ? undefined : byId.get(next);
    if (n?.callFrame.url) path.push(`${n.callFrame.functionName || '(anonymous)'} ${(100 * inclusive.get(n.id)! / sampledUs).toFixed(0)}%`);
  }
  console.log(`\n${cpuMs.toFixed(1)} ms CPU, ${wallMs.toFixed(1)} ms wall, ${(sampledUs / 1000).toFixed(1)} ms sampled, ending ${((endUs - p.startTime) / 1e6).toFixed(3)} s into the profile:`);
  console.log(`  ${path.reverse().slice(0, 14).join(' < ')}`);
  for (const [k, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) console.log(`  ${(us / 1000).toFixed(1).padStart(6)} ms  ${k}`);
}
