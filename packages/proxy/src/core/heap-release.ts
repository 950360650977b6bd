/**
 * One memory-reducing full GC once start-up has applied the first xDS configuration. Applying a mesh
 * leaves V8's heap committed well above what stays live (5,000 services: ~100 MB committed, ~60 MB
 * live, the rest garbage and pooled pages). V8's memory reducer gives that back only once it sees a
 * low allocation rate, which it measures at GCs: an idle proxy has none, so the reducer waits for its
 * ~100 s watchdog (RSS then fell 216 → 175 MB). Doing it once, right after the proxy goes live, costs
 * one pause (~50 + ~100 ms for that heap): only while the proxy has served no connection yet (a
 * sidecar's traffic waits for it to be ready), never under traffic (a static listener may already
 * serve while xDS initialises: then the reducer's own timing stands).
 * The GC is V8's gc extension with the 'last-resort' flavor (what a low-memory notification runs),
 * taken from a fresh context with --expose-gc set only for that moment: no global `gc` appears.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { log } from './log.ts';

type GcExtension = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

function gcExtension(): GcExtension | undefined {
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? gc as GcExtension : undefined;
  } catch {
    return undefined;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

/**
 * Gives the heap's slack back to the OS on the next turn of the event loop (after what is running
 * now), unless `served()` says traffic has started.
 */
export function releaseUnusedHeapSoon(served: () => boolean = () => false): void {
  setImmediate(() => {
    if (served()) return;
    const gc = gcExtension();
    if (!gc) return;
    const before = process.memoryUsage();
    const t0 = performance.now();
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    const after = process.memoryUsage();
    const mb = (n: number): string => (n / 2 ** 20).toFixed(1);
    log.debug(`heap released after start-up: ${mb(before.heapTotal)} → ${mb(after.heapTotal)} MB committed, rss ${mb(before.rss)} → ${mb(after.rss)} MB, ${(performance.now() - t0).toFixed(0)} ms`);
  });
}
