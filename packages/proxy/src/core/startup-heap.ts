/**
 * Gives back the memory start-up used and no longer needs (issue 13). Loading and compiling the
 * config promotes enough to grow V8's young generation to its maximum (16 MB of semi-spaces), and V8
 * shrinks it, and returns its pooled pages to the system, only in a GC that aims to reduce memory:
 * on its own that is the memory reducer's, which an idle proxy never got to (still 40 MB RssAnon
 * after 30 s, trivial static config). One such GC once the proxy is up takes the idle RssAnon from
 * ~40 to ~26 MB, for a pause of ~10-20 ms; under load the young generation grows back as it would.
 * Node keeps every compile-cache entry it read (~1.5 MB for ~200 modules) until it flushes them, and
 * what start-up freed sits in holes of the native heap that free() cannot return: flushing, then
 * malloc_trim after the GC, give back ~3-4 MB more.
 * Main thread only: V8's flags are the process's, and a worker thread flipping one could race the
 * main thread's compile-cache lookups.
 * An xDS proxy runs it once its first configuration is applied: 5,000 services left ~114 MB of heap
 * committed for ~60 MB live, and V8's memory reducer, which judges the allocation rate at GCs, gave
 * it back only at its ~100 s watchdog (RSS 216 → 175 MB then); this GC takes RSS at the first request
 * 178 → 139 MB for one pause of ~50 + ~100 ms. Only before the first downstream connection: a static
 * listener may already serve while xDS initialises (bench xds-scale: the pause landed in a 20,000-
 * cluster push, longest GC pause 89 ms), and a pause under traffic costs more than the memory.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { flushCompileCache } from 'node:module';
import { trimNativeHeap } from '../sys/sockopt.ts';
import { overloadState } from './overload.ts';

interface GcOptions { readonly type: 'major'; readonly execution: 'sync'; readonly flavor: 'last-resort' }
type Gc = (options: GcOptions) => void;

/** One memory-reducing full GC (V8's "last resort" GC: repeated until nothing more is freed, pages returned), then the native heap's. */
export function collectStartUpGarbage(): void {
  if (overloadState.accepted > 0) return;
  // --expose-gc given: the global has it. Otherwise V8 installs gc() in contexts made while the flag is
  // on: a throw-away one, so the proxy's global never has it, and the flag is off again for any later
  // one. V8 keys the compile cache by the flags it started with: modules loaded later still hit it
  // (startup-heap.test.ts).
  let gc = (globalThis as { gc?: Gc }).gc;
  if (!gc) {
    setFlagsFromString('--expose-gc');
    try { gc = runInNewContext('gc') as Gc; } finally { setFlagsFromString('--no-expose-gc'); }
  }
  // Entries not yet on disk (a cold start) are written now rather than at exit.
  flushCompileCache();
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  trimNativeHeap();
}
