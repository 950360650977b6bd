// Real clients: node:http requests, raw sockets, and external tools (curl, h2load) run as
// child processes bounded in time.
import { spawn } from 'node:child_process';
import { request as httpRequest, type Agent, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Readable } from 'node:stream';

export interface HttpResult {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  readonly text: string;
  /** Local port of the client socket (shows which connection carried the request). */
  readonly localPort: number;
}

export interface RequestOptions {
  readonly method?: string;
  readonly headers?: OutgoingHttpHeaders;
  readonly body?: string | Buffer | Readable;
  readonly agent?: Agent | false;
  readonly timeoutMs?: number;
}

/** One HTTP/1.1 request with node:http; rejects on socket errors and after `timeoutMs`. */
export function request(url: string, opts: RequestOptions = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: opts.method ?? 'GET', headers: opts.headers, agent: opts.agent ?? false });
    const timer = setTimeout(() => req.destroy(new Error(`request to ${url} timed out after ${opts.timeoutMs ?? 10_000} ms`)), opts.timeoutMs ?? 10_000);
    req.once('error', (e) => { clearTimeout(timer); reject(e); });
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      const localPort = res.socket.localPort ?? 0;
      res.on('data', (d: Buffer) => chunks.push(d));
      res.once('aborted', () => { clearTimeout(timer); reject(new Error('response aborted')); });
      res.once('error', (e) => { clearTimeout(timer); reject(e); });
      res.once('end', () => {
        clearTimeout(timer);
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString('utf8'), localPort });
      });
    });
    const b = opts.body;
    if (b === undefined) req.end();
    else if (typeof b === 'string' || Buffer.isBuffer(b)) req.end(b);
    else b.pipe(req);
  });
}

export async function getJson<T>(url: string, opts: RequestOptions = {}): Promise<{ res: HttpResult; json: T }> {
  const res = await request(url, opts);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.text}`);
  return { res, json: JSON.parse(res.text) as T };
}

/** Opens a raw TCP connection (resolves once connected). */
export function openSocket(port: number, host = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host });
    s.once('connect', () => { s.off('error', reject); resolve(s); });
    s.once('error', reject);
  });
}

/** Reads from `s` until `done(buffer)` is true or the peer closes (no `done`: until close); bounded by `timeoutMs`. */
export function readUntil(s: Socket, done?: (buf: Buffer) => boolean, timeoutMs = 5000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const all = (): Buffer => { if (chunks.length > 1) chunks.splice(0, chunks.length, Buffer.concat(chunks)); return chunks[0] ?? Buffer.alloc(0); };
    const finish = (err?: Error): void => {
      clearTimeout(timer);
      s.off('data', onData); s.off('end', onEnd); s.off('close', onEnd); s.off('error', onError);
      if (err) reject(err); else resolve(all());
    };
    const onData = (d: Buffer): void => { chunks.push(d); size += d.length; if (done?.(all())) finish(); };
    const onEnd = (): void => finish();
    const onError = (e: Error): void => finish(e);
    const timer = setTimeout(() => finish(new Error(`timed out after ${timeoutMs} ms; got ${size} bytes: ${all().subarray(0, 300).toString('latin1')}`)), timeoutMs);
    s.on('data', onData); s.once('end', onEnd); s.once('close', onEnd); s.once('error', onError);
  });
}

/** Writes `data` on a fresh connection and returns everything read until `done` or close. */
export async function rawExchange(port: number, data: string | Buffer, done?: (buf: Buffer) => boolean, timeoutMs = 5000): Promise<Buffer> {
  const s = await openSocket(port);
  try {
    const p = readUntil(s, done, timeoutMs);
    s.write(data);
    return await p;
  } finally {
    s.destroy();
  }
}

export interface RawResponse { readonly status: number; readonly headers: Record<string, string>; readonly body: Buffer; readonly raw: string }

/** Parses consecutive HTTP/1.x responses (content-length or chunked bodies) from `buf`. */
export function parseResponses(buf: Buffer): { responses: RawResponse[]; rest: Buffer } {
  const responses: RawResponse[] = [];
  for (;;) {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) break;
    const head = buf.subarray(0, end).toString('latin1');
    const [statusLine, ...lines] = head.split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
    if (!m) throw new Error(`not an HTTP response: ${statusLine}`);
    const headers: Record<string, string> = {};
    for (const l of lines) { const i = l.indexOf(':'); headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim(); }
    let off = end + 4, body: Buffer;
    if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
      const parts: Buffer[] = [];
      for (;;) {
        const le = buf.indexOf('\r\n', off);
        if (le < 0) return { responses, rest: buf };
        const size = parseInt(buf.subarray(off, le).toString('latin1'), 16);
        if (buf.length < le + 2 + size + 2) return { responses, rest: buf };
        parts.push(buf.subarray(le + 2, le + 2 + size));
        off = le + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(parts);
    } else {
      const len = Number(headers['content-length'] ?? 0);
      if (buf.length < off + len) break;
      body = buf.subarray(off, off + len);
      off += len;
    }
    responses.push({ status: Number(m[1]), headers, body, raw: head });
    buf = buf.subarray(off);
  }
  return { responses, rest: buf };
}

/** True once `buf` holds `n` complete responses. */
export const hasResponses = (n: number) => (buf: Buffer): boolean => {
  try { return parseResponses(buf).responses.length >= n; } catch { return true; }
};

export interface CmdResult { readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly stdout: string; readonly stderr: string }

/** Runs an external program, killing it (by PID) after `timeoutMs`. */
export function run(cmd: string, args: readonly string[], timeoutMs = 30_000, input?: string): Promise<CmdResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e) => { clearTimeout(timer); reject(e); });
    child.once('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
    child.stdin.on('error', () => { /* the program exited without reading its input */ });
    child.stdin.end(input ?? '');
  });
}

/** Whether an executable is on PATH. */
export async function have(cmd: string): Promise<boolean> {
  try { return (await run('sh', ['-c', `command -v ${cmd}`], 5000)).code === 0; } catch { return false; }
}

export async function sleep(ms: number): Promise<void> { await new Promise((r) => setTimeout(r, ms)); }

/** Samples `fn` every `everyMs` until stopped; returns the maximum seen. */
export function sampleMax(fn: () => number, everyMs = 50): { stop(): number; max(): number } {
  let max = fn();
  const t = setInterval(() => { try { max = Math.max(max, fn()); } catch { /* process gone */ } }, everyMs);
  return { stop: () => { clearInterval(t); return max; }, max: () => max };
}

/** Envoy's default access log line, parsed. */
export interface AccessLogLine {
  readonly start: string; readonly method: string; readonly path: string; readonly protocol: string;
  readonly status: number; readonly flags: string; readonly bytesReceived: number; readonly bytesSent: number;
  readonly duration: number; readonly upstreamServiceTime: string; readonly xff: string; readonly userAgent: string;
  readonly requestId: string; readonly authority: string; readonly upstreamHost: string;
}

const ACCESS_LOG = /^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)\] "(\S+) (\S+) (\S+)" (\d{3}) (\S+) (\d+) (\d+) (\d+) (\S+) "([^"]*)" "([^"]*)" "([^"]*)" "([^"]*)" "([^"]*)"$/;

export function parseAccessLog(line: string): AccessLogLine | undefined {
  const m = ACCESS_LOG.exec(line.trim());
  if (!m) return undefined;
  return {
    start: m[1], method: m[2], path: m[3], protocol: m[4], status: Number(m[5]), flags: m[6],
    bytesReceived: Number(m[7]), bytesSent: Number(m[8]), duration: Number(m[9]), upstreamServiceTime: m[10],
    xff: m[11], userAgent: m[12], requestId: m[13], authority: m[14], upstreamHost: m[15],
  };
}
