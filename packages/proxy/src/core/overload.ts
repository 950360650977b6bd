/**
 * Envoy's overload manager for one thread: counts downstream connections against the global cap
 * (across every thread with --concurrency N),
 * samples heap pressure on a coarse timer, and publishes which actions are active as plain
 * booleans the data path reads (no call, no lookup). Stats use Envoy's names:
 * `overload.<monitor>.pressure`, `overload.<action>.active`.
 */
import type { StatsStore, Gauge } from '../stats/store.ts';
import { log } from './log.ts';
import { FIXED_HEAP, GLOBAL_CONNECTIONS, type OverloadConfig } from './overload-config.ts';

/** What the data path reads. Written only by the overload manager. */
export const overloadState = {
  /** envoy.overload_actions.stop_accepting_requests: new requests get 503 + x-envoy-overloaded. */
  stopAcceptingRequests: false,
  /** envoy.overload_actions.stop_accepting_connections: new connections are closed on accept. */
  stopAcceptingConnections: false,
  /** envoy.overload_actions.disable_http_keepalive: responses close the connection (HTTP/2: GOAWAY). */
  disableKeepalive: false,
  /** Downstream connections open now (accepted sockets, not internal ones). */
  connections: 0,
  /** Downstream connections accepted since start (whether the proxy has served traffic yet). */
  accepted: 0,
  maxConnections: Number.MAX_SAFE_INTEGER,
};

/**
 * --concurrency N: the process's downstream connections, which every thread counts, so that
 * global_downstream_max_connections caps the process as Envoy's does, not each thread.
 */
let sharedConnections: Int32Array | undefined;

export function newSharedConnectionCount(): SharedArrayBuffer {
  return new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
}

export function useSharedConnectionCount(memory: SharedArrayBuffer): void {
  sharedConnections = new Int32Array(memory);
}

/** Takes a place under global_downstream_max_connections for one accepted socket; false at the cap. */
export function admitDownstream(): boolean {
  const shared = sharedConnections;
  if (shared) {
    if (Atomics.add(shared, 0, 1) >= overloadState.maxConnections) { Atomics.sub(shared, 0, 1); return false; }
  } else if (overloadState.connections >= overloadState.maxConnections) return false;
  overloadState.connections++;
  return true;
}

/** An admitted downstream socket closed (or was turned away after all). */
export function releaseDownstream(): void {
  overloadState.connections--;
  if (sharedConnections) Atomics.sub(sharedConnections, 0, 1);
}

/**
 * --concurrency N: each thread's last heap sample (KiB) in its own slot, so that fixed_heap judges the
 * process's heap, as Envoy's does (process.memoryUsage() sees only the calling thread's V8 heap).
 */
let heapSlots: Int32Array | undefined;
let heapSlot = 0;

export function newSharedHeapSlots(threads: number): SharedArrayBuffer {
  return new SharedArrayBuffer(threads * Int32Array.BYTES_PER_ELEMENT);
}

/** `index`: this thread's slot (the main thread 0, worker i slot i). */
export function useSharedHeapSlots(memory: SharedArrayBuffer, index: number): void {
  heapSlots = new Int32Array(memory);
  heapSlot = index;
}

/** This thread's heap in use (bytes) plus the other threads' last samples; publishes this thread's. */
function processHeap(own: number): number {
  const slots = heapSlots;
  if (!slots) return own;
  Atomics.store(slots, heapSlot, Math.min(Math.floor(own / 1024), 0x7fffffff));
  let othersKb = 0;
  for (let i = 0; i < slots.length; i++) if (i !== heapSlot) othersKb += Atomics.load(slots, i);
  return own + othersKb * 1024;
}

/** Reads the heap in use: V8's heap plus memory held outside it (Buffers). Replaceable in tests. */
export type HeapSampler = () => number;
const sampleHeap: HeapSampler = () => { const m = process.memoryUsage(); return m.heapUsed + m.external; };

export class OverloadManager {
  readonly config: OverloadConfig;
  private readonly pressure: Gauge | undefined;
  private readonly active: ReadonlyArray<{ name: string; threshold: number; gauge: Gauge }>;
  private timer: NodeJS.Timeout | undefined;
  private readonly sample: HeapSampler;

  constructor(config: OverloadConfig, store: StatsStore, sample: HeapSampler = sampleHeap) {
    this.config = config;
    this.sample = sample;
    overloadState.maxConnections = config.maxConnections;
    store.gauge(`overload.${GLOBAL_CONNECTIONS}.max`).set(config.maxConnections);
    this.pressure = config.maxHeapBytes > 0 ? store.gauge(`overload.${FIXED_HEAP}.pressure`) : undefined;
    // One gauge per action name; several triggers of one action share it.
    const gauges = new Map<string, Gauge>();
    this.active = config.actions.map((a) => {
      let g = gauges.get(a.name);
      if (!g) { g = store.gauge(`overload.${a.name}.active`); gauges.set(a.name, g); }
      return { name: a.name, threshold: a.threshold, gauge: g };
    });
  }

  start(): void {
    if (!this.pressure) return;
    this.refresh();
    this.timer = setInterval(() => this.refresh(), this.config.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Samples the heap and sets the actions' states (also called by tests to skip the wait). */
  refresh(): void {
    const pressure = processHeap(this.sample()) / this.config.maxHeapBytes;
    this.pressure?.set(Math.floor(pressure * 100));
    const on = new Set<string>();
    for (const a of this.active) if (pressure >= a.threshold) on.add(a.name);
    for (const a of this.active) a.gauge.set(on.has(a.name) ? 1 : 0);
    const requests = on.has('envoy.overload_actions.stop_accepting_requests');
    if (requests !== overloadState.stopAcceptingRequests) log.warn(`overload: stop_accepting_requests ${requests ? 'on' : 'off'} (heap pressure ${(pressure * 100).toFixed(1)}%)`);
    overloadState.stopAcceptingRequests = requests;
    overloadState.stopAcceptingConnections = on.has('envoy.overload_actions.stop_accepting_connections');
    overloadState.disableKeepalive = on.has('envoy.overload_actions.disable_http_keepalive');
  }
}
