/**
 * The native heap given back every few seconds (issue 13). What a proxy mallocs and frees under
 * traffic (TLS records and sessions, HTTP/2 frames, V8's compiler zones on its helper threads) sits in
 * glibc's arenas, and free() returns memory to the system only from the top of the main arena, so RSS
 * stayed where the busiest moment left it. Sidecar pair at 1,000 req/s (bench/tools/pair-profile.ts,
 * HTTP/1.1 + mTLS, two runs each): RssAnon 52.6–53.1 MB per proxy; with malloc_trim every 5 s,
 * 40.0–45.3 MB, RSS 106 → 93–99 MB, CPU per request within the runs' noise. A call takes 0.5–1 ms on
 * such a heap (2.8 ms the first): one per 5 s is ~0.02% of the thread. One timer per process (the
 * main thread's): malloc_trim trims every arena, the worker threads' too. Unlike ztunnel's (its
 * native-heap-trim.ts: once per quiet spell, after a bulk transfer), this one runs under traffic too:
 * a sidecar's steady-state RSS is what every pod pays, and trimming every 5 s keeps each call small.
 */
import { trimNativeHeap } from '../sys/sockopt.ts';

export const NATIVE_HEAP_TRIM_MS = 5000;

/** Starts trimming (the timer does not keep the process alive); returns the stop. */
export function trimNativeHeapPeriodically(intervalMs = NATIVE_HEAP_TRIM_MS): () => void {
  const timer = setInterval(trimNativeHeap, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
