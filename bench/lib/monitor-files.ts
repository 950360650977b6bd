/** Reading what tools/loop-monitor.ts writes for each thread of a proxy under test. */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Entries [endEpochMs, ...values] of one kind of file (`loop`, `pauses`) of each thread of `pid` that ended within [from, to]. */
function entriesIn(dir: string, kind: string, pid: number, from: number, to: number): Map<string, number[][]> {
  const out = new Map<string, number[][]>();
  const prefix = `${kind}-${pid}-`;
  for (const f of readdirSync(dir).sort()) {
    if (!f.startsWith(prefix) || !f.endsWith('.json')) continue;
    const rows = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as number[][];
    out.set(f.slice(prefix.length, -'.json'.length), rows.filter(([end]) => end >= from && end <= to).map(([, ...v]) => v));
  }
  return out;
}

/**
 * Tasks the loop monitor saw in each thread that ended within [from, to]: all over 5 ms by thread CPU
 * time, sorted, each thread's longest, and the longest gap between two ticks in wall time (a task,
 * a GC pause, or the thread waiting for a CPU).
 */
export function tasksIn(dir: string, pid: number, from: number, to: number): { all: number[]; longest: string; longestWallMs: number } {
  const all: number[] = [];
  const longest: string[] = [];
  let longestWallMs = 0;
  for (const [thread, rows] of entriesIn(dir, 'loop', pid, from, to)) {
    const mine = rows.map(([cpu]) => cpu).filter((cpu) => cpu > 5);
    all.push(...mine);
    for (const [, wall] of rows) longestWallMs = Math.max(longestWallMs, wall);
    longest.push(`thread ${thread}: ${Math.max(0, ...mine).toFixed(0)} ms`);
  }
  return { all: all.sort((a, b) => a - b), longest: longest.join(', '), longestWallMs };
}

/** GC pauses (ms, any thread) that ended within [from, to]: the longest and their sum. */
export function pausesIn(dir: string, pid: number, from: number, to: number): { longestMs: number; totalMs: number } {
  let longestMs = 0, totalMs = 0;
  for (const rows of entriesIn(dir, 'pauses', pid, from, to).values()) {
    for (const [ms] of rows) { longestMs = Math.max(longestMs, ms); totalMs += ms; }
  }
  return { longestMs, totalMs };
}

/** V8 heap after a full GC in every thread of the proxy, summed, in MB: in use, and committed (what V8 holds from the OS). */
export async function retainedHeap(dir: string, pid: number, threads: number, token: string): Promise<{ usedMb: number; committedMb: number }> {
  writeFileSync(path.join(dir, `gc-${pid}`), token);
  const prefix = `heap-${pid}-`;
  const mine = (): string[] => readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith(`-${token}`));
  const deadline = Date.now() + 30_000;
  while (mine().length < threads) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for a heap reading from ${threads} threads`);
    await sleep(200);
  }
  let used = 0, committed = 0;
  for (const f of mine()) {
    const h = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as { used: number; committed: number };
    used += h.used;
    committed += h.committed;
  }
  return { usedMb: used / 2 ** 20, committedMb: committed / 2 ** 20 };
}
