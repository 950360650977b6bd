/**
 * Idle footprint (issue 13), on its own: a bare Node process and skua-proxy with a trivial static config,
 * both left idle, side by side (`./dev bench --only idle` runs the same with nginx beside them).
 *   node bench/tools/idle-footprint.ts [--wait-s 5] [--runs 3] [--cold]
 * Prints VmRSS, RssAnon and V8's heapUsed for each, medians over the runs; every process is stopped by
 * PID. skua-proxy starts as shipped (bin/skua-proxy.js) over a compile cache warmed first
 * (bin/warm-compile-cache.js, as the image does); --cold disables the cache: type stripping then loads
 * its compiler.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { medianSample, sampleBareNode, sampleSkua, type IdleOptions, type IdleSample } from '../lib/idle.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const { values } = parseArgs({ options: { 'wait-s': { type: 'string', default: '5' }, runs: { type: 'string', default: '3' }, cold: { type: 'boolean', default: false } } });
const RUNS = Number(values.runs);

const dir = mkdtempSync(join(tmpdir(), 'skua-idle-'));
try {
  const o: IdleOptions = { waitMs: Number(values['wait-s']) * 1000, skuaMain: join(ROOT, 'packages/proxy/bin/skua-proxy.js'), cold: values.cold === true, dir };
  process.env.NODE_COMPILE_CACHE = join(dir, 'compile-cache');
  if (!o.cold) execFileSync(process.execPath, [join(ROOT, 'packages/proxy/bin/warm-compile-cache.js')], { stdio: 'ignore' });
  const bare: IdleSample[] = [], proxy: IdleSample[] = [];
  for (let i = 0; i < RUNS; i++) { bare.push(await sampleBareNode(o)); proxy.push(await sampleSkua(o)); }
  const [b, p] = [medianSample(bare), medianSample(proxy)];
  const num = (v: number | undefined, w: number): string => (v === undefined ? '–' : v.toFixed(1)).padStart(w);
  const row = (name: string, s: IdleSample): string => `${name.padEnd(12)}${num(s.rssMb, 10)}${num(s.anonMb, 10)}${num(s.heapUsedMb, 12)}`;
  process.stdout.write(`idle ${o.waitMs / 1000} s, median of ${RUNS}, compile cache ${o.cold ? 'off' : 'warm'} (MB)\n${''.padEnd(12)}${'VmRSS'.padStart(10)}${'RssAnon'.padStart(10)}${'heapUsed'.padStart(12)}\n`);
  process.stdout.write(`${row('bare node', b)}\n${row('skua-proxy', p)}\n`);
  process.stdout.write(`${row('difference', { rssMb: p.rssMb - b.rssMb, anonMb: p.anonMb - b.anonMb, heapUsedMb: (p.heapUsedMb ?? 0) - (b.heapUsedMb ?? 0) })}\n`);
} finally { rmSync(dir, { recursive: true, force: true }); }
