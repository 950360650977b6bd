/**
 * HBONE client: CONNECT streams over pooled HTTP/2 connections, keyed as ztunnel keys them —
 * {source identity, destination identity, destination} — and independent of Envoy's
 * Cluster/Host (how a connection is dialled is the caller's `dial`). A connection carries at most
 * `maxStreamsPerConnection` streams (and no more than the peer allows); the next stream opens a
 * new connection. A connection without streams for `idleReleaseMs` is closed.
 */
import { connect as h2connect, constants as h2, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import {
  HBONE_CONNECTION_WINDOW, HBONE_IDLE_RELEASE_MS, HBONE_MAX_STREAMS_PER_CONNECTION, HBONE_SESSION_MEMORY_MB, HBONE_STREAM_WINDOW, hboneSettings,
} from './settings.ts';

export interface HboneKey {
  /** Whose certificate this side presents ('' when the dialer decides, e.g. Envoy's cluster TLS). */
  readonly sourceIdentity: string;
  /** The identity the peer must present ('' when the dialer decides). */
  readonly destinationIdentity: string;
  /** Where the HBONE peer listens: ip:port (15008), a host:port, or an internal listener name. */
  readonly destination: string;
}

/** Opens the transport for one pooled connection: a socket (TLS or not) that will emit 'connect'/'secureConnect'. */
export type HboneDialer = (key: HboneKey) => Duplex | Promise<Duplex>;

export interface HbonePoolOptions {
  readonly maxStreamsPerConnection?: number;
  readonly idleReleaseMs?: number;
  readonly streamWindow?: number;
  readonly connectionWindow?: number;
  /** 0 = no limit. */
  readonly connectTimeoutMs?: number;
  /** Called as pooled connections open and close (Envoy's cluster upstream_cx_* stats). */
  readonly onConnection?: (event: 'open' | 'close', key: HboneKey) => void;
}

export interface HboneStream {
  readonly stream: ClientHttp2Stream;
  readonly responseHeaders: Readonly<Record<string, unknown>>;
}

export class HboneConnectError extends Error {
  /** 'status' (a non-2xx answer), 'connect' (transport or TLS, incl. the peer's identity), 'reset', 'timeout'. */
  readonly kind: 'status' | 'connect' | 'reset' | 'timeout';
  readonly status: number;
  constructor(kind: HboneConnectError['kind'], message: string, status = 0, cause?: unknown) {
    super(message, { cause });
    this.kind = kind;
    this.status = status;
  }
}

class PooledConnection {
  readonly key: HboneKey;
  readonly id: string;
  session: ClientHttp2Session | undefined;
  /** Resolves with the session once the transport is dialled (requests may be sent before the handshake ends). */
  readonly ready: Promise<ClientHttp2Session>;
  streams = 0;
  closed = false;
  /** The transport and HTTP/2 preface got through (a stream failing before that is a connect failure). */
  established = false;
  idleTimer: NodeJS.Timeout | undefined;
  constructor(key: HboneKey, id: string, ready: (c: PooledConnection) => Promise<ClientHttp2Session>) {
    this.key = key;
    this.id = id;
    this.ready = ready(this);
  }
}

export class HboneClientPool {
  private readonly dial: HboneDialer;
  private readonly o: Required<Omit<HbonePoolOptions, 'onConnection'>> & Pick<HbonePoolOptions, 'onConnection'>;
  private readonly byKey = new Map<string, PooledConnection[]>();
  private closed = false;

  /** `dial` opens transports for connect() calls that bring no dialer of their own. */
  constructor(dial: HboneDialer, o: HbonePoolOptions = {}) {
    this.dial = dial;
    this.o = {
      maxStreamsPerConnection: o.maxStreamsPerConnection ?? HBONE_MAX_STREAMS_PER_CONNECTION,
      idleReleaseMs: o.idleReleaseMs ?? HBONE_IDLE_RELEASE_MS,
      streamWindow: o.streamWindow ?? HBONE_STREAM_WINDOW,
      connectionWindow: o.connectionWindow ?? HBONE_CONNECTION_WINDOW,
      connectTimeoutMs: o.connectTimeoutMs ?? 10_000,
      onConnection: o.onConnection,
    };
  }

  /**
   * Opens `CONNECT authority` for `key`; resolves once the peer answered 2xx. `dial`, when given,
   * opens the transport if a new connection is needed (instead of the pool's dialer).
   */
  async connect(key: HboneKey, authority: string, headers?: Readonly<Record<string, string | string[] | undefined>>, dial?: () => Duplex | Promise<Duplex>): Promise<HboneStream> {
    if (this.closed) throw new HboneConnectError('connect', 'HBONE pool closed');
    const conn = this.pick(key, dial);
    conn.streams++;
    if (conn.idleTimer) { clearTimeout(conn.idleTimer); conn.idleTimer = undefined; }
    let session: ClientHttp2Session;
    try {
      session = await conn.ready;
    } catch (err) {
      this.streamDone(conn);
      throw err instanceof HboneConnectError ? err : new HboneConnectError('connect', `HBONE connection to ${key.destination} failed: ${(err as Error).message}`, 0, err);
    }
    const req: Record<string, string | string[]> = { ':method': 'CONNECT', ':authority': authority };
    if (headers) for (const k in headers) { const v = headers[k]; if (v !== undefined) req[k] = v; }
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(req, { endStream: false });
    } catch (err) {
      this.streamDone(conn);
      throw new HboneConnectError('connect', `HBONE connection to ${key.destination} is gone: ${(err as Error).message}`, 0, err);
    }
    stream.once('close', () => this.streamDone(conn));
    return this.answer(conn, key, authority, stream);
  }

  private answer(conn: PooledConnection, key: HboneKey, authority: string, stream: ClientHttp2Stream): Promise<HboneStream> {
    return new Promise<HboneStream>((resolve, reject) => {
      let settled = false;
      stream.once('response', (h) => {
        settled = true;
        const status = Number(h[':status']);
        if (status >= 200 && status < 300) { resolve({ stream, responseHeaders: h }); return; }
        stream.close(h2.NGHTTP2_CANCEL);
        reject(new HboneConnectError('status', `CONNECT ${authority} via ${key.destination} answered ${status}`, status));
      });
      const fail = (err: Error | undefined): void => {
        if (settled) return;
        settled = true;
        // A connection that never came up reports why (refused, TLS, the peer's identity), not the stream's cancel.
        if (!conn.established) {
          const cause = (err?.cause as Error | undefined) ?? err;
          reject(new HboneConnectError('connect', `HBONE connection to ${key.destination} failed: ${cause?.message ?? 'closed'}`, 0, cause));
          return;
        }
        const why = err ? err.message : `stream reset (code ${stream.rstCode})`;
        reject(new HboneConnectError('reset', `CONNECT ${authority} via ${key.destination}: ${why}`, 0, err));
      };
      stream.once('error', fail);
      stream.once('close', () => fail(undefined));
    });
  }

  /** Pooled connections now (all keys). */
  get connectionCount(): number {
    let n = 0;
    for (const list of this.byKey.values()) n += list.length;
    return n;
  }

  /** Pooled connections for one key, with their open streams. */
  connectionsFor(key: HboneKey): Array<{ id: string; streams: number }> {
    return (this.byKey.get(keyString(key)) ?? []).map((c) => ({ id: c.id, streams: c.streams }));
  }

  /** GOAWAY to every connection: streams in flight finish, new ones are refused. */
  close(): void {
    this.closed = true;
    for (const list of this.byKey.values()) for (const c of list) this.release(c, false);
  }

  /** Tears every connection down now. */
  destroy(): void {
    this.closed = true;
    for (const list of this.byKey.values()) for (const c of list) this.release(c, true);
  }

  private pick(key: HboneKey, dial: (() => Duplex | Promise<Duplex>) | undefined): PooledConnection {
    const k = keyString(key);
    let list = this.byKey.get(k);
    if (!list) { list = []; this.byKey.set(k, list); }
    for (const c of list) if (!c.closed && c.streams < this.limit(c)) return c;
    const conn = new PooledConnection(key, `${k}#${nextId++}`, (c) => this.open(c, dial));
    list.push(conn);
    return conn;
  }

  /** Our cap, or the peer's SETTINGS_MAX_CONCURRENT_STREAMS when lower. */
  private limit(c: PooledConnection): number {
    const peer = c.session?.remoteSettings?.maxConcurrentStreams;
    return peer !== undefined && peer < this.o.maxStreamsPerConnection ? peer : this.o.maxStreamsPerConnection;
  }

  private async open(c: PooledConnection, dial: (() => Duplex | Promise<Duplex>) | undefined): Promise<ClientHttp2Session> {
    const transport = await (dial ? dial() : this.dial(c.key));
    if (this.closed || c.closed) { transport.destroy(); throw new HboneConnectError('connect', 'HBONE pool closed'); }
    const o = this.o;
    // The URL only names the scheme: the transport is ours and every request carries its :authority.
    // h2 over TLS (HBONE), or cleartext h2c (Envoy tunneling over a plain cluster or an internal listener).
    const session = h2connect(transport instanceof TLSSocket ? 'https://hbone.invalid' : 'http://hbone.invalid', {
      createConnection: () => transport, settings: hboneSettings(o.streamWindow), maxSessionMemory: HBONE_SESSION_MEMORY_MB,
    });
    c.session = session;
    o.onConnection?.('open', c.key);
    session.once('connect', () => { c.established = true; session.setLocalWindowSize(o.connectionWindow); });
    session.on('error', () => { /* reported to each stream */ });
    session.once('close', () => {
      c.closed = true;
      this.remove(c);
      o.onConnection?.('close', c.key);
    });
    // The peer is going away: no new streams here; the session ends once its streams do.
    session.once('goaway', () => { c.closed = true; this.remove(c); session.close(); });
    if (o.connectTimeoutMs > 0) {
      const timer = setTimeout(() => session.destroy(new HboneConnectError('timeout', `HBONE connect to ${c.key.destination} timed out`)), o.connectTimeoutMs);
      timer.unref();
      session.once('connect', () => clearTimeout(timer));
      session.once('close', () => clearTimeout(timer));
    }
    return session;
  }

  private streamDone(c: PooledConnection): void {
    c.streams--;
    if (c.streams > 0 || c.closed) return;
    if (c.idleTimer) clearTimeout(c.idleTimer);
    c.idleTimer = setTimeout(() => { if (c.streams === 0) this.release(c, false); }, this.o.idleReleaseMs);
    c.idleTimer.unref();
  }

  private release(c: PooledConnection, now: boolean): void {
    c.closed = true;
    if (c.idleTimer) clearTimeout(c.idleTimer);
    this.remove(c);
    if (c.session) { if (now) c.session.destroy(); else c.session.close(); }
    else c.ready.then((s) => (now ? s.destroy() : s.close()), () => { /* never opened */ });
  }

  private remove(c: PooledConnection): void {
    const k = keyString(c.key);
    const list = this.byKey.get(k);
    if (!list) return;
    const i = list.indexOf(c);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.byKey.delete(k);
  }
}

let nextId = 1;

function keyString(k: HboneKey): string {
  return `${k.sourceIdentity}|${k.destinationIdentity}|${k.destination}`;
}
