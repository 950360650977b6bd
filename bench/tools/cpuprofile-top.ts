/**
 * Summarise a V8 .cpuprofile (node --cpu-prof): self time per function and per file, busiest first,
 * and the inclusive time of functions whose name matches --grep.
 *   node bench/tools/cpuprofile-top.ts FILE.cpuprofile [--top 40] [--grep REGEX] [--skip-s S]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Frame { functionName: string; url: string; lineNumber: number }
interface Node { id: number; callFrame: Frame; children?: number[] }
interface Profile { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' }, grep: { type: 'string', default: '' }, 'skip-s': { type: 'string', default: '0' } } });
const skipUs = Number(values['skip-s']) * 1e6;
const top = Number(values.top);

for (const file of positionals) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  // --skip-s: leave out the first seconds (start-up: module loading, config) to see the steady state.
  let t = 0;
  p.samples.forEach((id, i) => { t += p.timeDeltas[i] ?? 0; if (t >= skipUs) selfUs.set(id, (selfUs.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)); });
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const short = (url: string): string => url.replace(/^file:\/\/.*?\/(packages|node_modules)\//, '$1/').replace(/^node:/, 'node:');
  const key = (f: Frame): string => `${f.functionName || '(anonymous)'}  ${short(f.url)}:${f.lineNumber + 1}`;
  const fnSelf = new Map<string, number>(), fileSelf = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const f = byId.get(id)!.callFrame;
    fnSelf.set(key(f), (fnSelf.get(key(f)) ?? 0) + us);
    const fileKey = f.url ? short(f.url).replace(/^(node_modules\/\.pnpm\/[^/]+\/node_modules\/[^/]+).*$/, '$1') : `(${f.functionName})`;
    fileSelf.set(fileKey, (fileSelf.get(fileKey) ?? 0) + us);
  }
  const idle = fnSelf.get('(idle)  :0') ?? 0;
  const pct = (us: number): string => `${((us / (total - idle)) * 100).toFixed(1).padStart(5)}%`;
  console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${((total - idle) / 1e6).toFixed(2)} s busy (percentages of busy time)`);
  console.log('-- self time by file');
  for (const [k, us] of [...fileSelf].sort((a, b) => b[1] - a[1]).slice(0, top)) if (k !== '((idle))') console.log(`${pct(us)}  ${k}`);
  console.log('-- self time by function');
  for (const [k, us] of [...fnSelf].sort((a, b) => b[1] - a[1]).slice(0, top)) if (!k.startsWith('(idle)')) console.log(`${pct(us)}  ${k}`);
  if (values.grep) {
    const re = new RegExp(values.grep);
    const incl = new Map<string, number>();
    for (const [id, us] of selfUs) {
      const seen = new Set<string>();
      for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
        const k = key(byId.get(n)!.callFrame);
        if (re.test(k) && !seen.has(k)) { seen.add(k); incl.set(k, (incl.get(k) ?? 0) + us); }
      }
    }
    console.log(`-- inclusive time of /${values.grep}/`);
    for (const [k, us] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${k}`);
  }
}
