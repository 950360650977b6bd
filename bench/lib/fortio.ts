/**
 * fortio, Istio's own load generator (the one behind its published latency and CPU numbers):
 * found on PATH or in Go's bin directory, else installed once with `go install` (kept there, so
 * later runs reuse it). @latest first; if one of its dependencies cannot be fetched, the pinned
 * release below, the newest that builds from the Go module proxy alone.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runToCompletion } from './procs.ts';

const MODULE = 'fortio.org/fortio';
const PINNED = 'v1.63.0';

function which(cmd: string): string | undefined {
  try { return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || undefined; } catch { return undefined; }
}

function goBin(): string | undefined {
  const go = which('go') ?? (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : undefined);
  if (!go) return undefined;
  const env = (k: string): string => execFileSync(go, ['env', k], { encoding: 'utf8' }).trim();
  return env('GOBIN') || path.join(env('GOPATH').split(path.delimiter)[0], 'bin');
}

/** The fortio binary, installing it if needed; throws with the reason when it cannot. */
export function ensureFortio(log: (msg: string) => void): string {
  const onPath = which('fortio');
  if (onPath) return onPath;
  const bin = goBin();
  if (!bin) throw new Error('fortio is not installed and there is no Go toolchain to `go install` it');
  const cached = path.join(bin, 'fortio');
  if (existsSync(cached)) return cached;
  const go = which('go') ?? '/usr/local/go/bin/go';
  const errors: string[] = [];
  for (const version of ['latest', PINNED]) {
    log(`installing fortio: go install ${MODULE}@${version}`);
    try {
      execFileSync(go, ['install', `${MODULE}@${version}`], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 600_000 });
      if (existsSync(cached)) return cached;
    } catch (err) {
      errors.push(`@${version}: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim().split('\n').at(-1)}`);
    }
  }
  throw new Error(`could not install fortio (${errors.join('; ')})`);
}

export function fortioVersion(bin: string): string {
  try { return execFileSync(bin, ['version'], { encoding: 'utf8' }).trim(); } catch { return 'unknown'; }
}

export interface FortioLoad {
  readonly url: string;
  readonly qps: number;
  readonly connections: number;
  readonly seconds: number;
  /** Extra request headers ("Host: echo:9080"). */
  readonly headers?: readonly string[];
}

export interface FortioResult {
  readonly qps: number;
  readonly count: number;
  /** Percentiles in ms. */
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly avgMs: number;
  readonly maxMs: number;
  /** Requests that did not answer 200 (errors included). */
  readonly errors: number;
  /** Average response size, headers and body. */
  readonly responseBytes: number;
}

interface FortioJson {
  ActualQPS: number;
  DurationHistogram: { Count: number; Avg: number; Max: number; Percentiles: Array<{ Percentile: number; Value: number }> };
  RetCodes: Record<string, number>;
  Sizes?: { Avg: number };
}

export function parseFortio(json: FortioJson): FortioResult {
  const h = json.DurationHistogram;
  const pct = (p: number): number => (h.Percentiles.find((x) => x.Percentile === p)?.Value ?? NaN) * 1000;
  const ok = json.RetCodes['200'] ?? 0;
  return {
    qps: json.ActualQPS, count: h.Count, p50: pct(50), p90: pct(90), p99: pct(99), p999: pct(99.9),
    avgMs: h.Avg * 1000, maxMs: h.Max * 1000, errors: h.Count - ok, responseBytes: json.Sizes?.Avg ?? NaN,
  };
}

/**
 * `fortio load` at a fixed rate over a fixed number of connections (each connection keeps its
 * own schedule and catches up after a slow answer, fortio's default), 10 µs histogram
 * resolution, -uniform to spread the connections' start times.
 */
export async function runFortio(bin: string, load: FortioLoad): Promise<FortioResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'skua-fortio-'));
  try {
    const out = path.join(dir, 'result.json');
    const args = ['load', '-qps', String(load.qps), '-c', String(load.connections), '-t', `${load.seconds}s`, '-r', '0.00001',
      '-p', '50,90,99,99.9', '-uniform', '-json', out, ...(load.headers ?? []).flatMap((h) => ['-H', h]), load.url];
    const r = await runToCompletion('fortio', bin, args, (load.seconds + 30) * 1000);
    if (r.timedOut || !existsSync(out)) throw new Error(`fortio ${r.timedOut ? 'timed out' : `exited ${r.code}`}: ${r.stderr.trim().split('\n').slice(-4).join('\n')}`);
    return parseFortio(JSON.parse(readFileSync(out, 'utf8')) as FortioJson);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
