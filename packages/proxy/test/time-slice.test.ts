// Time slices of config work: one clock per thread, so phases that follow each other in one task share a budget.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { CONFIG_SLICE_MS, PACE_RATIO, eachSliced, letRunFirst, TimeSlice } from '../src/core/time-slice.ts';
import { overloadState } from '../src/core/overload.ts';

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

test('config work that starts after the loop went round gets a whole slice, however long the thread was idle', async () => {
  const before = new TimeSlice();
  await before.next();
  busy(CONFIG_SLICE_MS + 1);
  assert.equal(before.due, true, 'the earlier task used its slice up');
  await new Promise((r) => setTimeout(r, 2 * CONFIG_SLICE_MS));
  const before2 = overloadState.connections;
  overloadState.connections = 1;
  try {
    const update = new TimeSlice();
    assert.equal(update.due, false, 'an everyday update, arriving later, is not due at its first item (no paced rest before it)');
    busy(CONFIG_SLICE_MS);
    assert.equal(update.due, true, 'the same task, once its budget is used, is due');
  } finally { overloadState.connections = before2; }
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

test('with downstream connections open, a full slice is followed by PACE_RATIO times as long without config work', async () => {
  const slice = new TimeSlice();
  const yieldAfterFullSlice = async (): Promise<number> => {
    await slice.next();
    busy(CONFIG_SLICE_MS);
    const t0 = performance.now();
    await slice.next();
    return performance.now() - t0;
  };
  const before = overloadState.connections;
  overloadState.connections = 1;
  let paced: number;
  try { paced = await yieldAfterFullSlice(); } finally { overloadState.connections = before; }
  // setTimeout never fires early by more than its 1 ms resolution.
  assert.ok(paced >= CONFIG_SLICE_MS * PACE_RATIO - 1, `paced yield took ${paced.toFixed(1)} ms`);
  // The pause counts the work since the last yield, at most two budgets: time the thread sat idle is not work.
  await slice.next();
  await new Promise((r) => setTimeout(r, 50));
  overloadState.connections = 1;
  let afterIdle: number;
  try { const t0 = performance.now(); await slice.next(); afterIdle = performance.now() - t0; } finally { overloadState.connections = before; }
  assert.ok(afterIdle < 2 * CONFIG_SLICE_MS * PACE_RATIO + 40, `after 50 ms idle the yield took ${afterIdle.toFixed(1)} ms (idle time counted as work would be 150 ms)`);
  assert.equal(overloadState.connections, before);
});

test('with no downstream connections, config work is not paced (start-up and idle proxies apply at full speed)', async () => {
  assert.equal(overloadState.connections, 0);
  const slice = new TimeSlice();
  let total = 0;
  for (let i = 0; i < 20; i++) {
    busy(CONFIG_SLICE_MS);
    const t0 = performance.now();
    await slice.next();
    total += performance.now() - t0;
  }
  // Paced, 20 yields would wait at least 20 x 9 ms = 180 ms.
  assert.ok(total < 20 * CONFIG_SLICE_MS * PACE_RATIO / 2, `20 unpaced yields took ${total.toFixed(1)} ms`);
});
