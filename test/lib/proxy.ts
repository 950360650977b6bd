// Starts skua-proxy as a real child process (through its CLI), waits for the admin /ready,
// and always stops it by PID. Every listener port comes from a port book: a free port is found
// by binding port 0 and releasing it; a start that loses the race (EADDRINUSE) is retried with
// new ports.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { toYaml } from './yaml.ts';

export type Json = Record<string, unknown>;

export const repoRoot = path.resolve(import.meta.dirname, '..', '..');
/** SKUA_TEST_PROXY_MAIN runs the tests against another build (e.g. main's, to see a regression test fail there). */
export const proxyMain = process.env.SKUA_TEST_PROXY_MAIN ?? path.join(repoRoot, 'packages', 'proxy', 'src', 'main.ts');
export const fixturesDir = path.resolve(repoRoot, '..', 'shared', 'fixtures');

const handedOut = new Set<number>();

/** A loopback port that was free a moment ago (never the same one twice in this process). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = createServer();
      s.unref();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    if (!handedOut.has(port)) { handedOut.add(port); return port; }
  }
}

/** Named ports for one bootstrap: `ports('http')` is the same number every time it is asked. */
export type PortBook = (name: string) => number;

async function makePortBook(names: readonly string[]): Promise<{ book: PortBook; assigned: Record<string, number> }> {
  const assigned: Record<string, number> = {};
  for (const n of names) assigned[n] = await freePort();
  const book: PortBook = (name) => {
    const p = assigned[name];
    if (p === undefined) throw new Error(`port '${name}' was not declared in startProxy({ ports: [...] })`);
    return p;
  };
  return { book, assigned };
}

/** Every child this module started, so that a crashing test run still kills them. */
const live = new Set<ChildProcess>();
process.once('exit', () => { for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); });

export interface StartOptions {
  /** Names of the listener ports the bootstrap needs ('admin' is always added). */
  readonly ports?: readonly string[];
  /** Extra command-line arguments (e.g. ['--concurrency', '2']). */
  readonly args?: readonly string[];
  readonly format?: 'yaml' | 'json';
  readonly logLevel?: string;
  readonly readyTimeoutMs?: number;
  /** Extra environment (pilot-agent's CA_ADDR, SECRET_TTL, ...). */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory: istio-agent's relative paths (./var/run/secrets/..., ./etc/certs) resolve from it. */
  readonly cwd?: string;
}

export interface AdminReply { readonly status: number; readonly body: string; readonly headers: Headers }

/** Waits until `text()` has a line matching `re` and returns that line. */
async function waitForLine(what: string, text: () => string, re: RegExp, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = text().split('\n').find((l) => re.test(l));
    if (line !== undefined) return line;
    if (Date.now() > deadline) throw new Error(`no ${what} line matching ${re} within ${timeoutMs} ms; ${what}:\n${text().slice(-4000)}`);
    await sleep(25);
  }
}

export interface RunningProxy {
  readonly pid: number;
  readonly adminUrl: string;
  readonly ports: Readonly<Record<string, number>>;
  readonly configPath: string;
  readonly bootstrap: Json;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
  stderr(): string;
  /** Waits until stdout has a line matching `re` and returns that line. */
  waitForStdout(re: RegExp, timeoutMs?: number): Promise<string>;
  /** The same for stderr (log lines: a request's is written when it completes, after its response). */
  waitForStderr(re: RegExp, timeoutMs?: number): Promise<string>;
  /** VmRSS of the proxy process in bytes. */
  rss(): number;
  admin(pathAndQuery: string, method?: string): Promise<AdminReply>;
  /** Counter/gauge value from /stats?format=json (undefined if the stat does not exist). */
  stat(name: string): Promise<number | undefined>;
  /**
   * Stops the proxy (SIGTERM, then SIGKILL after 3 s) and removes its files. Throws, with the
   * proxy's stderr, if it had already exited on its own (a crash) unless `allowExited`.
   */
  stop(opts?: { allowExited?: boolean }): Promise<void>;
}

const MAX_CAPTURE = 8 << 20;

function unrefChild(child: ChildProcess): void {
  child.unref();
  for (const s of [child.stdout, child.stderr]) (s as unknown as { unref?: () => void } | null)?.unref?.();
}

/**
 * Runs every cleanup step even when an earlier one throws (a crashed proxy's stop() throws),
 * then rethrows the first error: use it in after() hooks.
 */
export async function cleanup(...steps: Array<(() => unknown) | undefined>): Promise<void> {
  let first: unknown;
  for (const step of steps) {
    try { await step?.(); } catch (e) { first ??= e; }
  }
  if (first !== undefined) throw first;
}

function capture(stream: NodeJS.ReadableStream | null): { text: () => string } {
  let buf = '';
  stream?.setEncoding('utf8');
  stream?.on('data', (d: string) => {
    buf += d;
    if (buf.length > MAX_CAPTURE) buf = buf.slice(buf.length - MAX_CAPTURE / 2);
    if (process.env.SKUA_TEST_DEBUG) process.stderr.write(d);
  });
  return { text: () => buf };
}

export function vmRssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB/m.exec(status);
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

function writeConfig(dir: string, bootstrap: Json, format: 'yaml' | 'json'): string {
  const file = path.join(dir, `bootstrap.${format}`);
  writeFileSync(file, format === 'yaml' ? toYaml(bootstrap) : JSON.stringify(bootstrap, null, 2));
  return file;
}

async function sleep(ms: number): Promise<void> { await new Promise((r) => setTimeout(r, ms)); }

async function stopChild(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const t = setTimeout(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); }, 3000);
  await exited;
  clearTimeout(t);
}

/**
 * Starts skua-proxy with the bootstrap `build(ports)` returns. The admin address is always
 * set to 127.0.0.1:<free port>.
 */
export async function startProxy(build: (ports: PortBook) => Json, opts: StartOptions = {}): Promise<RunningProxy> {
  let lastError = '';
  for (let attempt = 0; attempt < 4; attempt++) {
    const { book, assigned } = await makePortBook(['admin', ...(opts.ports ?? [])]);
    const bootstrap = build(book);
    const admin = (bootstrap.admin as Json | undefined) ?? {};
    bootstrap.admin = { ...admin, address: { socket_address: { address: '127.0.0.1', port_value: book('admin') } } };
    const dir = mkdtempSync(path.join(tmpdir(), 'skua-test-'));
    const configPath = writeConfig(dir, bootstrap, opts.format ?? 'yaml');
    const child = spawn(process.execPath, [proxyMain, '-c', configPath, '-l', opts.logLevel ?? 'warn', ...(opts.args ?? [])], {
      cwd: opts.cwd ?? repoRoot, stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ? { ...process.env, ...opts.env } : process.env,
    });
    live.add(child);
    // A proxy a failed test forgot must not keep the test process alive: the exit hook kills it.
    unrefChild(child);
    const out = capture(child.stdout), err = capture(child.stderr);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('exit', (code, signal) => { live.delete(child); resolve({ code, signal }); });
    });
    const adminUrl = `http://127.0.0.1:${book('admin')}`;
    const proxy: RunningProxy = {
      pid: child.pid ?? -1, adminUrl, ports: assigned, configPath, bootstrap, exited,
      stdout: out.text,
      stderr: err.text,
      waitForStdout: (re, timeoutMs = 5000) => waitForLine('stdout', out.text, re, timeoutMs),
      waitForStderr: (re, timeoutMs = 5000) => waitForLine('stderr', err.text, re, timeoutMs),
      rss: () => vmRssBytes(child.pid ?? -1),
      async admin(p, method = 'GET') {
        const res = await fetch(adminUrl + p, { method, signal: AbortSignal.timeout(10_000) });
        return { status: res.status, body: await res.text(), headers: res.headers };
      },
      async stat(name) {
        const r = await proxy.admin('/stats?format=json');
        const stats = (JSON.parse(r.body) as { stats: Array<{ name: string; value: number }> }).stats;
        return stats.find((s) => s.name === name)?.value;
      },
      async stop(o = {}) {
        const crashed = child.exitCode !== null || child.signalCode !== null;
        await stopChild(child, exited);
        rmSync(dir, { recursive: true, force: true });
        if (crashed && !o.allowExited) {
          throw new Error(`skua-proxy (pid ${child.pid}) exited on its own before stop(): ${child.exitCode ?? child.signalCode}; stderr:\n${err.text().slice(-4000)}`);
        }
      },
    };
    const deadline = Date.now() + (opts.readyTimeoutMs ?? 15_000);
    let ready = false;
    while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
      try {
        const r = await fetch(`${adminUrl}/ready`, { signal: AbortSignal.timeout(1000) });
        const body = await r.text();
        if (r.status === 200 && body.trim() === 'LIVE') { ready = true; break; }
      } catch { /* not listening yet */ }
      await sleep(50);
    }
    if (ready) return proxy;
    await sleep(50);
    const stoppedBeforeReady = child.exitCode === null && child.signalCode === null;
    lastError = `skua-proxy did not become ready (exit ${child.exitCode ?? child.signalCode ?? 'none'}); stderr:\n${err.text()}\nstdout:\n${out.text()}`;
    await proxy.stop({ allowExited: true });
    // Retry a lost port race, and a start killed by a signal this module did not send (a shared
    // machine where someone else cleans up node processes); anything else is the proxy's failure.
    if (!/EADDRINUSE/.test(lastError) && !(isForeignStop(child.signalCode) && !stoppedBeforeReady)) break;
  }
  throw new Error(lastError);
}

/** SIGTERM/SIGINT we did not send: someone else on a shared machine cleaning up node processes. */
function isForeignStop(signal: NodeJS.Signals | null): boolean {
  return signal === 'SIGTERM' || signal === 'SIGINT';
}

export interface CliResult { readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly stdout: string; readonly stderr: string }

/** Runs the proxy's CLI to completion (bounded by `timeoutMs`, killed by PID past it). */
export async function runProxyCli(args: readonly string[], timeoutMs = 20_000): Promise<CliResult> {
  let r = await runOnce(args, timeoutMs);
  if (isForeignStop(r.signal)) r = await runOnce(args, timeoutMs);
  return r;
}

function runOnce(args: readonly string[], timeoutMs: number): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [proxyMain, ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(child);
    const out = capture(child.stdout), err = capture(child.stderr);
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`skua-proxy ${args.join(' ')} did not exit within ${timeoutMs} ms`)); }, timeoutMs);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      resolve({ code, signal, stdout: out.text(), stderr: err.text() });
    });
  });
}

/** `--mode validate` on a file path or on a bootstrap object (written to a temp file). */
export async function validate(config: string | Json, opts: { format?: 'yaml' | 'json'; args?: readonly string[] } = {}): Promise<CliResult> {
  if (typeof config === 'string') return runProxyCli(['-c', config, '--mode', 'validate', ...(opts.args ?? [])]);
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-validate-'));
  try {
    const file = writeConfig(dir, config, opts.format ?? 'yaml');
    return await runProxyCli(['-c', file, '--mode', 'validate', ...(opts.args ?? [])]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
