/**
 * User-space instructions per proxied request, counted by valgrind's callgrind: a measure of
 * skua-proxy's L7 work that does not move with the machine's load (CPU time on this shared 2-core
 * machine varies by ±30% between runs; this count repeats within ~1-2%).
 *
 *   node bench/tools/instructions-per-request.ts [--ref REF]... [--warmup S] [--seconds S] [--top N]
 *
 * Per --ref (a git ref, extracted as in cpu-per-request.ts, or WORKTREE, the default): one nginx
 * backend (return 200 "hello"), skua with the bench's L7 bootstrap (--concurrency 1) under
 * `valgrind --tool=callgrind` with the proxy image's V8 flags, `wrk -t1 -c50` for --warmup seconds
 * (the JIT settles: compile jobs fade from the count), then callgrind's counters are zeroed, wrk
 * runs --seconds more, and the counters are dumped. downstream_rq_total from /stats before and
 * after gives the requests. Prints the main thread's instructions per request (the event loop: what
 * the proxy's code costs) and all threads' (with GC helpers and JIT compile jobs).
 * --top N also names the main thread's N costliest functions (JIT code through --perf-basic-prof).
 * Needs valgrind (apt-get install valgrind); runs about 2 minutes per ref.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runTool, startProcess, stopProcess } from '../lib/procs.ts';
import { httpGet, waitForReady } from '../lib/net.ts';
import { startRefRig, stopRefRig } from '../lib/ref-rig.ts';
import { prepareTarget } from '../lib/targets.ts';
import { shippedNodeOptions } from '../lib/builds.ts';
import { runWrk } from '../lib/wrk.ts';
import { V8_FLAGS } from '../../packages/proxy/bin/v8-flags.js';

interface Count { ref: string; requests: number; mainIr: number; allIr: number; top: string }

async function requestsServed(adminPort: number): Promise<number> {
  const r = await httpGet(adminPort, '/stats?filter=downstream_rq_total', 5000);
  const m = /^http\.[^.]+\.downstream_rq_total: (\d+)$/m.exec(r.body);
  if (!m) throw new Error(`no downstream_rq_total in /stats: ${r.body.slice(0, 200)}`);
  return Number(m[1]);
}

/** `totals:` of a callgrind dump file. */
function totalIr(file: string): number {
  const m = /^totals:\s+(\d+)/m.exec(readFileSync(file, 'latin1'));
  return m ? Number(m[1]) : 0;
}

/** Self cost per function of the main thread's dump, JIT addresses named from the perf map. */
function topFunctions(dump: string, perfMap: string, n: number, total: number): string {
  const out = execFileSync('callgrind_annotate', ['--threshold=100', '--inclusive=no', dump], { maxBuffer: 64 << 20 }).toString();
  const jit = existsSync(perfMap) ? readFileSync(perfMap, 'latin1').split('\n').filter(Boolean).map((l) => {
    const [a, s, ...name] = l.split(' ');
    return { start: parseInt(a, 16), end: parseInt(a, 16) + parseInt(s, 16), name: name.join(' ') };
  }).sort((x, y) => x.start - y.start) : [];
  const nameOf = (addr: number): string | undefined => {
    let lo = 0, hi = jit.length - 1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (jit[mid].start <= addr) lo = mid + 1; else hi = mid - 1; }
    const e = jit[hi];
    return e && addr < e.end ? e.name : undefined;
  };
  const rows = new Map<string, number>();
  for (const line of out.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!m || m[2].includes('PROGRAM TOTALS')) continue;
    const ir = Number(m[1].replaceAll(',', ''));
    // The call chain's roots (main, the event loop) show with nearly everything: callgrind cannot follow
    // JIT code's calls and returns, so their cost lands on them. No function's own cost comes near half.
    if (ir >= total / 2) continue;
    const a = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(m[2]);
    const name = (a && nameOf(parseInt(a[1], 16))) ?? m[2].replace(/\s*\[[^\]]*\]$/, '').replace(/^\?\?\?:/, '');
    rows.set(name, (rows.get(name) ?? 0) + ir);
  }
  return [...rows].sort((x, y) => y[1] - x[1]).slice(0, n)
    .map(([name, ir]) => `  ${((100 * ir) / total).toFixed(2).padStart(6)}%  ${name.slice(0, 140)}`).join('\n');
}

async function count(ref: string, main: string, backendPort: number, dir: string, o: { warmup: number; seconds: number; top: number }): Promise<Count> {
  const own = path.join(dir, `run-${ref.replace(/[^\w.-]/g, '_')}`);
  mkdirSync(own, { recursive: true });
  const t = await prepareTarget('skua', 'http', backendPort, own);
  const out = path.join(own, 'callgrind.out');
  // The bin re-executes itself when a V8 flag is missing, which valgrind would not follow: all are given.
  const nodeArgs = [...V8_FLAGS, ...(o.top > 0 ? ['--perf-basic-prof'] : [])];
  const proc = startProcess(`callgrind-${ref}`, 'valgrind', [
    '--tool=callgrind', '--smc-check=all-non-file', '--separate-threads=yes', `--callgrind-out-file=${out}`,
    process.execPath, ...nodeArgs, main, '-c', t.configFile ?? '', '--concurrency', '1', '-l', 'warn',
  ], { env: { NODE_OPTIONS: shippedNodeOptions(ref) } });
  try {
    await waitForReady(t.adminPort ?? 0, proc, 180_000);
    await runWrk(t.port, { threads: 1, connections: 50, seconds: o.warmup });
    const before = await requestsServed(t.adminPort ?? 0);
    execFileSync('callgrind_control', ['-z', String(proc.pid)], { stdio: 'ignore' });
    await runWrk(t.port, { threads: 1, connections: 50, seconds: o.seconds });
    execFileSync('callgrind_control', ['-d', String(proc.pid)], { stdio: 'ignore' });
    const requests = (await requestsServed(t.adminPort ?? 0)) - before;
    // The dump is part 1, one file per thread; thread 1 is the main (event loop) thread.
    const parts = readdirSync(own).filter((f) => f.startsWith('callgrind.out.1-')).sort();
    const mainFile = path.join(own, 'callgrind.out.1-01');
    const mainIr = totalIr(mainFile);
    const allIr = parts.reduce((sum, f) => sum + totalIr(path.join(own, f)), 0);
    const top = o.top > 0 ? topFunctions(mainFile, `/tmp/perf-${proc.pid}.map`, o.top, mainIr) : '';
    return { ref, requests, mainIr, allIr, top };
  } finally {
    await stopProcess(proc, 20_000);
    rmSync(`/tmp/perf-${proc.pid}.map`, { force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ref: { type: 'string', multiple: true },
      warmup: { type: 'string', default: '60' },
      seconds: { type: 'string', default: '20' },
      top: { type: 'string', default: '0' },
    },
  });
  const refs = values.ref?.length ? values.ref : ['WORKTREE'];
  const o = { warmup: Number(values.warmup), seconds: Number(values.seconds), top: Number(values.top) };
  const rig = await startRefRig(refs, 'skua-ir-');
  console.log(`callgrind: wrk -t1 -c50, ${o.warmup} s warm-up, ${o.seconds} s counted; user-space instructions per request`);
  console.log(`${'ref'.padEnd(24)} requests  main thread  all threads`);
  try {
    for (const ref of refs) {
      const c = await count(ref, rig.mains.get(ref) ?? '', rig.backendPort, rig.tmp, o);
      console.log(`${ref.padEnd(24)}${String(c.requests).padStart(9)}${Math.round(c.mainIr / c.requests).toLocaleString('en').padStart(13)}${Math.round(c.allIr / c.requests).toLocaleString('en').padStart(13)}`);
      if (c.top) console.log(c.top);
    }
  } finally {
    await stopRefRig(rig);
  }
}

void runTool(main);
