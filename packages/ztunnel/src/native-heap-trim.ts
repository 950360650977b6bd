/**
 * Gives the native heap's free pages back once traffic has stopped. A burst (a bulk transfer, a
 * storm of new connections) leaves its buffers freed in the middle of glibc's heap, where free()
 * cannot shrink it, and RSS stays at the burst's peak (after a 500 MB transfer and a connection
 * burst: 133 / 176 MB for the pair's two ztunnels, vs 111 / 109 before; malloc_trim gives 30-40 MB
 * back). V8 frees a burst's dead buffers in the mark-compact its memory reducer runs a few seconds
 * into a quiet spell; the next check after that trims, once per quiet spell. The trim takes ~5 to
 * ~100 ms, hence only while the event loop is idle (under 5% busy over the last check's interval).
 */
import { constants, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { log, trimNativeHeap } from './core.ts';

const CHECK_MS = 5000;
const IDLE_UTILIZATION = 0.05;

export function startNativeHeapTrim(): () => void {
  let freedSinceTrim = false;
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) freedSinceTrim = true;
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  let last = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (!freedSinceTrim || busy > IDLE_UTILIZATION) return;
    freedSinceTrim = false;
    const t0 = performance.now();
    const released = trimNativeHeap();
    log.debug(`native heap trimmed in ${(performance.now() - t0).toFixed(1)} ms${released ? '' : ' (nothing to release)'}`);
  }, CHECK_MS);
  timer.unref();
  return () => { clearInterval(timer); gc.disconnect(); };
}
