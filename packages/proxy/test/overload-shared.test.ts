// --concurrency N: fixed_heap judges the process's heap, not the calling thread's. Each thread's
// manager publishes its heap sample in its slot of shared memory and adds the others' to its own.
// Modelled in one thread: this thread is slot 0, a worker's sample is written into slot 1.
// (Its own file: the shared slots are per process.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StatsStore } from '../src/stats/store.ts';
import { newSharedHeapSlots, OverloadManager, overloadState, useSharedHeapSlots } from '../src/core/overload.ts';
import type { OverloadConfig } from '../src/core/overload-config.ts';

const MIB = 1024 * 1024;

test("fixed_heap adds the other threads' heaps: two threads at 50 MiB each trip an action set at 90% of 100 MiB", () => {
  const slots = newSharedHeapSlots(2);
  useSharedHeapSlots(slots, 0);
  const config: OverloadConfig = {
    maxConnections: 100, maxConnectionsSource: 'monitor', maxHeapBytes: 100 * MIB, refreshMs: 1000,
    actions: [{ name: 'envoy.overload_actions.stop_accepting_requests', threshold: 0.9 }],
  };
  const store = new StatsStore();
  const m = new OverloadManager(config, store, () => 50 * MIB);
  m.refresh();
  const pressure = (): number | undefined => store.find('gauges', 'overload.envoy.resource_monitors.fixed_heap.pressure')?.value;
  assert.equal(pressure(), 50, 'alone: its own heap');
  assert.equal(overloadState.stopAcceptingRequests, false);
  assert.equal(new Int32Array(slots)[0], 50 * 1024, 'its sample is published (KiB)');
  Atomics.store(new Int32Array(slots), 1, 45 * 1024); // a worker thread's last sample
  m.refresh();
  assert.equal(pressure(), 95);
  assert.equal(overloadState.stopAcceptingRequests, true, 'the process is at 95%');
  Atomics.store(new Int32Array(slots), 1, 10 * 1024);
  m.refresh();
  assert.equal(pressure(), 60);
  assert.equal(overloadState.stopAcceptingRequests, false);
});
