/**
 * Micro-benchmarks: every `bench/micro/*.bench.ts` default-exports a function
 * that adds tasks to a tinybench `Bench`:
 *
 *   import type { Bench } from 'tinybench';
 *   export default function register(bench: Bench): void {
 *     bench.add('route match: prefix /', () => { ... });
 *   }
 *
 * Each file gets its own Bench, run in this process one after the other.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { progress } from '../lib/progress.ts';
import { REPO_ROOT } from '../lib/targets.ts';

export const MICRO_DIR = path.join(REPO_ROOT, 'bench/micro');
const TIME_MS = 1000;

export interface MicroRow {
  file: string;
  task: string;
  opsPerSec?: number;
  meanNs?: number;
  p99Ns?: number;
  rmePct?: number;
  samples?: number;
  error?: string;
}

export interface MicroResult {
  scenario: 'micro';
  startedAt: string;
  seconds: number;
  rows: MicroRow[];
}

type Register = (bench: Bench) => void | Promise<void>;

function isRegister(v: unknown): v is Register {
  return typeof v === 'function';
}

function rowsOf(file: string, bench: Bench): MicroRow[] {
  return bench.tasks.map((t): MicroRow => {
    const r = t.result;
    if (r.state === 'completed' || r.state === 'aborted-with-statistics') {
      return {
        file, task: t.name, opsPerSec: r.throughput.mean, meanNs: r.latency.mean * 1e6,
        p99Ns: r.latency.p99 * 1e6, rmePct: r.latency.rme, samples: r.latency.samplesCount,
      };
    }
    return { file, task: t.name, error: r.state === 'errored' ? r.error.message : r.state };
  });
}

export function listMicroFiles(): string[] {
  try {
    return readdirSync(MICRO_DIR).filter((f) => f.endsWith('.bench.ts')).sort();
  } catch {
    return [];
  }
}

export async function runMicro(): Promise<MicroResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const rows: MicroRow[] = [];
  const files = listMicroFiles();
  if (files.length === 0) progress('micro', `no *.bench.ts files in ${path.relative(REPO_ROOT, MICRO_DIR)}/`);
  for (const file of files) {
    progress('micro', `${file}`);
    try {
      const mod = (await import(pathToFileURL(path.join(MICRO_DIR, file)).href)) as { default?: unknown };
      if (!isRegister(mod.default)) throw new Error('no default-exported register(bench) function');
      const bench = new Bench({ name: file, time: TIME_MS });
      await mod.default(bench);
      await bench.run();
      rows.push(...rowsOf(file, bench));
    } catch (err) {
      rows.push({ file, task: '(file)', error: (err as Error).message });
    }
  }
  return { scenario: 'micro', startedAt, seconds: (performance.now() - t0) / 1000, rows };
}

function fmt(v: number | undefined, digits: number): string {
  return v === undefined ? '–' : v.toLocaleString('en-US', { maximumFractionDigits: digits });
}

export function microCells(res: MicroResult): { head: string[]; body: string[][] } {
  const head = ['file', 'task', 'ops/s', 'mean ns', 'p99 ns', '±%', 'samples'];
  const body = res.rows.map((r) => (r.error
    ? [r.file, r.task, `FAILED: ${r.error}`, '', '', '', '']
    : [r.file, r.task, fmt(r.opsPerSec, 0), fmt(r.meanNs, 1), fmt(r.p99Ns, 1), fmt(r.rmePct, 2), fmt(r.samples, 0)]));
  return { head, body };
}

export function microMarkdown(res: MicroResult): string[] {
  const { head, body } = microCells(res);
  if (body.length === 0) return [];
  return [
    '## micro: tinybench', '',
    `| ${head.join(' | ')} |`, `|---|---|${head.slice(2).map(() => '---:').join('|')}|`,
    ...body.map((r) => `| ${r.join(' | ')} |`), '',
  ];
}

export function microText(res: MicroResult): string {
  const { head, body } = microCells(res);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  return [head, ...body].map((r) => r.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')).join('\n');
}
