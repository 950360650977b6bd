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

export class TimeSlice {
  private readonly budgetMs: number;

  constructor(budgetMs = CONFIG_SLICE_MS) {
    this.budgetMs = budgetMs;
  }

  /** The slice has used its budget: yield before the next item. */
  get due(): boolean {
    return performance.now() - sliceStart >= this.budgetMs;
  }

  /** Lets timers and I/O run (setImmediate runs after the poll phase), then starts a new slice. */
  async next(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    sliceStart = performance.now();
  }
}
