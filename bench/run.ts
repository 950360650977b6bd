/**
 * Skua benchmark harness: `./dev bench [options]` (= `node bench/run.ts`).
 * Runs direct, nginx, haproxy and skua-proxy side by side, one worker each, every scenario by
 * default, prints tables with ratios, the acceptance checks and issue 13's table, and writes
 * bench/results/<scenario>-<timestamp>.json (with the commit and the load average),
 * bench/results/latest.md, bench/results/report.html and bench/results/summary.svg.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ensurePackages, versionOf } from './lib/apt.ts';
import { elapsedSeconds, progress, resetClock, silence } from './lib/progress.ts';
import { killAllSync, stopAll, systemBinary } from './lib/procs.ts';
import {
  checkAcceptance, checkLine, fileStamp, ratio, textTable, writeJson, writeJsonFile, writeMarkdown,
} from './lib/report.ts';
import { DEFAULT_SKUA_MAIN, REPO_ROOT } from './lib/targets.ts';
import { runL4 } from './scenarios/l4.ts';
import { runL7 } from './scenarios/l7.ts';
import { mtlsChecks, runMtls } from './scenarios/mtls.ts';
import { ROUNDS as ROUTES_ROUNDS, routesChecks, runRoutes } from './scenarios/routes.ts';
import { runXds } from './scenarios/xds.ts';
import { runXdsScale, xdsScaleChecks } from './scenarios/xds-scale.ts';
import { runSidecarPair } from './scenarios/sidecar-pair.ts';
import { idleChecks, runIdle } from './scenarios/idle.ts';
import { writeReports } from './lib/html-report.ts';
import { skuaBuilds, warmCompileCaches } from './lib/builds.ts';
import { goalsText, issueGoals } from './lib/issue-goals.ts';
import { listMicroFiles, microMarkdown, microText, runMicro, type MicroResult } from './scenarios/micro.ts';
import {
  ALL_SCENARIOS, ALL_TARGETS,
  type Options, type Scenario, type ScenarioResult, type TargetName,
} from './lib/types.ts';

const RESULTS_DIR = path.join(REPO_ROOT, 'bench/results');

const USAGE = `usage: ./dev bench [options]   (node bench/run.ts)
  --only LIST               scenarios to run, or all (the default): ${ALL_SCENARIOS.join(',')}
                            (idle = bare Node, nginx and skua-proxy idle; l7 = wrk through each proxy;
                            l4 = one TCP stream; micro = tinybench; routes = 1 route vs 1,000 vhosts x 10 routes,
                            xds = 5,000 services over ADS from scratch + one endpoint change,
                            xds-scale = 20,000 EDS clusters pushed to a live proxy under a latency probe, then shrunk,
                            mtls = two skua sidecars, plaintext vs mTLS; all three skua only;
                            sidecar-pair = fortio 1,000 req/s, 16 connections, 1 KB through a sidecar pair
                            with mTLS: direct, nginx pair, skua pair over HTTP/1.1 and HTTP/2)
  --targets LIST            subset of direct,nginx,haproxy,skua (default: all)
  --duration SECONDS        measured wrk time per L7 target (default 10)
  --warmup SECONDS          unmeasured wrk time before each L7 measurement (default 2)
  --connections N           wrk connections (default 50)
  --threads N               wrk threads (default 1)
  --l4-mb MB                size of the L4 stream (default 100)
  --l4-runs N               measured L4 streams per target, median reported (default 5)
  --skua PATH               skua-proxy entry script (default packages/proxy/bin/skua-proxy.js, what ships)
  --ref A,B                 compare git refs' builds side by side (WORKTREE = the working tree) in idle, l7
                            and sidecar-pair (other scenarios measure the first)
  --xds-clusters N          clusters pushed by xds-scale (default 20000)
  --skua-before REF         xds-scale: also run git REF's skua-proxy (e.g. main), each case before and after side by side
  --strict                  exit 1 if an acceptance check fails or a target fails
  -h, --help`;

function listArg<T extends string>(name: string, raw: string, allowed: readonly T[]): T[] {
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const it of items) {
    if (!(allowed as readonly string[]).includes(it)) throw new Error(`--${name}: unknown "${it}" (one of ${allowed.join(', ')})`);
  }
  return allowed.filter((a) => items.includes(a));
}

function numArg(name: string, raw: string, min: number): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`--${name}: expected a number >= ${min}, got "${raw}"`);
  return n;
}

function parseOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      only: { type: 'string', default: 'all' },
      targets: { type: 'string', default: ALL_TARGETS.join(',') },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: '50' },
      threads: { type: 'string', default: '1' },
      'l4-mb': { type: 'string', default: '100' },
      'l4-runs': { type: 'string', default: '5' },
      skua: { type: 'string', default: DEFAULT_SKUA_MAIN },
      ref: { type: 'string', default: '' },
      'xds-clusters': { type: 'string', default: '20000' },
      'skua-before': { type: 'string' },
      strict: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;
  return {
    only: values.only.trim() === 'all' ? [...ALL_SCENARIOS] : listArg('only', values.only, ALL_SCENARIOS),
    targets: listArg('targets', values.targets, ALL_TARGETS),
    duration: Math.round(numArg('duration', values.duration, 1)),
    warmup: Math.round(numArg('warmup', values.warmup, 0)),
    connections: Math.round(numArg('connections', values.connections, 1)),
    threads: Math.round(numArg('threads', values.threads, 1)),
    l4Bytes: Math.round(numArg('l4-mb', values['l4-mb'], 1) * 1e6),
    l4Runs: Math.round(numArg('l4-runs', values['l4-runs'], 1)),
    skuaMain: values.skua,
    refs: values.ref.split(',').map((r) => r.trim()).filter(Boolean),
    builds: [],
    xdsClusters: Math.round(numArg('xds-clusters', values['xds-clusters'], 2)),
    skuaBefore: values['skua-before'],
    strict: values.strict,
  };
}

function neededPackages(opts: Options): string[] {
  const pkgs: string[] = [];
  const has = (t: TargetName): boolean => opts.targets.includes(t);
  if (opts.only.includes('l7') || opts.only.includes('routes') || opts.only.includes('mtls')) pkgs.push('nginx', 'wrk');
  if (opts.only.includes('sidecar-pair')) pkgs.push('nginx', 'openssl');
  if (opts.only.includes('idle') && has('nginx')) pkgs.push('nginx');
  if (has('haproxy') && (opts.only.includes('l7') || opts.only.includes('l4'))) pkgs.push('haproxy');
  if (has('nginx') && opts.only.includes('l4')) pkgs.push('nginx', 'libnginx-mod-stream');
  return pkgs;
}

/** Upper bound on the whole run; the watchdog stops everything after it. */
function budgetSeconds(opts: Options): number {
  const n = opts.targets.length;
  let s = 60;
  if (opts.only.includes('idle')) s += 3 * 3 * 30;
  if (opts.only.includes('l7')) s += n * (opts.warmup + opts.duration + 2 * 20 + 15);
  if (opts.only.includes('l4')) s += n * ((opts.l4Runs + 1) * 30 + 15);
  if (opts.only.includes('micro')) s += listMicroFiles().length * 120;
  if (opts.only.includes('routes')) s += 60 + 2 * (opts.warmup + 20) + 2 * ROUTES_ROUNDS * (opts.duration + 20);
  // Two proxies applying 5,000 services each (up to 5 min each on a loaded machine), plus the control plane.
  if (opts.only.includes('xds')) s += 720;
  // Three proxies (six with --skua-before), each: start, a push of up to 10 min on a slow build, a shrink, settling.
  if (opts.only.includes('xds-scale')) s += (opts.skuaBefore ? 6 : 3) * 900;
  if (opts.only.includes('mtls')) s += 3 * (opts.warmup + opts.duration + 60);
  // Four cases (start-up, warm-up, measured run), plus installing fortio once (go install).
  if (opts.only.includes('sidecar-pair')) s += 4 * (opts.warmup + opts.duration + 120) + 600;
  return s;
}

/** The commit measured, with "+dirty" when the working tree differs from it. */
function gitCommit(): string {
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const head = git('rev-parse', '--short=12', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no', '--', 'packages', 'bench') ? `${head}+dirty` : head;
  } catch { return 'unknown'; }
}

function loadavg(): string {
  try { return readFileSync('/proc/loadavg', 'utf8').trim(); } catch { return os.loadavg().map((l) => l.toFixed(2)).join(' '); }
}

function environment(opts: Options): Record<string, string> {
  const cpu = os.cpus();
  const env: Record<string, string> = {
    date: new Date().toISOString(),
    commit: gitCommit(),
    skua: opts.refs.length ? `refs ${opts.refs.join(', ')}` : opts.skuaMain,
    cpu: `${cpu[0]?.model ?? 'unknown'} x ${os.availableParallelism()}`,
    loadavg: loadavg(),
    node: process.version,
  };
  const l7 = opts.only.includes('l7');
  const l4 = opts.only.includes('l4');
  const routes = opts.only.includes('routes') || opts.only.includes('mtls');
  if (l7 || routes || opts.only.includes('sidecar-pair') || (l4 && opts.targets.includes('nginx'))) {
    env.nginx = versionOf(systemBinary('nginx'), ['-v']).replace(/^nginx version: /, '');
  }
  if ((l7 || l4) && opts.targets.includes('haproxy')) env.haproxy = versionOf(systemBinary('haproxy'), ['-v']);
  if (l7 || routes) env.wrk = versionOf(systemBinary('wrk'), ['-v']).replace(/ Copyright.*/, '');
  return env;
}

let tmpDir = '';
let cleaning: Promise<void> | undefined;

function removeTmp(): void {
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
  tmpDir = '';
}

function cleanup(): Promise<void> {
  cleaning ??= stopAll().finally(removeTmp);
  return cleaning;
}

function installExitHandlers(budget: number): void {
  const bail = (why: string, code: number) => {
    silence();
    process.stderr.write(`\nbench: ${why}; stopping every started process\n`);
    void cleanup().finally(() => process.exit(code));
  };
  process.once('SIGINT', () => bail('interrupted', 130));
  process.once('SIGTERM', () => bail('terminated', 143));
  process.once('uncaughtException', (err) => bail(`error: ${err.stack ?? err.message}`, 1));
  process.once('unhandledRejection', (err) => bail(`error: ${String(err)}`, 1));
  process.on('exit', () => { killAllSync(); removeTmp(); });
  setTimeout(() => bail(`run exceeded its ${budget} s budget`, 124), budget * 1000).unref();
}

function printScenario(res: ScenarioResult): void {
  process.stdout.write(`\n== ${res.scenario}: ${res.title} ==\n${textTable(res)}\n`);
  const skua = res.rows.find((r) => r.target === 'skua');
  if (!skua || res.scenario === 'routes' || res.scenario === 'idle' || res.scenario === 'mtls' || res.scenario === 'xds-scale' || res.scenario === 'sidecar-pair') return;
  const parts = (['nginx', 'haproxy'] as const).map((b) => {
    const r = ratio(res, skua, b);
    return `skua/${b} ${r === undefined ? '–' : r.toFixed(2)}`;
  });
  process.stdout.write(`ratios (${res.primary}): ${parts.join('   ')}\n`);
}

async function runScenario(s: Scenario, opts: Options): Promise<ScenarioResult | MicroResult> {
  if (s === 'idle') return runIdle(opts, tmpDir);
  if (s === 'l7') return runL7(opts, tmpDir);
  if (s === 'l4') return runL4(opts, tmpDir);
  if (s === 'routes') return runRoutes(opts, tmpDir);
  if (s === 'xds') return runXds(opts, tmpDir);
  if (s === 'xds-scale') return runXdsScale(opts, tmpDir);
  if (s === 'mtls') return runMtls(opts, tmpDir);
  if (s === 'sidecar-pair') return runSidecarPair(opts, tmpDir);
  return runMicro();
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) { process.stdout.write(`${USAGE}\n`); return 0; }
  if (opts.only.length === 0 || opts.targets.length === 0) throw new Error('nothing to run');
  ensurePackages(neededPackages(opts));
  resetClock();
  const budget = budgetSeconds(opts);
  installExitHandlers(budget);
  tmpDir = mkdtempSync(path.join(os.tmpdir(), 'skua-bench-'));
  chmodSync(tmpDir, 0o755); // nginx workers run as nobody
  const env = environment(opts);
  const targets = opts.only.some((s) => s !== 'micro') ? `; targets ${opts.targets.join(',')}` : '';
  progress('bench', `scenarios ${opts.only.join(',')}${targets}; bounded to ${budget} s`);

  opts.builds = skuaBuilds(opts.refs, opts.skuaMain, tmpDir);
  opts.skuaMain = opts.builds[0].main;
  // The proxy image's NODE_OPTIONS (V8 flags) for everything started here; --ref builds pass their own.
  process.env.NODE_OPTIONS = opts.builds[0].env.NODE_OPTIONS;
  progress('bench', `skua runs with NODE_OPTIONS="${process.env.NODE_OPTIONS}" (the proxy image's, Dockerfile)`);
  if (opts.targets.includes('skua') && opts.only.some((s) => s !== 'micro')) {
    warmCompileCaches(opts.builds, path.join(tmpDir, 'compile-cache'), (m) => progress('bench', m));
  }

  const results: ScenarioResult[] = [];
  const micro: MicroResult[] = [];
  for (const [i, s] of opts.only.entries()) {
    const start = loadavg();
    progress('bench', `scenario ${i + 1}/${opts.only.length}: ${s} (load average ${start.split(' ').slice(0, 3).join(' ')})`);
    const res = await runScenario(s, opts);
    if (res.scenario === 'micro') micro.push(res as MicroResult);
    else results.push({ ...(res as ScenarioResult), load: { start, end: loadavg() } });
    progress('bench', `scenario ${i + 1}/${opts.only.length}: ${s} done in ${res.seconds.toFixed(0)} s`);
  }
  await cleanup();

  const checks = [...checkAcceptance(results), ...routesChecks(results), ...mtlsChecks(results), ...xdsScaleChecks(results), ...idleChecks(results)];
  // A --ref comparison is written as <scenario>-refs-<stamp>.json: the report keeps showing the last plain run.
  const files = results.map((r) => writeJson(RESULTS_DIR, r, env, checks, opts.refs.length ? 'refs' : ''));
  for (const r of results) printScenario(r);
  for (const m of micro.filter((x) => x.rows.length > 0)) {
    process.stdout.write(`\n== micro: tinybench ==\n${microText(m)}\n`);
    files.push(writeMicroJson(m, env));
  }
  if (checks.length) process.stdout.write(`\nacceptance:\n${checks.map(checkLine).join('\n')}\n`);
  if (files.length) {
    files.push(writeMarkdown(RESULTS_DIR, results, env, checks, micro.flatMap(microMarkdown)));
    files.push(...writeReports(RESULTS_DIR));
    const goals = issueGoals(results).filter((g) => g.status !== 'not measured');
    if (goals.length) process.stdout.write(`\nissue 13 (this run):\n${goalsText(goals)}\n`);
    process.stdout.write(`\nwrote ${files.map((f) => path.relative(REPO_ROOT, f)).join(', ')}\n`);
  }
  process.stdout.write(`done in ${elapsedSeconds().toFixed(1)} s (load average now ${os.loadavg()[0].toFixed(2)})\n`);

  const failed = checks.some((c) => c.status === 'FAIL') || results.some((r) => r.rows.some((row) => row.error));
  return opts.strict && failed ? 1 : 0;
}

function writeMicroJson(m: MicroResult, env: Record<string, string>): string {
  return writeJsonFile(path.join(RESULTS_DIR, `micro-${fileStamp(new Date(m.startedAt))}.json`), { ...m, env });
}

main().then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error).message}\n`);
    void cleanup().finally(() => process.exit(1));
  },
);
