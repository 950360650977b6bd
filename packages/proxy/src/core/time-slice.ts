/**
 * Cooperative time slicing for long control-plane work (applying thousands of clusters or
 * endpoint sets): the event loop also carries the data plane, so work runs in slices of at most
 * `budgetMs` and lets pending I/O run in between. Check `due` per item, `await next()` when it is.
 *
 * One clock per thread: every TimeSlice counts from the last yield of any of them, so phases that
 * follow each other in one task (screening, applying, forwarding to workers) share one budget.
 *
 * Pacing: while the thread has downstream connections open, a slice that used its budget is
 * followed by PACE_RATIO times as long with no config work, so a long push takes at most a quarter
 * of the thread. Yields alone were not enough on 2 cores: back-to-back slices and the GC helpers
 * working on the push's garbage left requests waiting for a CPU. 20,000 clusters, Delta, 1 worker
 * (bench xds-scale): 5 ms slices, no pacing: p99 6.4 → 28.9 ms, push 3.4 s; 3 ms slices paced 3:1:
 * 7.2 → 12.9 ms, push 8.4 s. An everyday update fits in one slice and never waits; with no traffic
 * (start-up, an idle proxy) config runs flat out.
 */
import { overloadState } from './overload.ts';

export const CONFIG_SLICE_MS = 3;
/** Idle time after a full slice, per millisecond the slice ran, while downstream connections are open. */
export const PACE_RATIO = 3;

let sliceStart = performance.now();
/**
 * True once the loop has gone round since config work last ran: the next piece of config work
 * starts a fresh slice. Without it the clock kept counting the idle time before a task, so the
 * first check of an everyday update (one endpoint set, seconds after the last) found its slice
 * used up and, with traffic flowing, slept 18 ms before applying it.
 */
let loopTurned = true;
const turned = (): void => { loopTurned = true; };

/** Config work runs now: a slice starts if the loop went round since config work last ran. */
function working(): void {
  if (!loopTurned) return;
  loopTurned = false;
  sliceStart = performance.now();
  setImmediate(turned);
}

/** Data-plane work that a config slice lets run first (see letRunFirst). */
const dataPlaneQueued: Array<() => boolean> = [];

/**
 * Data-plane work queued with setImmediate (HTTP/1.1 write batching flushes a turn's responses
 * that way) runs in the check phase after the config work's own resumption, queued a turn
 * earlier: every response written during a push waited one more slice. `queued` says such work is
 * waiting; a slice then yields again first. Returns the unregistration.
 */
export function letRunFirst(queued: () => boolean): () => void {
  dataPlaneQueued.push(queued);
  return () => { const i = dataPlaneQueued.indexOf(queued); if (i >= 0) dataPlaneQueued.splice(i, 1); };
}

function dataPlaneWaiting(): boolean {
  for (let i = 0; i < dataPlaneQueued.length; i++) if (dataPlaneQueued[i]()) return true;
  return false;
}

const immediate = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number): Promise<void> => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class TimeSlice {
  private readonly budgetMs: number;

  constructor(budgetMs = CONFIG_SLICE_MS) {
    this.budgetMs = budgetMs;
  }

  /** The slice has used its budget: yield before the next item. */
  get due(): boolean {
    working();
    return performance.now() - sliceStart >= this.budgetMs;
  }

  /**
   * Lets timers and I/O run (setImmediate runs after the poll phase), and what that I/O queued
   * for the check phase behind this resumption (letRunFirst), then starts a new slice. Paced while
   * traffic may be flowing (see PACE_RATIO).
   */
  async next(): Promise<void> {
    working();
    // A slice counts as at most two budgets of work (one item may have run long).
    const ran = Math.min(performance.now() - sliceStart, 2 * this.budgetMs);
    if (overloadState.connections > 0 && ran >= this.budgetMs) await sleep(ran * PACE_RATIO);
    do await immediate(); while (dataPlaneWaiting());
    // The work resuming here is this turn's config work: a new slice, which the loop's next turn ends.
    loopTurned = true;
    working();
  }
}

/** Items between two checks of the clock in eachSliced (a Set insert or a Map lookup is well under a microsecond). */
const ITEMS_PER_CHECK = 256;

/**
 * `fn` for every item, yielding whenever the slice is due: for loops over thousands of names
 * (20,000 subscribed EDS names) that are cheap per item but not in sum. The items must not change
 * while this runs (the ADS client runs one response or resubscription at a time).
 */
export async function eachSliced<T>(items: Iterable<T>, fn: (item: T) => void, slice = new TimeSlice()): Promise<void> {
  let n = 0;
  for (const item of items) {
    if (++n % ITEMS_PER_CHECK === 0 && slice.due) await slice.next();
    fn(item);
  }
}
