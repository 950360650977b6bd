/**
 * Runs fuzz targets under Jazzer.js (libFuzzer, coverage-guided) and reports executions and crashes.
 *
 *   node fuzz/run.ts [--seconds N] [--out DIR] [target ...]      (./dev fuzz passes its arguments here)
 *
 * Each target starts from its committed seeds (fuzz/corpus/<target>) and regression inputs
 * (fuzz/regressions/<target>); new interesting inputs and crash artifacts go to DIR/<target>
 * (default fuzz/.out, not committed). Exit status 1 when any target crashed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

export const FUZZ_DIR = import.meta.dirname;
const ROOT = path.resolve(FUZZ_DIR, '..');
export const TARGETS = readdirSync(path.join(FUZZ_DIR, 'targets')).filter((f) => f.endsWith('.ts') && f !== 'invariant.ts' && !f.startsWith('lib-')).map((f) => f.slice(0, -3)).sort();

export interface FuzzResult {
  readonly target: string;
  readonly executions: number;
  readonly crashed: boolean;
  /** The crash artifact libFuzzer wrote, if any. */
  readonly artifact: string;
  /** The first lines of the failure report, if any. */
  readonly report: string;
  readonly seconds: number;
}

/** Fuzzes one target for `seconds` (wall clock, libFuzzer's -max_total_time). */
export function fuzzTarget(target: string, seconds: number, outDir: string): Promise<FuzzResult> {
  const work = path.join(outDir, target);
  const corpus = path.join(work, 'corpus');
  mkdirSync(corpus, { recursive: true });
  const seeds = [path.join(FUZZ_DIR, 'corpus', target), path.join(FUZZ_DIR, 'regressions', target)].filter((d) => existsSync(d));
  const dict = path.join(FUZZ_DIR, 'dict', `${target}.dict`);
  const args = [
    path.join(ROOT, 'node_modules/@jazzer.js/core/dist/cli.js'),
    path.join(FUZZ_DIR, 'engine/entry.mjs'), '--sync',
    '--', corpus, ...seeds,
    `-max_total_time=${seconds}`, '-timeout=10', '-rss_limit_mb=2048', '-print_final_stats=1',
    `-artifact_prefix=${work}/`, ...(existsSync(dict) ? [`-dict=${dict}`] : []),
  ];
  const before = new Set(readdirSync(work));
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: {
        ...process.env,
        SKUA_FUZZ_TARGET: path.join(FUZZ_DIR, 'targets', `${target}.ts`),
        NODE_OPTIONS: `--import ${path.join(FUZZ_DIR, 'engine/ts-hook.mjs')} --disable-warning=ExperimentalWarning`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    const keep = (b: Buffer): void => { log = (log + b.toString('utf8')).slice(-200_000); };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('close', (code) => {
      writeFileSync(path.join(work, 'last-run.log'), log);
      // The final stats can be lost when the engine exits with output still queued: then the last
      // progress line ("#123 NEW ...", "#123 DONE ...") gives a lower bound.
      const progress = [...log.matchAll(/^#(\d+)\s/gm)].reduce((max, m) => Math.max(max, Number(m[1])), 0);
      const executions = Number(/stat::number_of_executed_units: (\d+)/.exec(log)?.[1] ?? /Done (\d+) runs/.exec(log)?.[1] ?? progress);
      const found = readdirSync(work).find((f) => !before.has(f) && /^(crash|timeout|oom|leak)-/.test(f));
      const artifact = found ? path.join(work, found) : '';
      const at = log.search(/==\d+== |Uncaught Exception|ERROR: libFuzzer/);
      // No executions at all is a broken run, not a clean one.
      const crashed = code !== 0 || artifact !== '' || executions === 0;
      // A crash report from its marker on; otherwise (no executions, a killed process) the log's end.
      const report = !crashed ? '' : at >= 0 ? log.slice(at).split('\n').slice(0, 40).join('\n')
        : `exit ${code}, ${executions} executions; log ends:\n${log.split('\n').slice(-30).join('\n')}`;
      resolve({ target, executions, crashed, artifact, report, seconds: (Date.now() - started) / 1000 });
    });
  });
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: { seconds: { type: 'string', default: '60' }, out: { type: 'string', default: path.join(FUZZ_DIR, '.out') } },
    allowPositionals: true,
  });
  const seconds = Number(values.seconds);
  if (!Number.isInteger(seconds) || seconds < 1) throw new Error(`--seconds: expected a positive integer, got ${values.seconds}`);
  const targets = positionals.length ? positionals : TARGETS;
  for (const t of targets) if (!TARGETS.includes(t)) throw new Error(`unknown target ${t} (targets: ${TARGETS.join(', ')})`);
  let crashes = 0, total = 0;
  for (const t of targets) {
    const r = await fuzzTarget(t, seconds, values.out!);
    total += r.executions;
    process.stdout.write(`${t}: ${r.executions} executions in ${r.seconds.toFixed(0)} s, ${r.crashed ? 'CRASH' : '0 crashes'}\n`);
    if (r.crashed) {
      crashes++;
      process.stdout.write(`${r.report}\n  artifact: ${r.artifact || '(none)'}\n  minimise: add -minimize_crash=1 and the artifact to the jazzer command line, then commit it under fuzz/regressions/${t}/\n`);
    }
  }
  process.stdout.write(`fuzz: ${targets.length} targets, ${total} executions, ${crashes} crashes\n`);
  return crashes ? 1 : 0;
}

if (import.meta.main) main().then((code) => process.exit(code), (err: Error) => { process.stderr.write(`fuzz: ${err.message}\n`); process.exit(2); });
