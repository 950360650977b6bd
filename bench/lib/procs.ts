/**
 * Every process the harness starts goes through here, so that each one can be
 * stopped by PID on normal exit, on SIGINT/SIGTERM and on error. Children are
 * spawned detached (their own process group), so `kill(-pid)` also reaches
 * nginx workers, and a terminal Ctrl-C reaches only the harness.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import path from 'node:path';

const OUTPUT_KEEP = 8192;

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  /** Resolves with the exit code (or the signal name) once the process is gone. */
  exited: Promise<number | string>;
  exitStatus: number | string | undefined;
  stdout: string;
  stderr: string;
}

export interface RunOutcome {
  code: number | string;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface StartOptions {
  cwd?: string;
  /** Keep all of stdout (for tools whose output is parsed), not only the tail. */
  fullStdout?: boolean;
  /** Extra environment variables (added to this process's). */
  env?: Record<string, string>;
  /** Also append all of stdout and stderr to this file (profiling runs: --trace-gc output). */
  logFile?: string;
}

const live = new Set<Proc>();

function appendTail(prev: string, chunk: string): string {
  const next = prev + chunk;
  return next.length > OUTPUT_KEEP ? next.slice(next.length - OUTPUT_KEEP) : next;
}

export function startProcess(name: string, cmd: string, args: string[], opts: StartOptions = {}): Proc {
  const child = spawn(cmd, args, { cwd: opts.cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ? { ...process.env, ...opts.env } : process.env });
  if (child.pid === undefined) {
    // spawn failures (ENOENT) are reported asynchronously; make them synchronous here.
    throw new Error(`${name}: could not start ${cmd} (is it installed?)`);
  }
  const proc: Proc = {
    name, child, pid: child.pid, exitStatus: undefined, stdout: '', stderr: '',
    exited: Promise.resolve(0),
  };
  child.stdout?.setEncoding('utf8');
  child.stderr?.setEncoding('utf8');
  child.stdout?.on('data', (s: string) => {
    proc.stdout = opts.fullStdout ? proc.stdout + s : appendTail(proc.stdout, s);
  });
  child.stderr?.on('data', (s: string) => { proc.stderr = appendTail(proc.stderr, s); });
  if (opts.logFile) {
    const log = createWriteStream(opts.logFile, { flags: 'a' });
    child.stdout?.on('data', (s: string) => log.write(s));
    child.stderr?.on('data', (s: string) => log.write(s));
    child.once('close', () => log.end());
  }
  proc.exited = new Promise((resolve) => {
    child.on('error', (err) => { proc.stderr = appendTail(proc.stderr, String(err)); });
    child.on('close', (code, signal) => {
      proc.exitStatus = code ?? signal ?? 'unknown';
      live.delete(proc);
      resolve(proc.exitStatus);
    });
  });
  live.add(proc);
  return proc;
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try { process.kill(-pid, signal); } catch { /* already gone */ }
  try { process.kill(pid, signal); } catch { /* already gone */ }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** SIGTERM the process group, then SIGKILL it if it is still there after `graceMs`. */
export async function stopProcess(proc: Proc, graceMs = 3000): Promise<void> {
  if (proc.exitStatus !== undefined) return;
  signalGroup(proc.pid, 'SIGTERM');
  const gone = await Promise.race([proc.exited.then(() => true), delay(graceMs).then(() => false)]);
  if (!gone) {
    signalGroup(proc.pid, 'SIGKILL');
    await Promise.race([proc.exited, delay(1000)]);
  }
  // nginx workers outlive a killed master: make sure the whole group is gone.
  signalGroup(proc.pid, 'SIGKILL');
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((p) => stopProcess(p)));
}

/** Last resort from a synchronous 'exit' handler. */
export function killAllSync(): void {
  for (const p of live) signalGroup(p.pid, 'SIGKILL');
  live.clear();
}

/**
 * A tool's entry point: every process it started is stopped when it ends, fails or is interrupted.
 * Resolves when `main` is done (exitCode 1 if it threw).
 */
export async function runTool(main: () => Promise<void>): Promise<void> {
  process.on('exit', killAllSync);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => { void stopAll().then(() => process.exit(130)); });
  try {
    await main();
  } catch (err) {
    console.error((err as Error).stack ?? String(err));
    await stopAll();
    process.exitCode = 1;
  }
}

/** Run a command to completion, killing it if it outlives `timeoutMs`. */
export async function runToCompletion(
  name: string, cmd: string, args: string[], timeoutMs: number, opts: StartOptions = {},
): Promise<RunOutcome> {
  const proc = startProcess(name, cmd, args, { ...opts, fullStdout: true });
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; void stopProcess(proc, 1000); }, timeoutMs);
  const code = await proc.exited;
  clearTimeout(timer);
  return { code, stdout: proc.stdout, stderr: proc.stderr, timedOut };
}

/** The last `n` lines of a process's stderr (or stdout) without stack frames, for error messages. */
export function tailOf(proc: Proc, n = 8): string {
  const text = (proc.stderr.trim() || proc.stdout.trim());
  return text.split('\n').filter((l) => !/^\s+at /.test(l)).slice(-n).join('\n');
}

/** Absolute path of a system binary (sbin is not always on PATH). */
export function systemBinary(name: string): string {
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/sbin', '/usr/local/bin']) {
    const p = path.join(dir, name);
    if (existsSync(p)) return p;
  }
  return name;
}
