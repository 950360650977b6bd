// Shared by the HTTP/1.1 hardening suites and compare-nginx.ts: raw-socket probes, a skua-proxy in
// front of the recording backend (with an access log that names response flags and details), and
// the liveness / memory checks every suite ends with.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startProxy, type Json, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, T, vhost } from '../lib/config.ts';

export interface ProbeResult {
  /** Status codes of the complete responses read, in order. */
  readonly statuses: number[];
  readonly raw: string;
  /** The proxy closed the connection (FIN or RST) before the probe gave up. */
  readonly closed: boolean;
  readonly reset: boolean;
  /** Milliseconds from the first write until the probe stopped. */
  readonly ms: number;
}

/** Statuses of the complete HTTP/1.x responses in `raw` (content-length or chunked bodies; 1xx/101 heads count). */
export function responseStatuses(raw: Buffer): number[] {
  const out: number[] = [];
  let off = 0;
  for (;;) {
    const end = raw.indexOf('\r\n\r\n', off);
    if (end < 0) break;
    const head = raw.toString('latin1', off, end);
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
    if (!m) break;
    const status = Number(m[1]);
    off = end + 4;
    if (status === 101) { out.push(status); break; }
    const len = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      const last = raw.indexOf('\r\n0\r\n\r\n', off - 2);
      if (last < 0) break;
      off = last + 7;
    } else if (len) {
      if (raw.length < off + Number(len[1])) break;
      off += Number(len[1]);
    }
    out.push(status);
  }
  return out;
}

export interface ProbeOptions {
  /** Stop once this many responses arrived (default: wait for the close). */
  readonly responses?: number;
  /** Stop once this holds for what was read. */
  readonly until?: (raw: string) => boolean;
  /** Give up after this long (the connection is then reported open). */
  readonly timeoutMs?: number;
  /** Send `data` in these pieces, `gapMs` apart. */
  readonly pieces?: ReadonlyArray<string | Buffer>;
  readonly gapMs?: number;
}

/** Writes `data` on a fresh connection to 127.0.0.1:`port` and reads until close, enough responses, or the timeout. */
export function probe(port: number, data: string | Buffer, opts: ProbeOptions = {}): Promise<ProbeResult> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ port, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    let reset = false, closed = false, t0 = 0, done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (): void => {
      if (done) return;
      done = true;
      for (const t of timers) clearTimeout(t);
      const raw = Buffer.concat(chunks);
      s.destroy();
      resolve({ statuses: responseStatuses(raw), raw: raw.toString('latin1'), closed, reset, ms: performance.now() - t0 });
    };
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      if (opts.responses !== undefined && responseStatuses(Buffer.concat(chunks)).length >= opts.responses) finish();
      else if (opts.until?.(Buffer.concat(chunks).toString('latin1'))) finish();
    });
    s.on('error', (e: NodeJS.ErrnoException) => { if (e.code === 'ECONNRESET' || e.code === 'EPIPE') { reset = true; closed = true; finish(); } else if (!t0) reject(e); else finish(); });
    s.on('end', () => { closed = true; finish(); });
    s.on('close', () => { closed = true; finish(); });
    s.on('connect', () => {
      t0 = performance.now();
      timers.push(setTimeout(finish, timeoutMs));
      const pieces = opts.pieces ?? [data];
      pieces.forEach((p, i) => timers.push(setTimeout(() => { if (!s.destroyed) s.write(p); }, i * (opts.gapMs ?? 0))));
    });
  });
}

/** The access log line format the suites read: status, flags, details, method, path, authority. */
export const LOG_FORMAT = 'ALOG %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %REQ(:METHOD)% %REQ(:PATH)% %REQ(:AUTHORITY)%\n';

export interface LogLine { readonly status: number; readonly flags: string; readonly details: string; readonly method: string; readonly path: string; readonly authority: string }

export function accessLog(proxy: RunningProxy): LogLine[] {
  return proxy.stdout().split('\n').filter((l) => l.startsWith('ALOG ')).map((l) => {
    const [, status, flags, details, method, path, authority] = l.split(' ');
    return { status: Number(status), flags, details, method, path, authority };
  });
}

/** Waits for an access log line after the first `skip` ones that `match` accepts. */
export async function logLine(proxy: RunningProxy, skip: number, match: (l: LogLine) => boolean, timeoutMs = 5000): Promise<LogLine> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = accessLog(proxy).slice(skip).find(match);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no matching access log line after ${skip}:\n${proxy.stdout().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface SkuaOptions {
  /** Extra HttpConnectionManager fields. */
  readonly hcm?: Json;
  /** Extra RouteAction fields of the catch-all route. */
  readonly route?: Json;
  /** Virtual hosts put before the default `*` one. */
  readonly vhosts?: Json[];
}

/**
 * skua-proxy with one HTTP listener ('http') in front of `backendPort`: WebSocket upgrades on, except
 * on /nows; an access log with LOG_FORMAT on stdout; routed requests carry `x-proxied: 1` (bytes
 * that reach the backend through a tunnel do not).
 */
export function startSkua(backendPort: number, opts: SkuaOptions = {}): Promise<RunningProxy> {
  const accessLogConfig = [{ name: 'envoy.access_loggers.stdout', typed_config: { '@type': T.stdoutLog, log_format: { text_format_source: { inline_string: LOG_FORMAT } } } }];
  return startProxy((p) => bootstrap([
    listener(p('http'), [chain(hcm([...(opts.vhosts ?? []), vhost([
      routeTo('backend', '/nows', { upgrade_configs: [{ upgrade_type: 'websocket', enabled: false }] }),
      routeTo('backend', '/', opts.route ?? {}, { request_headers_to_add: [{ header: { key: 'x-proxied', value: '1' } }] }),
    ])], { statPrefix: 'hardening', extra: { upgrade_configs: [{ upgrade_type: 'websocket' }], access_log: accessLogConfig, ...(opts.hcm ?? {}) } }))]),
  ], [cluster('backend', [backendPort])]), { ports: ['http'] });
}

/** The process is still up and serving admin, and its heap is bounded. */
export async function assertAlive(proxy: RunningProxy, maxHeapBytes = 256 << 20): Promise<{ heapUsed: number; rss: number }> {
  const exited = await Promise.race([proxy.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 50))]);
  assert.equal(exited, false, `skua-proxy exited; stderr:\n${proxy.stderr().slice(-3000)}`);
  const ready = await proxy.admin('/ready');
  assert.equal(ready.status, 200);
  const mem = JSON.parse((await proxy.admin('/memory')).body) as { allocated: string; rss: string };
  const heapUsed = Number(mem.allocated), rss = Number(mem.rss);
  assert.ok(heapUsed < maxHeapBytes, `heap ${heapUsed} bytes exceeds ${maxHeapBytes}`);
  assert.doesNotMatch(proxy.stderr(), /request handling failed|TypeError|RangeError/, 'no request path bug was caught');
  return { heapUsed, rss };
}
