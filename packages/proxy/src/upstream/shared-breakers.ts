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
import { newSharedTableMemory, SharedNameTable } from './shared-table.ts';

const log = logger('upstream');

/** Per cluster name: 2 priorities x 5 resources. */
export const RESOURCES = 5;
const WORDS = 2 * RESOURCES;

export const DEFAULT_SLOTS = 32768;

/** The shared memory for `slots` cluster names (32 K slots: 1.7 MB). */
export function newSharedBreakerMemory(slots = DEFAULT_SLOTS): SharedArrayBuffer {
  return newSharedTableMemory(slots, WORDS);
}

let table: SharedNameTable | undefined;
/** Whether this thread writes the shared counts into its circuit_breakers gauges (the main thread). */
let gaugeWriter = true;
let warnedFull = false;

/** From now on, clusters built on this thread share their counts through `memory`. */
export function useSharedBreakers(memory: SharedArrayBuffer, writesGauges: boolean): void {
  table = new SharedNameTable(memory, WORDS);
  gaugeWriter = writesGauges;
}

/** Whether this thread publishes circuit-breaker gauges (false on worker threads when counts are shared). */
export function writesBreakerGauges(): boolean {
  return table === undefined || gaugeWriter;
}

export function sharedCounts(name: string): { cells: Int32Array; base: number } | undefined {
  if (!table) return undefined;
  const base = table.entry(name);
  if (base >= 0) return { cells: table.cells, base };
  if (!warnedFull) {
    warnedFull = true;
    log.warn(`circuit breakers: the shared table is full; cluster ${name} and later ones count per worker thread`);
  }
  return undefined;
}
