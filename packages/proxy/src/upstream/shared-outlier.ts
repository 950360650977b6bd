/**
 * Outlier-detection state shared by every thread of one proxy (--concurrency N), as Envoy's is: its
 * detector is one per cluster, fed by every worker, and an ejection takes the host out of every worker's
 * load balancing. Each host of a cluster with outlier_detection has an entry (its consecutive-error
 * counters, this interval's request and success counts, whether and since when it is ejected, its back-off);
 * each such cluster has one too (a generation every ejection and un-ejection bumps, and the count of active
 * ejections, which max_ejection_percent caps). Any thread may eject (the one whose error reaches a
 * threshold); only the main thread sweeps (un-ejects, judges success rates) and publishes the gauge.
 * Without workers, or once the table is full, entries are private arrays with the same layout.
 */
import { logger } from '../core/log.ts';
import { newSharedTableMemory, SharedNameTable } from './shared-table.ts';

const log = logger('upstream');

/** A host entry's words. Times are milliseconds of the detector's clock, kept modulo 2^32. */
export const HostWord = {
  Consecutive5xx: 0, ConsecutiveGateway: 1, ConsecutiveLocal: 2,
  ExternalTotal: 3, ExternalSuccess: 4, LocalTotal: 5, LocalSuccess: 6,
  Ejected: 7, NumEjections: 8, Backoff: 9, JitterMs: 10, LastEjection: 11, LastUnejection: 12,
  /** 1: un-ejected at least once (LastUnejection is set). */
  Unejected: 13,
} as const;
export const HOST_WORDS = 14;

/** A cluster entry's words. */
export const ClusterWord = { Generation: 0, Active: 1 } as const;

const SLOTS = 16384;

let table: SharedNameTable | undefined;
let sweeper = true;
let warnedFull = false;

/** The shared memory (16 K host and cluster entries: 1.1 MB, touched only where used). */
export function newSharedOutlierMemory(slots = SLOTS): SharedArrayBuffer {
  return newSharedTableMemory(slots, HOST_WORDS);
}

/** From now on, detectors built on this thread share their state through `memory`; `sweeps`: the main thread. */
export function useSharedOutlier(memory: SharedArrayBuffer, sweeps: boolean): void {
  table = new SharedNameTable(memory, HOST_WORDS);
  sweeper = sweeps;
}

/** Whether this thread runs the interval sweep and publishes ejections_active (one thread per process). */
export function sweepsOutliers(): boolean {
  return table === undefined || sweeper;
}

export interface OutlierCells {
  readonly cells: Int32Array;
  readonly at: number;
  /** Whether other threads see these cells. */
  readonly shared: boolean;
}

function entry(key: string): OutlierCells {
  const at = table ? table.entry(key) : -1;
  if (at >= 0) return { cells: table!.cells, at, shared: true };
  if (table && !warnedFull) {
    warnedFull = true;
    log.warn(`outlier detection: the shared table is full; ${key.replace(/\0/g, ' ')} and later ones are judged per worker thread`);
  }
  return privateCells();
}

function privateCells(): OutlierCells {
  return { cells: new Int32Array(HOST_WORDS), at: 0, shared: false };
}

/** A cluster's entry (`cluster` undefined: a private one, as tests build detectors). */
export function clusterCells(cluster: string | undefined): OutlierCells {
  return cluster === undefined ? privateCells() : entry(`c\0${cluster}`);
}

/** A host's entry in `cluster` (undefined: a private one). */
export function hostCells(cluster: string | undefined, hostPort: string): OutlierCells {
  return cluster === undefined ? privateCells() : entry(`h\0${cluster}\0${hostPort}`);
}
