import { connect as h2connect, constants as h2c, type ClientHttp2Session } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import { connectUpstreamTls } from '../tls/upstream-connect.ts';
import { H2Call, h2RequestHeaders, type CallOwner, type StreamSlot } from './h2-call.ts';
import { UPSTREAM_OVERFLOW, socketLocalAddress, type H1PoolOptions, type UpstreamConnectionInfo, type UpstreamHandler, type UpstreamRequest } from './h1-pool.ts';

export interface H2PoolOptions extends H1PoolOptions {
  /** http2_protocol_options.max_concurrent_streams: streams per connection before another opens. */
  readonly maxConcurrentStreams: number;
}

const NO_CONTEXT: object = Object.freeze({});
/** Per-stream and per-connection receive windows: bounded memory per upstream stream and connection. */
const STREAM_WINDOW = 4 << 20;
const CONNECTION_WINDOW = 16 << 20;
/** Streams a connection is assumed to take while its SETTINGS have not arrived (RFC 9113 §6.5.2 suggests ≥ 100). */
const ASSUMED_STREAMS = 100;

function upstreamError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * HTTP/2 connection pool for one upstream host, on node's HTTP/2 client. Requests share a
 * connection up to the peer's (and the cluster's) concurrent-stream limit; past it another
 * connection opens within the cluster's max_connections, else they wait as pending
 * (max_pending_requests → UPSTREAM_OVERFLOW). A GOAWAY or max_requests_per_connection drains a
 * connection: no new streams, closed once its last stream ends.
 */
export class H2Pool implements CallOwner {
  readonly opts: H2PoolOptions;
  private readonly conns: H2Connection[] = [];
  private readonly queue: H2Call[] = [];
  closed = false;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(opts: H2PoolOptions) {
    this.opts = opts;
  }

  dispatch(req: UpstreamRequest, handler: UpstreamHandler): boolean {
    const call = new H2Call(req, handler, this);
    handler.onRequestStart?.(call, NO_CONTEXT);
    if (call.aborted) return false;
    const conn = this.ready();
    if (conn) { conn.start(call); return true; }
    const o = this.opts;
    if (!o.breakers.pending.canCreate()) {
      o.stats.rqPendingOverflow.value++;
      process.nextTick(failOverflow, call);
      return true;
    }
    call.pending = true;
    o.breakers.pending.inc();
    o.stats.rqPendingTotal.value++;
    o.stats.rqPendingActive.value++;
    this.queue.push(call);
    this.maybeOpen();
    return true;
  }

  /** A connected connection with a free stream slot. */
  private ready(): H2Connection | undefined {
    for (let i = 0; i < this.conns.length; i++) if (this.conns[i].hasCapacity()) return this.conns[i];
    return undefined;
  }

  /** Opens a connection when the queued calls outnumber the slots of connections still connecting. */
  private maybeOpen(): void {
    // Even a closed pool (its host just left the cluster) serves a call that raced in; the
    // connection it opens shuts down with its last stream.
    // Cancelled calls leave the queue lazily; counting them at worst opens a connection early.
    const waiting = this.queue.length;
    if (waiting === 0) return;
    let coming = 0;
    for (const c of this.conns) if (!c.connected && !c.dead) coming += Math.min(this.opts.maxConcurrentStreams, ASSUMED_STREAMS);
    if (coming >= waiting) return;
    const o = this.opts;
    if (this.conns.length >= o.maxConnections || !o.breakers.connections.canCreate()) {
      o.stats.cxOverflow.value++;
      // A pool with no connection at all still opens one, so its queue always drains (as Envoy does).
      if (this.conns.length > 0) return;
    }
    o.breakers.connections.inc();
    this.conns.push(new H2Connection(this));
  }

  /** A connection can take streams (connected, SETTINGS in, or a slot freed): start queued calls. */
  drainQueue(conn: H2Connection): void {
    while (this.queue.length && conn.hasCapacity()) {
      const call = this.queue.shift() as H2Call;
      if (call.aborted) continue;
      this.settlePending(call);
      conn.start(call);
    }
    this.maybeOpen();
  }

  /** Back to the head of the queue: its stream could not be opened on a connection that went away. */
  requeue(call: H2Call): void {
    call.pending = true;
    this.opts.breakers.pending.inc();
    this.opts.stats.rqPendingActive.value++;
    this.queue.unshift(call);
    const conn = this.ready();
    if (conn) this.drainQueue(conn); else this.maybeOpen();
  }

  settlePending(call: H2Call): void {
    if (!call.pending) return;
    call.pending = false;
    this.opts.breakers.pending.dec();
    this.opts.stats.rqPendingActive.value--;
  }

  cancelled(): void { this.opts.stats.rqCancelled.value++; }

  /** Connections with no stream since `idleTimeoutMs` close; one sweep timer per pool while any idles. */
  armSweep(): void {
    if (this.sweepTimer || this.opts.idleTimeoutMs <= 0 || this.closed) return;
    this.sweepTimer = setInterval(sweepIdle, Math.min(this.opts.idleTimeoutMs, 1000), this).unref();
  }

  sweep(): void {
    const cutoff = performance.now() - this.opts.idleTimeoutMs;
    let idle = 0;
    for (const c of [...this.conns]) {
      if (c.active > 0 || !c.connected) continue;
      if (c.idleSince <= cutoff) c.shutdown(); else idle++;
    }
    if (idle === 0 && this.sweepTimer) { clearInterval(this.sweepTimer); this.sweepTimer = undefined; }
  }

  /** A connection is gone. Calls still queued fail if it was the last one and never connected. */
  removed(conn: H2Connection, err: Error | undefined): void {
    const i = this.conns.indexOf(conn);
    if (i >= 0) this.conns.splice(i, 1);
    this.opts.breakers.connections.dec();
    if (!conn.connected) {
      // A failed connect is not retried at once: the queue waits for the other connections (free
      // slots, or their own connects), or fails with the last one (Envoy: pending requests fail
      // with their connection).
      if (this.conns.length > 0) return;
      const failed = this.queue.splice(0);
      for (const call of failed) {
        if (call.aborted) continue;
        this.settlePending(call);
        this.opts.stats.rqPendingFailureEject.value++;
        call.failBeforeStart(err ?? upstreamError('ECONNRESET', 'upstream connection failed'));
      }
      return;
    }
    this.maybeOpen();
  }

  close(): void {
    this.closed = true;
    if (this.sweepTimer) { clearInterval(this.sweepTimer); this.sweepTimer = undefined; }
    for (const c of [...this.conns]) if (c.active === 0) c.shutdown(); else c.draining = true;
  }
}

function sweepIdle(pool: H2Pool): void { pool.sweep(); }

function failOverflow(call: H2Call): void {
  call.failBeforeStart(upstreamError(UPSTREAM_OVERFLOW, 'upstream pending requests overflow (max_pending_requests)'));
}

/** One upstream HTTP/2 connection of a pool. */
class H2Connection implements StreamSlot, UpstreamConnectionInfo {
  readonly session: ClientHttp2Session;
  localAddress = '';
  private readonly pool: H2Pool;
  private readonly scheme: string;
  active = 0;
  private served = 0;
  connected = false;
  dead = false;
  /** No new streams (GOAWAY received, max_requests_per_connection reached, pool closed). */
  draining = false;
  idleSince = 0;
  private limit: number;
  private error: Error | undefined;
  private connectTimer: NodeJS.Timeout | undefined;

  constructor(pool: H2Pool) {
    this.pool = pool;
    const o = pool.opts;
    this.scheme = o.tls ? 'https' : 'http';
    this.limit = Math.min(o.maxConcurrentStreams, ASSUMED_STREAMS);
    const createConnection = (): Socket => (o.connect ? o.connect() : o.tls
      ? connectUpstreamTls(o.tls, o.address, o.port, ['h2'], o.sslStats, o.alpnOverride)
      : netConnect({ host: o.address, port: o.port, localAddress: o.localAddress, noDelay: true }));
    const session = h2connect(`${this.scheme}://${o.address.includes(':') ? `[${o.address}]` : o.address}:${o.port}`, {
      createConnection,
      maxSessionMemory: 64,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
    });
    this.session = session;
    if (o.connectTimeoutMs > 0) this.connectTimer = setTimeout(connectTimedOut, o.connectTimeoutMs, this);
    session.once('connect', () => this.onConnect());
    session.on('remoteSettings', (s) => {
      this.limit = Math.min(o.maxConcurrentStreams, s.maxConcurrentStreams ?? ASSUMED_STREAMS);
      if (this.connected) this.pool.drainQueue(this);
    });
    session.on('goaway', () => { this.draining = true; if (this.active === 0) this.shutdown(); });
    session.on('error', (err: Error) => { this.error ??= err; });
    session.once('close', () => this.onClose());
  }

  private onConnect(): void {
    if (this.connectTimer) { clearTimeout(this.connectTimer); this.connectTimer = undefined; }
    this.connected = true;
    this.localAddress = this.session.socket ? socketLocalAddress(this.session.socket) : '';
    this.idleSince = performance.now();
    this.session.setLocalWindowSize(CONNECTION_WINDOW);
    this.pool.opts.onConnect();
    this.pool.drainQueue(this);
    if (this.active === 0) this.pool.armSweep();
  }

  connectTimedOut(): void {
    this.connectTimer = undefined;
    if (this.connected || this.dead) return;
    this.error = upstreamError('UND_ERR_CONNECT_TIMEOUT', 'upstream connect timeout');
    this.session.destroy();
  }

  hasCapacity(): boolean {
    return this.connected && !this.draining && !this.dead && this.active < this.limit;
  }

  start(call: H2Call): void {
    let stream;
    try {
      stream = this.session.request(h2RequestHeaders(call.req, this.scheme), { endStream: call.req.body === null });
    } catch {
      // The session is going away under us (GOAWAY, stream ids exhausted): the request never left.
      this.draining = true;
      this.pool.requeue(call);
      return;
    }
    this.active++;
    this.served++;
    call.handler.onUpstreamConnection?.(this);
    const max = this.pool.opts.maxRequestsPerConnection;
    if (max > 0 && this.served >= max) this.draining = true;
    call.attach(stream, this);
  }

  streamEnded(): void {
    this.active--;
    if (this.active > 0) { if (!this.draining) this.pool.drainQueue(this); return; }
    this.idleSince = performance.now();
    if (this.draining || this.pool.closed) { this.shutdown(); return; }
    this.pool.drainQueue(this);
    if (this.active === 0) this.pool.armSweep();
  }

  /** Graceful close: GOAWAY, then the socket once in-flight streams are done. */
  shutdown(): void {
    this.draining = true;
    if (!this.session.closed && !this.session.destroyed) this.session.close();
  }

  private onClose(): void {
    if (this.dead) return;
    this.dead = true;
    if (this.connectTimer) { clearTimeout(this.connectTimer); this.connectTimer = undefined; }
    const o = this.pool.opts;
    if (this.connected) o.onDisconnect(); else o.onConnectFail();
    this.pool.removed(this, this.error);
  }
}

function connectTimedOut(c: H2Connection): void { c.connectTimedOut(); }
