import type { RdsUser } from '../../../http/rds.ts';
import { createServer as createH2Server, constants as h2c, type Http2Server, type Http2Session, type ServerHttp2Stream, type IncomingHttpHeaders as H2Headers } from 'node:http2';
import type { Socket } from 'node:net';
import type { HcmConfig } from './config.ts';
import { H2Exchange } from '../../../http/exchange.ts';
import { H1Connection, H1Exchange, type CodecReply, type H1Host } from '../../../http/h1/server.ts';
import { Underscores, type Head } from '../../../http/h1/parse.ts';
import { codecReply, routeRequest, type RouterSettings } from '../../../http/router.ts';
import { Flag, type ResponseFlag } from '../../../http/response-flags.ts';
import { HcmStats } from '../../../http/hcm-stats.ts';
import type { ConnInfo } from '../../../listener/conn-info.ts';
import { peek, sniffHttp } from '../../../listener/peek.ts';
import type { ClusterManager } from '../../../upstream/manager.ts';
import type { StatsStore } from '../../../stats/store.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import type { TrafficDirection } from '../../http/types.ts';
import { handleUpgrade, handleH1Connect, handleH2Connect } from '../../../http/upgrade.ts';
import { DownstreamH2Session, Http2CodecStats } from './h2-session.ts';
import { NEVER_DRAIN, type DrainManager } from '../../../core/drain.ts';

/**
 * How long a request head may take from its first byte when request_headers_timeout is not set.
 * Envoy has no such default: its stream_idle_timeout (300 s) bounds a stalled head, and istiod sets
 * that to 0 s, which leaves a slowloris client holding the connection for the idle_timeout (1 h).
 */
const DEFAULT_REQUEST_HEADERS_TIMEOUT_MS = 60_000;
const UNDERSCORE_ACTIONS = { ALLOW: Underscores.Allow, REJECT_REQUEST: Underscores.Reject, DROP_HEADER: Underscores.Drop } as const;

/**
 * One HttpConnectionManager config made live: an HTTP/1.1 server and an HTTP/2
 * server (node's codecs) that connections are handed to after codec selection.
 * Built once per filter chain; each connection costs only the codec's own state.
 */
export class HttpConnectionManager {
  readonly config: HcmConfig;
  /** Replaced (never mutated) when RDS delivers a new route table: requests keep the settings they started with. */
  settings: RouterSettings;
  private readonly rdsUser: RdsUser | undefined;
  private readonly h1: H1Host;
  private readonly h2: Http2Server;
  private readonly h1Connections = new Set<H1Connection>();
  private readonly sessions = new Map<Http2Session, { conn: ConnInfo; h2: DownstreamH2Session }>();
  /** The connection being handed to the HTTP/2 server ('session' fires synchronously inside emit). */
  private pendingConn: ConnInfo | undefined;
  private pendingSocket: Socket | undefined;
  private readonly codecStats: Http2CodecStats;
  private readonly sockets = new Set<Socket>();
  private draining = false;
  /** The listener's: decides per response whether the connection should go away (drain, health check failed, overload). */
  private readonly drainManager: DrainManager;
  /** HTTP/2 sessions already sent GOAWAY by a drain tick. */
  private readonly goneAway = new WeakSet<Http2Session>();

  constructor(config: HcmConfig, clusters: ClusterManager, store: StatsStore, direction: TrafficDirection = 'UNSPECIFIED', drainManager: DrainManager = NEVER_DRAIN) {
    this.config = config;
    this.drainManager = drainManager;
    const stats = new HcmStats(store, config.statPrefix);
    const logs = config.accessLogs;
    this.settings = {
      routes: config.routes,
      pathNormalization: config.pathNormalization,
      xfcc: config.xfcc,
      clusters,
      serverName: config.serverHeader === 'OVERWRITE' ? config.serverName : '',
      useRemoteAddress: config.useRemoteAddress,
      skipXffAppend: config.skipXffAppend,
      generateRequestId: config.generateRequestId,
      preserveExternalRequestId: config.preserveExternalRequestId,
      suppressEnvoyHeaders: config.router.suppressEnvoyHeaders,
      schemeOverwrite: config.schemeOverwrite,
      stats,
      localReply: config.localReply,
      store,
      filters: config.httpFilters.map((f) => ({ name: f.name, filter: f.live({ store, statPrefix: config.statPrefix, direction, clusters, useRemoteAddress: config.useRemoteAddress }) })),
      onComplete: logs.length ? (r: RequestRecord) => {
        if (r.flags === Flag.DownstreamConnectionTermination) noteCodecAbort(r);
        for (const l of logs) l.log(r);
      } : undefined,
    };
    if (config.rds) {
      const user: RdsUser = { compilers: config.perFilterCompilers, onTable: (routes) => { this.settings = { ...this.settings, routes }; } };
      this.rdsUser = user;
      this.settings = { ...this.settings, routes: config.rds.attach(user) };
    }
    this.codecStats = new Http2CodecStats(store);
    this.h1 = this.createH1();
    this.h2 = this.createH2();
  }

  private createH1(): H1Host {
    const c = this.config;
    const stats = this.settings.stats;
    return {
      maxHeaderBytes: c.maxRequestHeadersKb * 1024,
      maxHeaders: c.maxHeadersCount,
      acceptHttp10: c.acceptHttp10,
      idleTimeoutMs: c.idleTimeoutMs,
      streamIdleTimeoutMs: c.streamIdleTimeoutMs,
      requestTimeoutMs: c.requestTimeoutMs,
      requestHeadersTimeoutMs: c.requestHeadersTimeoutMs || DEFAULT_REQUEST_HEADERS_TIMEOUT_MS,
      underscores: UNDERSCORE_ACTIONS[c.underscores],
      serverName: this.settings.serverName,
      isDraining: () => this.draining || this.drainManager.drainClose(),
      onRequest: (ex: H1Exchange) => { stats.rqHttp1Total.value++; routeRequest(ex, this.settings); },
      onCodecReply: (ex: H1Exchange, r: CodecReply) => {
        stats.rqHttp1Total.value++;
        if (r.protocolError) stats.cxProtocolError.inc();
        if (r.status === 431) stats.rqTooLarge.inc();
        codecReply(ex, this.settings, r.status, r.body, r.flag as ResponseFlag, r.details);
      },
      onUpgrade: (head: Head, socket: Socket, rest: Buffer, conn: ConnInfo) => {
        stats.rqHttp1Total.value++;
        if (head.method === 'CONNECT') handleH1Connect(this, head, socket, rest, conn);
        else handleUpgrade(this, head, socket, rest, conn);
      },
    };
  }

  private createH2(): Http2Server {
    const c = this.config;
    const limits = { maxHeaderBytes: c.maxRequestHeadersKb * 1024, maxHeadersCount: c.maxHeadersCount };
    const server = createH2Server({
      maxSessionMemory: 64,
      // The HCM's own check (DownstreamH2Session.admit) decides on counts; node's cap sits above it.
      maxHeaderListPairs: c.maxHeadersCount + 8,
      maxSendHeaderBlockLength: 1 << 20,
      settings: {
        maxConcurrentStreams: Math.min(c.h2MaxConcurrentStreams, 2 ** 31 - 1),
        initialWindowSize: Math.min(c.h2InitialStreamWindow, 2 ** 31 - 1),
        maxHeaderListSize: c.maxRequestHeadersKb * 1024,
      },
    });
    server.on('session', (session: Http2Session) => {
      const conn = this.pendingConn, socket = this.pendingSocket;
      this.pendingConn = undefined;
      this.pendingSocket = undefined;
      if (!conn || !socket) { session.destroy(); return; }
      this.sessions.set(session, { conn, h2: new DownstreamH2Session(session, socket, this.settings.stats, this.codecStats, limits) });
      session.once('close', () => this.sessions.delete(session));
      // Over TLS the session's native handle appears only once it is set up ('connect').
      const setWindow = (): void => session.setLocalWindowSize(Math.min(c.h2InitialConnectionWindow, 2 ** 31 - 1));
      if (session.connecting) session.once('connect', setWindow); else setWindow();
      if (this.draining) session.goaway(h2c.NGHTTP2_NO_ERROR);
    });
    server.on('stream', (stream: ServerHttp2Stream, headers: H2Headers, flags: number, rawHeaders: string[]) => this.onH2Stream(stream, headers, flags, rawHeaders));
    server.on('sessionError', (_err: Error, session: Http2Session) => {
      if (!this.sessions.get(session)?.h2.calmedDown) this.settings.stats.cxProtocolError.inc();
    });
    server.setTimeout(c.idleTimeoutMs);
    return server;
  }

  /** A connection whose filter chain ends in this HCM. `alpn` is the TLS-negotiated protocol, if any. */
  onConnection(socket: Socket, conn: ConnInfo): void {
    const stats = this.settings.stats;
    stats.cxTotal.inc();
    stats.cxActive.inc();
    this.sockets.add(socket);
    socket.once('close', () => { stats.cxActive.dec(); this.sockets.delete(socket); });
    const codec = this.config.codec;
    if (conn.alpn === 'h2') return this.toH2(socket, conn);
    if (codec === 'HTTP1' || conn.alpn === 'http/1.1') return this.toH1(socket, conn);
    peek(socket, (b) => sniffHttp(b) !== '', 15_000, (bytes) => {
      if (socket.destroyed) return;
      // codec HTTP2 without the preface still goes to the HTTP/2 codec, which refuses it as Envoy's does.
      if (codec === 'HTTP2' || sniffHttp(bytes) === 'h2c') this.toH2(socket, conn); else this.toH1(socket, conn);
    });
  }

  private toH1(socket: Socket, conn: ConnInfo): void {
    this.settings.stats.cxHttp1Total.inc();
    const c = new H1Connection(socket, conn, this.h1);
    this.h1Connections.add(c);
    socket.once('close', () => this.h1Connections.delete(c));
  }

  /**
   * Plain sockets arrive here after a peek (read, paused, bytes put back): node's session drains
   * the buffered bytes and then reads the handle itself. Never resume() it: the JS side would
   * then race the session for the bytes.
   */
  private toH2(socket: Socket, conn: ConnInfo): void {
    this.settings.stats.cxHttp2Total.inc();
    this.pendingConn = conn;
    this.pendingSocket = socket;
    // A server-side TLSSocket we wrapped ourselves never emits 'secureConnect', which node's HTTP/2
    // session waits for while `secureConnecting` is set; the handshake is already done here.
    if (conn.tls) (socket as Socket & { secureConnecting?: boolean }).secureConnecting = false;
    this.h2.emit('connection', socket);
  }

  private onH2Stream(stream: ServerHttp2Stream, headers: H2Headers, flags: number, rawHeaders: string[]): void {
    stream.on('error', ignore);
    const owner = stream.session ? this.sessions.get(stream.session) : undefined;
    if (!owner) { stream.close(h2c.NGHTTP2_INTERNAL_ERROR); return; }
    if (!owner.h2.admit(stream, rawHeaders)) return;
    this.settings.stats.rqHttp2Total.value++;
    if (headers[':method'] === 'CONNECT') { handleH2Connect(this, stream, headers, owner.conn); return; }
    const endStream = (flags & h2c.NGHTTP2_FLAG_END_STREAM) !== 0;
    routeRequest(new H2Exchange(stream, headers, endStream, owner.conn, this.config.streamIdleTimeoutMs), this.settings);
  }

  /** Stop taking new requests on existing connections: GOAWAY on HTTP/2, `connection: close` on HTTP/1. */
  drain(): void {
    this.draining = true;
    this.detach();
    // GOAWAY, then a graceful close: streams in flight finish, and the session ends with the last of them.
    for (const s of this.sessions.keys()) { s.goaway(h2c.NGHTTP2_NO_ERROR); s.close(); }
    for (const c of this.h1Connections) c.closeIfIdle();
  }

  /** A drain tick: idle HTTP/1 connections close and HTTP/2 sessions get GOAWAY, each when drainClose() says so. */
  drainTick(): void {
    const dm = this.drainManager;
    for (const s of this.sessions.keys()) if (!this.goneAway.has(s) && dm.drainClose()) { this.goneAway.add(s); s.goaway(h2c.NGHTTP2_NO_ERROR); }
    for (const c of this.h1Connections) if (dm.drainClose()) c.closeIfIdle();
  }

  /** Stop following RDS updates (this manager is going away). */
  private detach(): void {
    if (this.rdsUser) this.config.rds?.detach(this.rdsUser);
  }

  /** Close everything now. */
  close(): void {
    this.detach();
    for (const s of this.sessions.keys()) s.destroy();
    for (const s of this.sockets) s.destroy();
  }
}

/**
 * A request the HTTP/1.1 codec aborted mid-body looks to the router like a client that went away
 * (DC); Envoy logs it as the codec error it is (400, DPE, http1.codec_error).
 */
function noteCodecAbort(r: RequestRecord): void {
  const e = r.ex instanceof H1Exchange ? r.ex.codecError : undefined;
  if (!e) return;
  r.status = e.status;
  r.flags = e.flag;
  r.details = e.details;
}

function ignore(): void { /* stream errors are accounted for by the router */ }
