/**
 * Summarise a V8 .heapsnapshot: count and self size per constructor (or node type), biggest first;
 * with --retainers NAME, the commonest retainer chains (edge names and owners) of objects named NAME
 * (str:PREFIX: strings starting with PREFIX); --strings: the biggest strings.
 *   node bench/tools/heapsnapshot-top.ts FILE.heapsnapshot [--top 40] [--retainers NAME] [--depth 6] [--strings]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[]; edges: number[]; strings: string[];
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' }, retainers: { type: 'string', default: '' }, depth: { type: 'string', default: '6' }, strings: { type: 'boolean', default: false } } });
const s = JSON.parse(readFileSync(positionals[0], 'utf8')) as Snapshot;
const m = s.snapshot.meta;
const NF = m.node_fields.length, EF = m.edge_fields.length;
const [nType, nName, nSize, nEdges] = ['type', 'name', 'self_size', 'edge_count'].map((f) => m.node_fields.indexOf(f));
const [eType, eName, eTo] = ['type', 'name_or_index', 'to_node'].map((f) => m.edge_fields.indexOf(f));
const nodeTypes = m.node_types[0], edgeTypes = m.edge_types[0];
const count = s.nodes.length / NF;
const label = (i: number): string => {
  const t = nodeTypes[s.nodes[i * NF + nType]];
  const name = s.strings[s.nodes[i * NF + nName]];
  return t === 'object' || t === 'closure' ? name : `(${t})${t === 'native' || t === 'hidden' ? ` ${name.slice(0, 40)}` : ''}`;
};
const firstEdge = new Uint32Array(count + 1);
for (let i = 0; i < count; i++) firstEdge[i + 1] = firstEdge[i] + s.nodes[i * NF + nEdges] * EF;

const agg = new Map<string, { n: number; size: number }>();
let total = 0;
for (let i = 0; i < count; i++) {
  const k = label(i);
  const a = agg.get(k) ?? { n: 0, size: 0 };
  a.n++; a.size += s.nodes[i * NF + nSize]; total += s.nodes[i * NF + nSize];
  agg.set(k, a);
}
console.log(`${positionals[0]}: ${count} nodes, ${(total / 2 ** 20).toFixed(1)} MB self size`);
for (const [k, a] of [...agg].sort((x, y) => y[1].size - x[1].size).slice(0, Number(values.top))) {
  console.log(`${(a.size / 2 ** 20).toFixed(2).padStart(8)} MB ${String(a.n).padStart(8)}  ${k}`);
}

if (values.retainers) {
  const retainers: number[][] = Array.from({ length: count }, () => []);
  const via: string[][] = Array.from({ length: count }, () => []);
  for (let i = 0; i < count; i++) {
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EF) {
      const et = edgeTypes[s.edges[e + eType]];
      if (et === 'weak') continue;
      const to = s.edges[e + eTo] / NF;
      const nameOrIndex = s.edges[e + eName];
      retainers[to].push(i);
      via[to].push(et === 'element' || et === 'hidden' ? `[${nameOrIndex}]` : s.strings[nameOrIndex]);
    }
  }
  // NAME is a constructor name, or str:PREFIX for strings that start with PREFIX.
  const want = values.retainers;
  const matches = (i: number): boolean => (want.startsWith('str:')
    ? nodeTypes[s.nodes[i * NF + nType]] === 'string' && s.strings[s.nodes[i * NF + nName]].startsWith(want.slice(4))
    : label(i) === want);
  const chains = new Map<string, number>();
  const depth = Number(values.depth);
  for (let i = 0; i < count; i++) {
    if (!matches(i)) continue;
    let cur = i;
    const parts: string[] = [];
    for (let d = 0; d < depth && retainers[cur].length; d++) {
      // The first retainer that is not a system/code object.
      let k = retainers[cur].findIndex((r) => !/^\((code|system|hidden|array)/.test(label(r)));
      if (k < 0) k = 0;
      parts.push(`${via[cur][k]} ← ${label(retainers[cur][k])}`);
      cur = retainers[cur][k];
    }
    const key = parts.join('  ');
    chains.set(key, (chains.get(key) ?? 0) + 1);
  }
  console.log(`-- retainer chains of ${values.retainers}`);
  for (const [k, n] of [...chains].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${String(n).padStart(7)}  ${k}`);
}

if (values.strings) {
  // The biggest strings, and where strings of a common prefix add up (a loaded schema, a source file).
  const big: Array<[number, string]> = [];
  for (let i = 0; i < count; i++) if (nodeTypes[s.nodes[i * NF + nType]] === 'string') big.push([s.nodes[i * NF + nSize], s.strings[s.nodes[i * NF + nName]]]);
  big.sort((a, b) => b[0] - a[0]);
  console.log('-- biggest strings');
  for (const [size, text] of big.slice(0, Number(values.top))) console.log(`${(size / 1024).toFixed(1).padStart(9)} KB  ${JSON.stringify(text.slice(0, 100))}`);
  const bySize = new Map<string, { n: number; size: number }>();
  for (const [size, text] of big) { const k = size > 4096 ? 'strings > 4 KB' : size > 256 ? 'strings 256 B–4 KB' : 'strings ≤ 256 B'; const a = bySize.get(k) ?? { n: 0, size: 0 }; a.n++; a.size += size; bySize.set(k, a); }
  for (const [k, a] of bySize) console.log(`${(a.size / 2 ** 20).toFixed(2).padStart(8)} MB ${String(a.n).padStart(8)}  ${k}`);
}
