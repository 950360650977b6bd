/**
 * collectStartUpGarbage (issue 13): the GC after start-up shrinks V8's young generation back and
 * returns its pages to the system, leaves no gc() on the global, flushes the compile cache, and leaves
 * the cache's key as it was (a module loaded afterwards still hits the cache: no type-stripping compiler).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HEAP = new URL('../src/core/startup-heap.ts', import.meta.url).href;

function run(script: string): Record<string, unknown> {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

test('after start-up garbage grew the young generation, the GC shrinks it, returns its pages and exposes no gc()', () => {
  const result = run(`
    import { getHeapSpaceStatistics } from 'node:v8';
    import { readFileSync } from 'node:fs';
    const { collectStartUpGarbage } = await import(${JSON.stringify(HEAP)});
    const newSpace = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
    const anonKb = () => Number(/^RssAnon:\\s+(\\d+)/m.exec(readFileSync('/proc/self/status', 'latin1'))[1]);
    // Survivors grow the young generation, as loading modules and compiling a config do.
    const kept = [];
    for (let i = 0; i < 400_000; i++) { kept.push({ i, s: 'x' + i }); if (kept.length > 100_000) kept.length = 0; }
    const [grown, anonBefore] = [newSpace(), anonKb()];
    kept.length = 0;
    collectStartUpGarbage();
    process.stdout.write(JSON.stringify({ grown, after: newSpace(), returnedKb: anonBefore - anonKb(), gc: typeof globalThis.gc }) + '\\n');`);
  assert.ok((result.grown as number) >= 4 * 2 ** 20, `the young generation grew (sanity): ${String(result.grown)}`);
  assert.ok((result.after as number) <= 2 ** 20, `shrunk to its initial size: ${String(result.after)}`);
  // A plain full GC shrinks it too but keeps the pages pooled: RssAnon stays.
  assert.ok((result.returnedKb as number) >= 4096, `its pages were returned: ${String(result.returnedKb)} kB`);
  assert.equal(result.gc, 'undefined');
});

test('a module loaded after the GC still hits the compile cache', () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-heap-cc-'));
  try {
    const start = (collect: boolean): unknown => run(`
      import { enableCompileCache, flushCompileCache } from 'node:module';
      enableCompileCache(${JSON.stringify(dir)});
      const { collectStartUpGarbage } = await import(${JSON.stringify(HEAP)});
      if (${collect}) collectStartUpGarbage();
      await import(${JSON.stringify(new URL('../src/filters/http/cors/config.ts', import.meta.url).href)});
      flushCompileCache();
      process.stdout.write(JSON.stringify({ amaro: process.moduleLoadList.some((m) => m.includes('amaro')) }) + '\\n');`).amaro;
    assert.equal(start(false), true, 'the first start strips types (sanity)');
    assert.equal(start(true), false, 'the cache is hit after the GC');
    assert.equal(start(false), false, 'and without it (sanity)');
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('the compile cache is flushed: a cold start has written its entries before exit (and Node dropped them from memory)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-heap-flush-'));
  try {
    const result = run(`
      import { enableCompileCache } from 'node:module';
      import { readdirSync } from 'node:fs';
      const { directory } = enableCompileCache(${JSON.stringify(dir)});
      const { collectStartUpGarbage } = await import(${JSON.stringify(HEAP)});
      await import(${JSON.stringify(new URL('../src/filters/http/cors/config.ts', import.meta.url).href)});
      const files = () => readdirSync(directory, { recursive: true }).filter((f) => String(f).includes('/')).length;
      const before = files();
      collectStartUpGarbage();
      process.stdout.write(JSON.stringify({ before, after: files() }) + '\\n');`);
    assert.equal(result.before, 0, 'nothing on disk before (sanity: Node writes at exit)');
    assert.ok((result.after as number) > 0, `entries written by the flush: ${String(result.after)}`);
    assert.ok(readdirSync(dir).length > 0);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('once a downstream connection has come in, nothing is collected on purpose (a pause under traffic costs more)', () => {
  const result = run(`
    import { getHeapSpaceStatistics } from 'node:v8';
    const { collectStartUpGarbage } = await import(${JSON.stringify(HEAP)});
    const { overloadState } = await import(${JSON.stringify(new URL('../src/core/overload.ts', import.meta.url).href)});
    const newSpace = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
    const kept = [];
    for (let i = 0; i < 400_000; i++) { kept.push({ i, s: 'x' + i }); if (kept.length > 100_000) kept.length = 0; }
    const grown = newSpace();
    overloadState.accepted = 1;
    collectStartUpGarbage();
    process.stdout.write(JSON.stringify({ grown, after: newSpace() }) + '\\n');`);
  assert.ok((result.grown as number) >= 4 * 2 ** 20, `the young generation grew (sanity): ${String(result.grown)}`);
  assert.equal(result.after, result.grown, 'not shrunk: no GC was run');
});
