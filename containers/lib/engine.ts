/**
 * The container engine as the test and `./dev demo --containers` drive it: podman as root with this
 * repository's CONTAINERS_CONF (runc, cgroupfs, ulimits no higher than the current ones), or Docker
 * when only Docker is there. Every command runs as a child process with a time limit, and its
 * output is kept for error messages.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';

export const CONTAINERS_DIR = path.resolve(import.meta.dirname, '..');
export const REPO_ROOT = path.resolve(CONTAINERS_DIR, '..');
export const CONTAINERS_CONF = path.join(CONTAINERS_DIR, 'containers.conf');

export type EngineName = 'podman' | 'docker';

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  readonly cwd?: string;
  readonly env?: Record<string, string>;
  readonly input?: string;
  /** Milliseconds before the command is killed (its process group); default 10 minutes. */
  readonly timeoutMs?: number;
  /** Echo output lines as they come (long builds). */
  readonly echo?: (line: string) => void;
}

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** podman (as root) when it is installed, else a Docker engine that answers; undefined with the reason otherwise. */
export function pickEngine(): { engine: EngineName } | { reason: string } {
  if (has('podman')) {
    if (process.getuid?.() !== 0) return { reason: 'podman is installed but these tests run it as root only (not root)' };
    return { engine: 'podman' };
  }
  if (has('docker') && spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 20_000 }).status === 0) return { engine: 'docker' };
  return { reason: 'neither podman (as root) nor a running Docker engine is available' };
}

export function engineEnv(engine: EngineName, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>), ...extra };
  if (engine === 'podman' && !env.CONTAINERS_CONF) env.CONTAINERS_CONF = CONTAINERS_CONF;
  return env;
}

/** Runs `cmd args` to completion; never throws (look at `code`). */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? REPO_ROOT, env: opts.env ?? (process.env as Record<string, string>), detached: true, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let partial = '';
    const onChunk = (chunk: Buffer, into: 'out' | 'err'): void => {
      const s = chunk.toString('utf8');
      if (into === 'out') stdout += s; else stderr += s;
      if (!opts.echo) return;
      partial += s;
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) opts.echo(l);
    };
    child.stdout?.on('data', (c: Buffer) => onChunk(c, 'out'));
    child.stderr?.on('data', (c: Buffer) => onChunk(c, 'err'));
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${opts.timeoutMs ?? 600_000} ms)`;
      try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* already gone */ }
    }, opts.timeoutMs ?? 600_000);
    child.on('error', (err) => { clearTimeout(timer); resolve({ code: 127, stdout, stderr: `${stderr}${err.message}` }); });
    child.on('close', (code, signal) => { clearTimeout(timer); resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }); });
    if (child.stdin) { child.stdin.on('error', () => {}); child.stdin.end(opts.input); }
  });
}

/** Like run, but throws with the command line and the end of its output when it fails. */
export async function must(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) {
    const tail = (s: string): string => s.trim().split('\n').slice(-25).join('\n');
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}\n${tail(r.stdout)}\n${tail(r.stderr)}`);
  }
  return r;
}
