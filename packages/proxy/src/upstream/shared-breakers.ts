/**
 * Circuit-breaker counts shared by every thread of one proxy (--concurrency N), as Envoy's are: its
 * ResourceManager is one per cluster across all workers, so max_requests 100 means 100 in the whole
 * process, not 100 per worker. One SharedArrayBuffer, made by the main thread before the workers start,
 * holds an open-addressed table keyed by the cluster's name (two 32-bit hashes); each entry has the
 * counts of both priorities' five resources, changed with Atomics. An entry is claimed once, by whichever
 * thread first builds a cluster of that name, and kept: a cluster updated or re-added under its name
 * finds its counts again, and a request still in flight on a replaced cluster gives its count back there.
 * A full table (more cluster names than slots) leaves the rest with per-thread counts, and says so once.
 */
import { logger } from '../core/log.ts';

const log = logger('upstream');

/** Entry words: state, hash a, hash b, then 2 priorities x 5 resources. */
const STATE = 0, HASH_A = 1, HASH_B = 2, COUNTS = 3;
export const RESOURCES = 5;
const WORDS = COUNTS + 2 * RESOURCES;
const EMPTY = 0, CLAIMING = 1, READY = 2;
/** Slots probed before a name is given up on (the table is sized well above the names it holds). */
const MAX_PROBES = 64;

export const DEFAULT_SLOTS = 32768;

/** The shared memory for `slots` cluster names (32 K slots: 1.7 MB). */
export function newSharedBreakerMemory(slots = DEFAULT_SLOTS): SharedArrayBuffer {
  return new SharedArrayBuffer(slots * WORDS * Int32Array.BYTES_PER_ELEMENT);
}

let table: Int32Array | undefined;
/** Whether this thread writes the shared counts into its circuit_breakers gauges (the main thread). */
let gaugeWriter = true;
let warnedFull = false;

/** From now on, clusters built on this thread share their counts through `memory`. */
export function useSharedBreakers(memory: SharedArrayBuffer, writesGauges: boolean): void {
  table = new Int32Array(memory);
  gaugeWriter = writesGauges;
}

/** Whether this thread publishes circuit-breaker gauges (false on worker threads when counts are shared). */
export function writesBreakerGauges(): boolean {
  return table === undefined || gaugeWriter;
}

function fnv1a(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  // 0 marks an empty slot's hash: never produce it.
  return h === 0 ? 1 : h;
}

/**
 * The counts of cluster `name` in the shared table: `cells[base + priority * RESOURCES + resource]`,
 * or undefined when nothing is shared (one thread, or the table is full).
 */
export function sharedCounts(name: string): { cells: Int32Array; base: number } | undefined {
  const t = table;
  if (!t) return undefined;
  const slots = t.length / WORDS;
  const a = fnv1a(name, 0x811c9dc5), b = fnv1a(name, 0x01000193);
  for (let probe = 0, i = (a >>> 0) % slots; probe < MAX_PROBES; probe++, i = (i + 1) % slots) {
    const at = i * WORDS;
    let state = Atomics.load(t, at + STATE);
    if (state === EMPTY && Atomics.compareExchange(t, at + STATE, EMPTY, CLAIMING) === EMPTY) {
      Atomics.store(t, at + HASH_A, a);
      Atomics.store(t, at + HASH_B, b);
      Atomics.store(t, at + STATE, READY);
      Atomics.notify(t, at + STATE);
      return { cells: t, base: at + COUNTS };
    }
    // Another thread is writing this slot's name: it takes microseconds.
    while ((state = Atomics.load(t, at + STATE)) === CLAIMING) Atomics.wait(t, at + STATE, CLAIMING, 5);
    if (Atomics.load(t, at + HASH_A) === a && Atomics.load(t, at + HASH_B) === b) return { cells: t, base: at + COUNTS };
  }
  if (!warnedFull) {
    warnedFull = true;
    log.warn(`circuit breakers: the shared table is full; cluster ${name} and later ones count per worker thread`);
  }
  return undefined;
}
