// Time slices of config work: one clock per thread, so phases that follow each other in one task share a budget.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { CONFIG_SLICE_MS, eachSliced, letRunFirst, TimeSlice } from '../src/core/time-slice.ts';

const busy = (ms: number): void => { const end = performance.now() + ms; while (performance.now() < end) { /* spin */ } };

test('a slice made after work in the same task is already due; next() starts a new one after I/O had its turn', async () => {
  await new TimeSlice().next();
  busy(CONFIG_SLICE_MS + 1);
  const later = new TimeSlice();
  assert.equal(later.due, true, 'the second phase counts from the last yield, not from its own start');
  let immediateRan = false;
  setImmediate(() => { immediateRan = true; });
  await later.next();
  assert.equal(immediateRan, true, 'what was queued before the yield ran');
  assert.equal(later.due, false);
  assert.equal(new TimeSlice().due, false);
});

test('eachSliced visits every item in order and lets I/O run when a slice is due', async () => {
  const seen: number[] = [];
  let immediates = 0;
  const tick = (): void => { immediates++; if (immediates < 1000) setImmediate(tick); };
  await new TimeSlice().next();
  setImmediate(tick);
  await eachSliced(Array.from({ length: 5000 }, (_, i) => i), (i) => { seen.push(i); busy(0.01); });
  assert.deepEqual(seen, Array.from({ length: 5000 }, (_, i) => i));
  assert.ok(immediates >= 2, `queued work ran between slices (${immediates} turns)`);
});

test('data-plane work that I/O queued for the check phase runs before the next slice, not after it', async () => {
  // As HTTP/1.1 write batching does: a socket read queues the turn's flush with setImmediate.
  let flushQueued = false;
  const unregister = letRunFirst(() => flushQueued);
  const order: string[] = [];
  const server = net.createServer((s) => {
    const timer = setInterval(() => s.write('x'), 3);
    s.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  client.on('data', () => {
    order.push('read');
    if (flushQueued) return;
    flushQueued = true;
    setImmediate(() => { order.push('flush'); flushQueued = false; });
  });
  await new Promise((r) => client.once('connect', r));
  const slice = new TimeSlice();
  for (let i = 0; i < 30; i++) {
    busy(CONFIG_SLICE_MS);
    order.push('slice');
    await slice.next();
  }
  client.destroy();
  server.close();
  unregister();
  const text = order.join(' ');
  assert.match(text, /read flush/, 'reads happened between slices');
  assert.doesNotMatch(text, /read( read)* slice/, `a read's flush waited for a slice: ${text}`);
});
