/**
 * Cooperative time slicing for long control-plane work (applying thousands of clusters or
 * endpoint sets): the event loop also carries the data plane, so work runs in slices of at most
 * `budgetMs` and lets pending I/O run in between. Check `due` per item, `await next()` when it is.
 *
 * One clock per thread: every TimeSlice counts from the last yield of any of them, so phases that
 * follow each other in one task (screening, applying, forwarding to workers) share one budget.
 */

export const CONFIG_SLICE_MS = 5;

let sliceStart = performance.now();

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

export class TimeSlice {
  private readonly budgetMs: number;

  constructor(budgetMs = CONFIG_SLICE_MS) {
    this.budgetMs = budgetMs;
  }

  /** The slice has used its budget: yield before the next item. */
  get due(): boolean {
    return performance.now() - sliceStart >= this.budgetMs;
  }

  /**
   * Lets timers and I/O run (setImmediate runs after the poll phase), and what that I/O queued
   * for the check phase behind this resumption (letRunFirst), then starts a new slice.
   */
  async next(): Promise<void> {
    do await immediate(); while (dataPlaneWaiting());
    sliceStart = performance.now();
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
