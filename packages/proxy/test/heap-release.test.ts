// core/heap-release.ts: once a proxy is live after its first xDS configuration, one memory-reducing GC
// gives back the heap a big apply left committed (V8's memory reducer would wait ~100 s), and no
// global `gc` is left behind; not once the proxy has served a connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { releaseUnusedHeapSoon } from '../src/core/heap-release.ts';

/** heapTotal before and after releaseUnusedHeapSoon(served), with a burst of garbage made first. */
async function afterGarbage(served: () => boolean): Promise<{ before: number; after: number }> {
  let keep: Array<{ s: string; n: number[] }> = [];
  for (let i = 0; i < 400_000; i++) keep.push({ s: `resource-${i}`.repeat(3), n: [i, i + 1, i + 2] });
  keep = keep.slice(0, 1000);
  const before = process.memoryUsage().heapTotal;
  releaseUnusedHeapSoon(served);
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(keep.length, 1000);
  return { before, after: process.memoryUsage().heapTotal };
}

test('once traffic has started, nothing is collected on purpose', async () => {
  const { before, after } = await afterGarbage(() => true);
  assert.ok(after > before * 0.8, `heap committed ${(before / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MB`);
});

test('the heap left by a burst of garbage is given back; no global gc appears', async () => {
  const { before, after } = await afterGarbage(() => false);
  assert.ok(after < before * 0.6, `heap committed ${(before / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MB`);
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined');
});
