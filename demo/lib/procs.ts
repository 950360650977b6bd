/**
 * Every process the demo starts goes through here, so each one is stopped by its own PID on normal
 * exit, on error and on SIGINT/SIGTERM. Children run in their own process group (detached), so a
 * terminal Ctrl-C reaches only the demo, which then stops them in order.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const KEEP = 16_384;

export interface Proc {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Resolves with the exit code (or signal name) once the process is gone. */
  readonly exited: Promise<number | string>;
  status: number | string | undefined;
  /** The tail of stdout / stderr. */
  stdout: string;
  stderr: string;
}

export interface StartOptions {
  readonly env?: Record<string, string>;
  readonly cwd?: string;
  /** Called with every complete stdout line (e.g. to echo the access log in --keep mode). */
  onLine?: (line: string) => void;
}

const live = new Set<Proc>();

const tail = (prev: string, chunk: string): string => {
  const s = prev + chunk;
  return s.length > KEEP ? s.slice(s.length - KEEP) : s;
};

/** Starts `node <script> ...args` with the running Node (the demo needs Node >= 24 anyway). */
export function startNode(name: string, script: string, args: readonly string[], opts: StartOptions = {}): Proc {
  const child = spawn(process.execPath, [script, ...args], {
    detached: true,
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${script}`);
  let partial = '';
  let done!: (status: number | string) => void;
  const exited = new Promise<number | string>((resolve) => { done = resolve; });
  const proc: Proc = { name, pid: child.pid, child, status: undefined, stdout: '', stderr: '', exited };
  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stdout!.on('data', (s: string) => {
    proc.stdout = tail(proc.stdout, s);
    if (!opts.onLine) return;
    const lines = (partial + s).split('\n');
    partial = lines.pop() ?? '';
    for (const l of lines) opts.onLine(l);
  });
  child.stderr!.on('data', (s: string) => { proc.stderr = tail(proc.stderr, s); });
  child.on('error', (err) => { proc.stderr = tail(proc.stderr, `${String(err)}\n`); });
  child.on('close', (code, sig) => {
    proc.status = code ?? sig ?? 'unknown';
    live.delete(proc);
    done(proc.status);
  });
  live.add(proc);
  return proc;
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());

function signal(pid: number, sig: NodeJS.Signals): void {
  try { process.kill(-pid, sig); } catch { /* gone */ }
}

/** SIGTERM the process (its group), SIGKILL after `graceMs`. */
export async function stop(proc: Proc, graceMs = 3000): Promise<void> {
  if (proc.status !== undefined) return;
  signal(proc.pid, 'SIGTERM');
  if (await Promise.race([proc.exited.then(() => true), delay(graceMs).then(() => false)])) return;
  signal(proc.pid, 'SIGKILL');
  await Promise.race([proc.exited, delay(1000)]);
}

/** Stops everything still running, most recently started first (the proxy before the apps). */
export async function stopAll(): Promise<void> {
  for (const p of [...live].reverse()) await stop(p);
}

/** Last resort from a synchronous 'exit' handler. */
export function killAllSync(): void {
  for (const p of live) signal(p.pid, 'SIGKILL');
  live.clear();
}

/** The last lines of a process's output, without stack frames, for error messages. */
export function tailOf(proc: Proc, n = 10): string {
  const text = proc.stderr.trim() || proc.stdout.trim();
  return text.split('\n').filter((l) => !/^\s+at /.test(l)).slice(-n).map((l) => `  ${proc.name}| ${l}`).join('\n');
}
