import { constants as h2c, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { Counter, Gauge, StatsStore } from '../../../stats/store.ts';
import type { HcmStats } from '../../../http/hcm-stats.ts';
import { markLocalReset, wasLocalReset } from '../../../http/exchange.ts';

/** Envoy's downstream HTTP/2 codec stats (`http2.*`, shared by every HCM of the process). */
export class Http2CodecStats {
  readonly rxReset: Counter;
  readonly txReset: Counter;
  readonly headerOverflow: Counter;
  readonly goawaySent: Counter;
  readonly streamsActive: Gauge;

  constructor(store: StatsStore) {
    this.rxReset = store.counter('http2.rx_reset');
    this.txReset = store.counter('http2.tx_reset');
    this.headerOverflow = store.counter('http2.header_overflow');
    this.goawaySent = store.counter('http2.goaway_sent');
    this.streamsActive = store.gauge('http2.streams_active');
  }
}

/** What a session needs from its HCM config. */
export interface H2SessionLimits {
  /** max_request_headers_kb × 1024: names and values of the header block, pseudo-headers included. */
  readonly maxHeaderBytes: number;
  /** common_http_protocol_options.max_headers_count. */
  readonly maxHeadersCount: number;
}

/**
 * Envoy's premature-reset guard (CVE-2023-44487, "rapid reset"): a stream the client resets
 * within a second and before any response counts as premature. Once half of the streams
 * (of at least 500 closed, or 250 premature outright) were premature, the connection goes.
 */
const PREMATURE_LIFETIME_MS = 1000;
const PREMATURE_TOTAL_STREAMS = 500;

/** Envoy's delayed_close_timeout default: how long a closing connection waits for the peer's own close. */
const DELAYED_CLOSE_MS = 1000;

const kStart = Symbol('skua.h2.start');
const kOwner = Symbol('skua.h2.session');
type TrackedStream = ServerHttp2Stream & { [kStart]?: number; [kOwner]?: DownstreamH2Session };

/**
 * One downstream HTTP/2 connection's bookkeeping: header limits per stream, the rapid-reset
 * guard, and the end of the connection (a client that closes its socket without GOAWAY takes
 * the session with it) with Envoy's downstream_cx_destroy_* accounting.
 */
export class DownstreamH2Session {
  readonly session: Http2Session;
  private readonly stats: HcmStats;
  private readonly codec: Http2CodecStats;
  private readonly limits: H2SessionLimits;
  active = 0;
  private closedStreams = 0;
  private prematureResets = 0;
  /** Who ended the connection first: the peer (FIN, RST) or this proxy (guard, timeout, drain). */
  private endedBy: 'remote' | 'local' | undefined;
  private calmed = false;
  /** Streams open when the connection's end was decided (their 'close' events come before the session's). */
  private activeAtEnd = -1;

  constructor(session: Http2Session, socket: Socket, stats: HcmStats, codec: Http2CodecStats, limits: H2SessionLimits) {
    this.session = session;
    this.stats = stats;
    this.codec = codec;
    this.limits = limits;
    // The listener's sockets allow half-open (tcp_proxy needs it) and node's session does not
    // watch for the peer's FIN: without this a client that just closes leaves the session open.
    const peerClosed = (): void => { this.ended('remote'); if (!session.destroyed) session.destroy(); };
    // A client can close before the codec was chosen (the sniffing peek saw the FIN first).
    if (socket.readableEnded) process.nextTick(peerClosed);
    else socket.once('end', peerClosed);
    socket.once('error', () => this.ended('remote'));
    session.once('error', () => this.ended('local'));
    session.once('close', () => this.closed());
    delayCloseAfterFin(socket);
    calmFloods(session);
  }

  /**
   * A new stream. False when it was refused here (header block over max_request_headers_kb or
   * max_headers_count: RST_STREAM, as Envoy's codec resets it, never forwarded).
   */
  admit(stream: ServerHttp2Stream, rawHeaders: readonly string[]): boolean {
    const t = stream as TrackedStream;
    let bytes = 0;
    for (let i = 0; i < rawHeaders.length; i++) bytes += rawHeaders[i].length;
    if (bytes > this.limits.maxHeaderBytes || rawHeaders.length / 2 > this.limits.maxHeadersCount) {
      this.codec.headerOverflow.inc();
      this.codec.txReset.inc();
      markLocalReset(stream);
      stream.close(h2c.NGHTTP2_INTERNAL_ERROR);
      return false;
    }
    t[kStart] = performance.now();
    t[kOwner] = this;
    this.active++;
    this.codec.streamsActive.inc();
    stream.once('close', onStreamClose);
    return true;
  }

  private ended(by: 'remote' | 'local'): void {
    if (this.endedBy) return;
    this.endedBy = by;
    this.activeAtEnd = this.active;
  }

  streamClosed(stream: TrackedStream): void {
    this.active--;
    this.codec.streamsActive.dec();
    if (wasLocalReset(stream)) { this.codec.txReset.inc(); return; }
    // Streams torn down with their connection are not resets the client sent.
    if (this.session.destroyed || this.endedBy) return;
    if (stream.rstCode !== undefined && stream.rstCode !== h2c.NGHTTP2_NO_ERROR) {
      this.codec.rxReset.inc();
      this.stats.rqRxReset.inc();
    }
    this.closedStreams++;
    if (!stream.headersSent && performance.now() - (stream[kStart] ?? 0) <= PREMATURE_LIFETIME_MS) this.prematureResets++;
    this.checkPrematureResets();
  }

  private checkPrematureResets(): void {
    if (this.calmed) return;
    const premature2 = this.prematureResets * 2;
    if (this.closedStreams < PREMATURE_TOTAL_STREAMS ? premature2 < PREMATURE_TOTAL_STREAMS : premature2 < this.closedStreams) return;
    this.calmed = true;
    this.ended('local');
    this.stats.rqTooManyPrematureResets.inc();
    this.codec.goawaySent.inc();
    // GOAWAY(ENHANCE_YOUR_CALM), then the connection closes. An error must go with the code:
    // destroy(undefined, code) hits the parameter's default (NO_ERROR), which then wins.
    this.session.destroy(new Error('too many premature stream resets'), h2c.NGHTTP2_ENHANCE_YOUR_CALM);
  }

  /** Whether this connection was closed by the rapid-reset guard (its session error is ours, not a protocol error). */
  get calmedDown(): boolean { return this.calmed; }

  private closed(): void {
    const s = this.stats;
    const active = (this.activeAtEnd >= 0 ? this.activeAtEnd : this.active) > 0;
    s.cxDestroy.inc();
    if (this.endedBy === 'remote') {
      s.cxDestroyRemote.inc();
      if (active) { s.cxDestroyActiveRq.inc(); s.cxDestroyRemoteActiveRq.inc(); }
    } else {
      s.cxDestroyLocal.inc();
      if (active) { s.cxDestroyActiveRq.inc(); s.cxDestroyLocalActiveRq.inc(); }
    }
  }
}

/** nghttp2's flood guards: too many queued control-frame answers (PING/SETTINGS ACKs), endless CONTINUATION. */
const NGHTTP2_ERR_FLOODED = -904;
const NGHTTP2_ERR_TOO_MANY_CONTINUATIONS = -905;

/**
 * When nghttp2's flood guards end a session, node sends GOAWAY(INTERNAL_ERROR). Abuse gets
 * ENHANCE_YOUR_CALM (RFC 9113 §7), as from the rapid-reset guard: node's internal error path
 * calls the session's destroy(error) without a code, which this fills in.
 */
function calmFloods(session: Http2Session): void {
  const destroy = session.destroy;
  session.destroy = function calmDestroy(this: Http2Session, err?: Error, code?: number): void {
    const errno = (err as { errno?: number } | undefined)?.errno;
    if (code === undefined && (errno === NGHTTP2_ERR_FLOODED || errno === NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)) code = h2c.NGHTTP2_ENHANCE_YOUR_CALM;
    destroy.call(this, err, code);
  };
}

const kLingering = Symbol('skua.h2.lingering');

/**
 * node's session teardown writes the final GOAWAY, ends the socket and destroys it at once. A
 * close with unread input (a client still flooding) makes the kernel send RST, and the client can
 * lose the GOAWAY before reading it. So a destroy after our FIN waits for the client's own close,
 * reading and dropping what it still sends, at most DELAYED_CLOSE_MS (Envoy's delayed close).
 * Other destroys (socket errors, shutdown) stay immediate.
 */
function delayCloseAfterFin(socket: Socket): void {
  const destroyNow = socket.destroy;
  socket.destroy = function delayedDestroy(this: Socket & { [kLingering]?: boolean }, err?: Error): Socket {
    if (!this.writableEnded || this.readableEnded || this.destroyed) return destroyNow.call(this, err);
    if (this[kLingering]) return this;
    this[kLingering] = true;
    const t = setTimeout(() => destroyNow.call(this), DELAYED_CLOSE_MS);
    t.unref();
    this.once('close', () => clearTimeout(t));
    this.once('end', () => destroyNow.call(this));
    this.on('data', dropInput);
    this.resume();
    return this;
  } as Socket['destroy'];
}

function dropInput(): void { /* a closing connection's late input */ }

function onStreamClose(this: TrackedStream): void {
  this[kOwner]?.streamClosed(this);
}
