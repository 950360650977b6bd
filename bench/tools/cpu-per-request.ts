/**
 * CPU time per proxied request: a measure of skua-proxy's L7 cost that holds up on a
 * shared, noisy machine (req/s does not: it moves with whatever else runs).
 *
 *   node bench/tools/cpu-per-request.ts [--ref REF]... [--rounds N] [--seconds S]
 *
 * Each --ref is a git ref (its packages/proxy is extracted with `git archive` into a temp
 * dir that borrows this checkout's node_modules and native addons, lib/builds.ts) or `WORKTREE`
 * (the files as they are now; the default). All start over one warmed compile cache. The refs are measured in turns, A B A B ..., so that they
 * see the same machine. Per run: one nginx backend (return 200 "hello", one worker), skua
 * with the bench's L7 bootstrap (--concurrency 1), a wrk warm-up, then `wrk -t1 -cC -dS`
 * while utime+stime of the skua process are read from /proc/PID/stat before and after.
 * Prints µs of CPU per request (user, sys, total) and req/s, per run and per ref (median).
 * With --parallel the refs of a round run at the same time (each with its own wrk), so a
 * busy machine disturbs them alike.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runTool } from '../lib/procs.ts';
import { startRefRig, stopRefRig } from '../lib/ref-rig.ts';
import { launchTarget, prepareTarget, stopTarget } from '../lib/targets.ts';
import { shippedNodeOptions } from '../lib/builds.ts';
import { runWrk } from '../lib/wrk.ts';

const TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

interface Sample { ref: string; requests: number; rps: number; userUs: number; sysUs: number; errors: number }

/** utime and stime (clock ticks) of a process, all its threads included. */
function cpuTicks(pid: number): { user: number; sys: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]), sys: Number(f[12]) };
}


async function measure(ref: string, main: string, backendPort: number, dir: string, o: { seconds: number; warmup: number; connections: number }): Promise<Sample> {
  // Each ref writes its bootstrap in a directory of its own (parallel runs).
  const own = path.join(dir, `run-${ref.replace(/[^\w.-]/g, '_')}`);
  mkdirSync(own, { recursive: true });
  const prepared = await prepareTarget('skua', 'http', backendPort, own);
  const running = await launchTarget(prepared, main, { NODE_OPTIONS: shippedNodeOptions(ref) });
  try {
    const pid = running.proc?.pid ?? 0;
    if (o.warmup > 0) await runWrk(running.port, { threads: 1, connections: o.connections, seconds: o.warmup });
    const before = cpuTicks(pid);
    const r = await runWrk(running.port, { threads: 1, connections: o.connections, seconds: o.seconds });
    const after = cpuTicks(pid);
    const usPerTick = 1e6 / TICKS_PER_S;
    return {
      ref, requests: r.requests, rps: r.rps, errors: r.errors,
      userUs: (after.user - before.user) * usPerTick / r.requests,
      sysUs: (after.sys - before.sys) * usPerTick / r.requests,
    };
  } finally {
    await stopTarget(running);
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const fmt = (x: number, d = 1): string => x.toFixed(d).padStart(7);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ref: { type: 'string', multiple: true },
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: '50' },
      parallel: { type: 'boolean', default: false },
    },
  });
  const refs = values.ref?.length ? values.ref : ['WORKTREE'];
  const o = { seconds: Number(values.seconds), warmup: Number(values.warmup), connections: Number(values.connections) };
  const rounds = Number(values.rounds);
  const rig = await startRefRig(refs, 'skua-cpu-');
  const { tmp, mains, backendPort } = rig;
  const samples: Sample[] = [];
  console.log(`load average at start: ${readFileSync('/proc/loadavg', 'latin1').trim()}`);
  console.log(`wrk -t1 -c${o.connections} -d${o.seconds}s (warm-up ${o.warmup}s); µs of skua CPU per request`);
  console.log(`${'ref'.padEnd(24)}   user     sys   total    req/s`);
  try {
    for (let i = 0; i < rounds; i++) {
      const round = values.parallel
        ? await Promise.all(refs.map((ref) => measure(ref, mains.get(ref) ?? '', backendPort, tmp, o)))
        : [];
      if (!values.parallel) for (const ref of refs) round.push(await measure(ref, mains.get(ref) ?? '', backendPort, tmp, o));
      for (const s of round) {
        samples.push(s);
        console.log(`${s.ref.padEnd(24)}${fmt(s.userUs)}${fmt(s.sysUs)}${fmt(s.userUs + s.sysUs)}${fmt(s.rps, 0).padStart(9)}${s.errors ? `  errors ${s.errors}` : ''}`);
      }
    }
  } finally {
    await stopRefRig(rig);
  }
  console.log(`median over ${rounds} round(s):`);
  for (const ref of refs) {
    const mine = samples.filter((s) => s.ref === ref);
    const u = median(mine.map((s) => s.userUs)), y = median(mine.map((s) => s.sysUs));
    console.log(`${ref.padEnd(24)}${fmt(u)}${fmt(y)}${fmt(median(mine.map((s) => s.userUs + s.sysUs)))}${fmt(median(mine.map((s) => s.rps)), 0).padStart(9)}`);
  }
  console.log(`load average at end: ${readFileSync('/proc/loadavg', 'latin1').trim()}`);
}

void runTool(main);
