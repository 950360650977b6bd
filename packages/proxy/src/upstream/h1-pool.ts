import { connect as netConnect, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import { ChunkedDecoder, headEnd, parseHeadAt, type Head, type Headers } from '../http/h1/parse.ts';
import { requestHead } from '../http/h1/wire.ts';
import { batchedWrite } from '../http/h1/write-batch.ts';
import type { UpstreamTls } from '../tls/context.ts';
import { connectUpstreamTls } from '../tls/upstream-connect.ts';
import type { SslStats } from '../tls/ssl-stats.ts';
import type { CircuitBreakers } from './circuit-breaker.ts';
import type { ClusterStats } from './cluster-stats.ts';
import { formatHostPort } from '../config/address.ts';
import { canonicalIp } from '../core/canonical-ip.ts';

export interface H1PoolOptions {
  readonly address: string;
  readonly port: number;
  readonly tls: UpstreamTls | undefined;
  /** ALPN offered instead of the TLS context's (Istio's ALPN filter); pools are keyed by it. */
  readonly alpnOverride?: readonly string[];
  readonly sslStats: SslStats | undefined;
  readonly connectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** per_host_thresholds max_connections (Infinity when unset). */
  readonly maxConnections: number;
  readonly maxRequestsPerConnection: number;
  /** The cluster's breakers: max_connections is cluster-wide, max_pending_requests too. */
  readonly breakers: CircuitBreakers;
  readonly stats: ClusterStats;
  readonly onConnect: () => void;
  readonly onDisconnect: () => void;
  readonly onConnectFail: () => void;
  /** Opens the connection instead of TCP/TLS to address:port (internal listener endpoints). */
  readonly connect?: () => Socket;
  /** upstream_bind_config: the local address to connect from. */
  readonly localAddress?: string;
}

export interface UpstreamRequest {
  readonly path: string;
  readonly method: string;
  readonly headers: Headers;
  readonly body: Readable | null;
}

/** What a dispatch handler may learn of the connection that carries its request. */
export interface UpstreamConnectionInfo {
  /** The connection's local `ip:port` (an internal connection's envoy:// name), for %UPSTREAM_LOCAL_ADDRESS%. */
  readonly localAddress: string;
}
/** An undici handler that may also want the connection (the router's attempt: access logs). */
export type UpstreamHandler = Dispatcher.DispatchHandler & { onUpstreamConnection?(c: UpstreamConnectionInfo): void };
type Handler = UpstreamHandler;

/** A connected socket's local address as Envoy prints it, read once per connection. */
export function socketLocalAddress(socket: { readonly localAddress?: string; readonly localPort?: number }): string {
  const a = socket.localAddress ?? '';
  return socket.localPort ? formatHostPort(canonicalIp(a), socket.localPort) : a;
}
const NO_CONTEXT: object = Object.freeze({});
const EMPTY = Buffer.alloc(0);
/**
 * One read buffer for every plain upstream connection (net's `onread`): no per-read
 * allocation and no Readable stream in between. Reads run one at a time on this thread.
 */
const READ_BUFFER = Buffer.alloc(65536);

function copyOf(b: Buffer): Buffer {
  const c = Buffer.allocUnsafe(b.length);
  c.set(b);
  return c;
}
/** A response head must end within this many bytes. */
const MAX_HEAD_BYTES = 65536;

/** Error codes mirror undici's and the OS's, so the router maps them the same way for both pools. */
function upstreamError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * The error code a dispatch fails with when the cluster's circuit breaker refused it
 * (max_pending_requests): the router answers 503 with flag UO and `x-envoy-overloaded`.
 */
export const UPSTREAM_OVERFLOW = 'UPSTREAM_OVERFLOW';

/** Whether an upstream error is a circuit-breaker overflow (not the host's fault: no retry, no outlier report). */
export function isOverflow(err: Error): boolean {
  return (err as { code?: string }).code === UPSTREAM_OVERFLOW;
}

/** One in-flight request: also the controller the handler pauses and aborts. */
class Call implements Dispatcher.DispatchController {
  readonly req: UpstreamRequest;
  readonly handler: Handler;
  readonly pool: H1Pool;
  conn: H1ClientConnection | undefined;
  /** Waiting for a connection (queued, or bound to one still connecting): counts against max_pending_requests. */
  pending = false;
  aborted = false;
  paused = false;
  reason: Error | null = null;
  /** A fresh connection may retry once when a reused one was closed under us before any reply byte. */
  retried = false;

  constructor(req: UpstreamRequest, handler: Handler, pool: H1Pool) {
    this.req = req;
    this.handler = handler;
    this.pool = pool;
  }
  pause(): void { this.paused = true; this.conn?.socket.pause(); }
  resume(): void { this.paused = false; this.conn?.resumeReading(); }
  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    if (this.pending) { this.pool.settlePending(this); this.pool.opts.stats.rqCancelled.value++; }
    this.conn?.socket.destroy();
  }
}

/**
 * HTTP/1.1 connection pool for one upstream host, written for the proxy's hot
 * path: idle connections are reused LIFO, responses are parsed straight off the
 * socket. A request with no idle connection is pending (Envoy's term) until a
 * connection is ready for it: it opens one if the cluster's max_connections
 * budget allows (a host with no connection always gets one, as in Envoy), else
 * waits in a FIFO queue; beyond max_pending_requests it fails with UPSTREAM_OVERFLOW.
 */
export class H1Pool {
  readonly opts: H1PoolOptions;
  private readonly idle: H1ClientConnection[] = [];
  private readonly queue: Call[] = [];
  private queueHead = 0;
  connections = 0;
  private closed = false;

  constructor(opts: H1PoolOptions) {
    this.opts = opts;
  }

  dispatch(req: UpstreamRequest, handler: Handler): boolean {
    const call = new Call(req, handler, this);
    handler.onRequestStart?.(call, NO_CONTEXT);
    if (call.aborted) return false;
    this.assign(call);
    return true;
  }

  private assign(call: Call): void {
    const conn = this.idle.pop();
    if (conn) return conn.start(call);
    const o = this.opts;
    if (!o.breakers.pending.canCreate()) {
      o.stats.rqPendingOverflow.value++;
      process.nextTick(failOverflow, call);
      return;
    }
    call.pending = true;
    o.breakers.pending.inc();
    o.stats.rqPendingTotal.value++;
    o.stats.rqPendingActive.value++;
    if (this.canOpen()) return this.open(call);
    this.queue.push(call);
  }

  /**
   * max_connections (cluster-wide) and the per-host limit. Over budget, upstream_cx_overflow
   * counts, but a pool with no connection at all still opens one, so its queue always drains.
   */
  private canOpen(): boolean {
    const o = this.opts;
    if (this.connections < o.maxConnections && o.breakers.connections.canCreate()) return true;
    o.stats.cxOverflow.value++;
    return this.connections === 0;
  }

  private open(call: Call): void {
    this.connections++;
    this.opts.breakers.connections.inc();
    new H1ClientConnection(this, call);
  }

  /** A pending call got its connection, failed, or was cancelled: it no longer counts as pending. */
  settlePending(call: Call): void {
    if (!call.pending) return;
    call.pending = false;
    this.opts.breakers.pending.dec();
    this.opts.stats.rqPendingActive.value--;
  }

  /** The first queued call not aborted, left in the queue. */
  private peekQueued(): Call | undefined {
    while (this.queueHead < this.queue.length) {
      const next = this.queue[this.queueHead];
      if (!next.aborted) return next;
      this.shiftQueued();
    }
    return undefined;
  }

  private shiftQueued(): void {
    this.queue[this.queueHead++] = undefined as unknown as Call;
    if (this.queueHead === this.queue.length) { this.queue.length = 0; this.queueHead = 0; }
    else if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) { this.queue.splice(0, this.queueHead); this.queueHead = 0; }
  }

  /** A connection is free: give it the next queued request or park it. */
  release(conn: H1ClientConnection): void {
    const next = this.peekQueued();
    if (next) {
      this.shiftQueued();
      this.settlePending(next);
      return conn.start(next);
    }
    if (this.closed) { conn.socket.end(); return; }
    conn.idleSince = performance.now();
    this.idle.push(conn);
    if (!this.sweepTimer && this.opts.idleTimeoutMs > 0) {
      this.sweepTimer = setInterval(sweepIdle, Math.min(this.opts.idleTimeoutMs, 1000), this).unref();
    }
  }

  /**
   * Idle timeout without a timer per request: one sweep per pool while it has idle
   * connections (re-arming a socket timeout on every request measured as a cost).
   */
  private sweepTimer: NodeJS.Timeout | undefined;

  sweep(): void {
    const cutoff = performance.now() - this.opts.idleTimeoutMs;
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const c = this.idle[i];
      if (c.idleSince <= cutoff) { this.idle.splice(i, 1); c.socket.destroy(); }
    }
    if (this.idle.length === 0 && this.sweepTimer) { clearInterval(this.sweepTimer); this.sweepTimer = undefined; }
  }

  removed(conn: H1ClientConnection): void {
    this.connections--;
    this.opts.breakers.connections.dec();
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    // A queued request can use the slot.
    const next = this.peekQueued();
    if (next && this.canOpen()) { this.shiftQueued(); this.open(next); }
  }

  /** Retry `call` on a brand-new connection (stale keep-alive race); it was admitted already, so no budget check. */
  retryFresh(call: Call): void {
    call.retried = true;
    this.connections++;
    this.opts.breakers.connections.inc();
    new H1ClientConnection(this, call);
  }

  get pending(): number { return this.queue.length - this.queueHead; }

  close(): void {
    this.closed = true;
    if (this.sweepTimer) { clearInterval(this.sweepTimer); this.sweepTimer = undefined; }
    for (const c of this.idle) c.socket.end();
    this.idle.length = 0;
  }
}

function sweepIdle(pool: H1Pool): void {
  pool.sweep();
}

/** One upstream HTTP/1.1 connection: writes a request, parses its response, repeats. */
class H1ClientConnection implements UpstreamConnectionInfo {
  readonly socket: Socket;
  localAddress = '';
  private readonly pool: H1Pool;
  private call: Call | undefined;
  private buf: Buffer = EMPTY;
  private head: Head | undefined;
  private remaining = 0;
  private chunked: ChunkedDecoder | undefined;
  private untilClose = false;
  private served = 0;
  /** When the connection went back to the idle list (performance.now()). */
  idleSince = 0;
  private gotBytes = false;
  private connected = false;
  private dead = false;
  /** True while the bytes being parsed live in READ_BUFFER. */
  private borrowed = false;

  constructor(pool: H1Pool, first: Call) {
    this.pool = pool;
    const o = pool.opts;
    const onread = { buffer: READ_BUFFER, callback: (n: number): boolean => this.onRead(n) };
    this.socket = o.connect ? o.connect() : o.tls
      ? connectUpstreamTls(o.tls, o.address, o.port, ['http/1.1'], o.sslStats, o.alpnOverride, undefined, onread)
      : netConnect({ host: o.address, port: o.port, localAddress: o.localAddress, noDelay: true, onread });
    const socket = this.socket;
    this.call = first;
    first.conn = this;
    if (o.connectTimeoutMs > 0) socket.setTimeout(o.connectTimeoutMs);
    socket.once(o.tls ? 'secureConnect' : 'connect', () => {
      this.connected = true;
      this.localAddress = socketLocalAddress(socket);
      socket.setTimeout(0);
      o.onConnect();
      const call = this.call;
      if (call) { pool.settlePending(call); this.send(call); }
    });
    socket.on('timeout', () => this.fail(upstreamError(this.connected ? 'UND_ERR_SOCKET' : 'UND_ERR_CONNECT_TIMEOUT', this.connected ? 'idle timeout' : 'connect timeout')));
    // TCP and TLS sockets read into the shared READ_BUFFER (onread); custom-connected ones emit 'data'.
    if (o.connect) socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err: Error) => this.fail(err));
    socket.on('close', () => this.fail(upstreamError('UND_ERR_SOCKET', 'upstream connection closed')));
    socket.on('drain', () => this.call?.req.body?.resume());
  }

  /** Reused from the idle list. */
  start(call: Call): void {
    this.call = call;
    call.conn = this;
    this.send(call);
  }

  private send(call: Call): void {
    const req = call.req;
    const h = req.headers;
    const body = req.body;
    let framing = '';
    const chunked = body !== null && h['content-length'] === undefined;
    if (chunked) framing = 'transfer-encoding: chunked\r\n';
    this.gotBytes = false;
    call.handler.onUpstreamConnection?.(this);
    batchedWrite(this.socket, requestHead(req.method, req.path, h, framing));
    if (body) pipeBody(body, this.socket, chunked, call.handler);
  }

  resumeReading(): void {
    if (this.buf.length && this.call) this.parse();
    this.socket.resume();
  }

  /**
   * `n` bytes arrived in READ_BUFFER. They are parsed in place; whatever outlives
   * this call (body bytes handed on, a partial message kept) is copied out first.
   */
  private onRead(n: number): boolean {
    this.borrowed = true;
    this.onData(READ_BUFFER.subarray(0, n));
    this.borrowed = false;
    const rest = this.buf;
    if (rest.length && rest.buffer === READ_BUFFER.buffer) this.buf = copyOf(rest);
    // Pausing goes through socket.pause(), which stops the handle itself.
    return true;
  }

  private onData(chunk: Buffer): void {
    this.gotBytes = true;
    if (!this.call) { this.socket.destroy(); return; }
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    this.parse();
  }

  /** Body bytes to the handler, which may keep them: never a view of READ_BUFFER. */
  private deliver(call: Call, d: Buffer): void {
    call.handler.onResponseData?.(call, this.borrowed && d.buffer === READ_BUFFER.buffer ? copyOf(d) : d);
  }

  private readonly deliverChunk = (d: Buffer): void => { if (this.call) this.deliver(this.call, d); };

  private parse(): void {
    while (this.call && this.buf.length) {
      const call = this.call;
      if (!this.head) {
        // Only the head becomes a string, not the body that came with it (issue 13).
        const at = headEnd(this.buf, MAX_HEAD_BYTES);
        if (at < 0) { if (this.buf.length >= MAX_HEAD_BYTES) this.fail(upstreamError('HPE_HEADER_OVERFLOW', 'upstream response head too large')); return; }
        const end = at + 4;
        const head = parseHeadAt(this.buf, at, false, 1000);
        if (typeof head === 'string') { this.fail(upstreamError('HPE_INVALID_HEADER', `invalid upstream response (${head})`)); return; }
        this.buf = this.buf.subarray(end);
        if (head.status < 200) continue; // 100 Continue and friends end here; the final response follows.
        this.head = head;
        const noBody = call.req.method === 'HEAD' || head.status === 204 || head.status === 304;
        this.chunked = !noBody && head.chunked ? new ChunkedDecoder() : undefined;
        this.untilClose = !noBody && !head.chunked && head.contentLength < 0;
        this.remaining = noBody ? 0 : Math.max(0, head.contentLength);
        const headers = head.headers;
        if (headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = undefined;
        call.handler.onResponseStart?.(call, head.status, headers as IncomingHttpHeaders, head.reason);
        if (call.aborted) return;
        if (!this.chunked && !this.untilClose && this.remaining === 0) { this.complete(undefined); continue; }
      }
      if (call.paused) { this.socket.pause(); return; }
      const buf = this.buf;
      if (this.chunked) {
        const used = this.chunked.push(buf, 0, this.deliverChunk);
        if (used < 0) { this.fail(upstreamError('HPE_INVALID_CHUNK_SIZE', 'invalid chunked encoding from upstream')); return; }
        this.buf = used === buf.length ? EMPTY : buf.subarray(used);
        if (this.chunked.done) this.complete(this.chunked.trailers);
      } else if (this.untilClose) {
        this.buf = EMPTY;
        this.deliver(call, buf);
      } else {
        const take = Math.min(this.remaining, buf.length);
        this.buf = take === buf.length ? EMPTY : buf.subarray(take);
        this.remaining -= take;
        this.deliver(call, take === buf.length ? buf : buf.subarray(0, take));
        if (this.remaining === 0) this.complete(undefined);
      }
    }
  }

  private complete(trailers: Headers | undefined): void {
    const call = this.call!;
    const close = this.head!.close || this.buf.length > 0;
    this.head = undefined;
    this.chunked = undefined;
    this.call = undefined;
    call.conn = undefined;
    this.served++;
    call.handler.onResponseEnd?.(call, (trailers ?? {}) as IncomingHttpHeaders);
    const max = this.pool.opts.maxRequestsPerConnection;
    if (close || this.dead || (max > 0 && this.served >= max) || (call.req.body && !call.req.body.readableEnded)) {
      this.retire();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    this.pool.release(this);
  }

  /**
   * Closed by us after a complete response (max_requests_per_connection, `connection: close`):
   * the pool and the cluster count it gone now, as the socket's 'close' then finds it dead.
   * Without this the connection budget leaked until queued requests waited forever.
   */
  private retire(): void {
    if (this.dead) return;
    this.dead = true;
    this.socket.destroy();
    this.pool.opts.onDisconnect();
    this.pool.removed(this);
  }

  private fail(err: Error): void {
    if (this.dead) return;
    this.dead = true;
    this.socket.destroy();
    if (!this.connected) this.pool.opts.onConnectFail(); else this.pool.opts.onDisconnect();
    this.pool.removed(this);
    const call = this.call;
    this.call = undefined;
    if (!call || call.aborted) return;
    if (call.pending) { this.pool.settlePending(call); this.pool.opts.stats.rqPendingFailureEject.value++; }
    if (this.untilClose && this.head && (err as { code?: string }).code === 'UND_ERR_SOCKET') {
      // A close-delimited body ends with the connection.
      this.head = undefined;
      call.handler.onResponseEnd?.(call, {});
      return;
    }
    // The peer closed a reused keep-alive connection before answering: safe to try once more on a new one.
    if (this.connected && this.served > 0 && !this.gotBytes && !call.retried && call.req.body === null) {
      this.pool.retryFresh(call);
      return;
    }
    call.handler.onResponseError?.(call, err);
  }
}

function failOverflow(call: Call): void {
  if (!call.aborted) call.handler.onResponseError?.(call, upstreamError(UPSTREAM_OVERFLOW, 'upstream pending requests overflow (max_pending_requests)'));
}

/** Streams a request body with backpressure (chunked framing when the length is unknown). */
function pipeBody(body: Readable, socket: Socket, chunked: boolean, handler: Handler): void {
  body.on('data', (chunk: Buffer) => {
    handler.onBodySent?.(chunk);
    let ok: boolean;
    if (chunked) {
      socket.cork();
      socket.write(chunk.length.toString(16) + '\r\n', 'latin1');
      socket.write(chunk);
      ok = socket.write('\r\n', 'latin1');
      socket.uncork();
    } else ok = socket.write(chunk);
    if (!ok) body.pause();
  });
  body.once('end', () => { if (chunked) socket.write('0\r\n\r\n', 'latin1'); });
  body.once('error', () => socket.destroy());
}
