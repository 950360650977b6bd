/**
 * Preloaded into a proxy under test (`node --import bench/tools/loop-monitor.ts ...`, with
 * LOOP_MONITOR_DIR set): in every thread (the main thread and each --concurrency worker), a 1 ms
 * timer measures how much of this thread's CPU time passed between two ticks. A long synchronous
 * task shows as one long gap, by thread CPU time, which other processes on a busy machine do not
 * inflate (they inflate wall time: both are recorded). Each thread rewrites
 * <dir>/loop-<pid>-<threadId>.json once a second with its tasks over 5 ms CPU:
 * [[endEpochMs, cpuMs, wallMs], ...] (the newest 20,000).
 * Retained heap: with --expose-gc, when <dir>/gc-<pid> holds a token not seen before, each thread
 * runs a full GC and writes its heapUsed in bytes to <dir>/heap-<pid>-<threadId>-<token>.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';

const dir = process.env.LOOP_MONITOR_DIR;
if (dir) {
  const file = path.join(dir, `loop-${process.pid}-${threadId}.json`);
  const cpuMs = (): number => { const u = process.threadCpuUsage(); return (u.user + u.system) / 1000; };
  const epoch = (): number => performance.timeOrigin + performance.now();
  const tasks: Array<[number, number, number]> = [];
  let lastCpu = cpuMs(), lastWall = performance.now(), dirty = false;
  setInterval(() => {
    const c = cpuMs(), w = performance.now();
    if (c - lastCpu > 5) {
      tasks.push([epoch(), +(c - lastCpu).toFixed(2), +(w - lastWall).toFixed(2)]);
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
    if (dirty) { dirty = false; writeFileSync(file, JSON.stringify(tasks)); }
    if (!gc || !existsSync(gcFile)) return;
    const token = readFileSync(gcFile, 'utf8').trim();
    if (token === lastToken) return;
    lastToken = token;
    gc();
    writeFileSync(path.join(dir, `heap-${process.pid}-${threadId}-${token}`), String(process.memoryUsage().heapUsed));
  }, 1000).unref();
}
