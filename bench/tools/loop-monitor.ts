/**
 * Preloaded into a proxy under test (`node --import bench/tools/loop-monitor.ts ...`, with
 * LOOP_MONITOR_DIR set): in every thread (the main thread and each --concurrency worker), a 1 ms
 * timer measures how much of this thread's CPU time passed between two ticks. A long synchronous
 * task shows as one long gap, by thread CPU time, which other processes on a busy machine do not
 * inflate (they inflate wall time: both are recorded). Each thread rewrites
 * <dir>/loop-<pid>-<threadId>.json once a second with its gaps between two ticks over 5 ms of CPU or
 * 20 ms of wall time (LOOP_MONITOR_WALL_MS: another wall threshold, for timelines): [[endEpochMs, cpuMs, wallMs, endMonoUs], ...] (the newest 20,000; endMonoUs is
 * process.hrtime in µs, the clock of a --cpu-prof profile's timestamps: bench/tools/cpuprofile-tasks.ts
 * --loop shows what ran in each gap), and <dir>/pauses-<pid>-<threadId>.json with
 * the thread's GC pauses of 1 ms or more (PerformanceObserver 'gc'): [[endEpochMs, ms, kind], ...],
 * kind as perf_hooks numbers it (1 minor / scavenge, 4 major / mark-compact, 8 incremental, 16 weak callbacks).
 * Retained heap: with --expose-gc, when <dir>/gc-<pid> holds a token not seen before, each thread
 * runs a full GC and writes {"used", "committed"} (heap bytes in use, and V8's committed heap) to
 * <dir>/heap-<pid>-<threadId>-<token>.
 */
import { existsSync, readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { threadId } from 'node:worker_threads';

const dir = process.env.LOOP_MONITOR_DIR;
const writing = new Set<string>();
/**
 * Readers poll these files: each appears whole or not at all. Written off the thread (a synchronous
 * write on a busy disk blocked the loop under test for tens of ms); false while the last write of
 * the file is still going.
 */
function writeWhole(file: string, text: () => string): boolean {
  if (writing.has(file)) return false;
  writing.add(file);
  void writeFile(`${file}.tmp`, text()).then(() => rename(`${file}.tmp`, file)).catch(() => undefined).finally(() => writing.delete(file));
  return true;
}
if (dir) {
  const file = path.join(dir, `loop-${process.pid}-${threadId}.json`);
  const cpuMs = (): number => { const u = process.threadCpuUsage(); return (u.user + u.system) / 1000; };
  const epoch = (): number => performance.timeOrigin + performance.now();
  const tasks: Array<[number, number, number, number]> = [];
  const wallOverMs = Number(process.env.LOOP_MONITOR_WALL_MS ?? 20);
  let lastCpu = cpuMs(), lastWall = performance.now(), dirty = false;
  const pausesFile = path.join(dir, `pauses-${process.pid}-${threadId}.json`);
  const pauses: Array<[number, number, number]> = [];
  let pausesDirty = false;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries() as Array<PerformanceEntry & { detail?: { kind?: number } }>) {
      if (e.duration < 1) continue;
      pauses.push([performance.timeOrigin + e.startTime + e.duration, +e.duration.toFixed(2), e.detail?.kind ?? 0]);
      if (pauses.length > 20_000) pauses.splice(0, pauses.length - 20_000);
      pausesDirty = true;
    }
  }).observe({ entryTypes: ['gc'] });
  setInterval(() => {
    const c = cpuMs(), w = performance.now();
    if (c - lastCpu > 5 || w - lastWall > wallOverMs) {
      tasks.push([epoch(), +(c - lastCpu).toFixed(2), +(w - lastWall).toFixed(2), Number(process.hrtime.bigint() / 1000n)]);
      if (tasks.length > 20_000) tasks.splice(0, tasks.length - 20_000);
      dirty = true;
    }
    lastCpu = c;
    lastWall = w;
  }, 1).unref();
  const gcFile = path.join(dir, `gc-${process.pid}`);
  const gc = (globalThis as { gc?: () => void }).gc;
  let lastToken = '';
  setInterval(() => {
    if (dirty && writeWhole(file, () => JSON.stringify(tasks))) dirty = false;
    if (pausesDirty && writeWhole(pausesFile, () => JSON.stringify(pauses))) pausesDirty = false;
    if (!gc || !existsSync(gcFile)) return;
    const token = readFileSync(gcFile, 'utf8').trim();
    if (token === lastToken) return;
    lastToken = token;
    gc();
    const h = getHeapStatistics();
    writeWhole(path.join(dir, `heap-${process.pid}-${threadId}-${token}`), () => JSON.stringify({ used: h.used_heap_size, committed: h.total_physical_size }));
  }, 1000).unref();
}
