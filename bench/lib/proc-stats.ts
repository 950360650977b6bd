/** CPU time and memory of a process (all its threads) and of its children (nginx's workers), from /proc. */
import { readFileSync } from 'node:fs';

/** Linux's clock tick: utime/stime in /proc/PID/stat count 1/100 s. */
const TICKS_PER_SECOND = 100;

function readOr(file: string): string {
  try { return readFileSync(file, 'latin1'); } catch { return ''; }
}

/** utime + stime of one process in ms (0 once it is gone). */
export function cpuMs(pid: number): number {
  const stat = readOr(`/proc/${pid}/stat`);
  if (!stat) return 0;
  // The command name may hold spaces or parentheses: fields start after the last ')'.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND;
}

/** The process and every descendant (nginx master → worker). */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    for (const t of readOr(`/proc/${out[i]}/task/${out[i]}/children`).trim().split(/\s+/)) if (t) out.push(Number(t));
  }
  return out;
}

/** utime + stime of a process tree in ms. */
export function treeCpuMs(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + cpuMs(p), 0);
}

function statusKb(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readOr(`/proc/${pid}/status`));
  return m ? Number(m[1]) : NaN;
}

/** Resident set size in MB (VmRSS). */
export function rssMb(pid: number): number {
  return statusKb(pid, 'VmRSS') / 1024;
}

/** Resident set size of a process tree in MB. */
export function treeRssMb(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + (rssMb(p) || 0), 0);
}

/** Peak resident set size in MB (VmHWM). */
export function peakRssMb(pid: number): number {
  return statusKb(pid, 'VmHWM') / 1024;
}
