import type { Socket } from 'node:net';
import type { OutgoingHttpHeaders } from 'node:http';
import { STATUS_CODES } from '../../core/node-http.ts';
import { emptyHead, headEnd, parseHeadAt, serializeHeaders, type Head, type HeadError, type Headers, type UnderscoreAction } from './parse.ts';
import { readIntoShared, readIntoStream } from './shared-read.ts';
import { copyOf, H1Exchange } from './h1-exchange.ts';
import { leadingEmptyLines, partialHeadError } from './head-guard.ts';
import { absoluteForm } from './request-target.ts';
import { endAndLinger } from './linger.ts';
import type { ConnInfo } from '../../listener/conn-info.ts';
import { logger } from '../../core/log.ts';

const log = logger('http');

export { H1Exchange } from './h1-exchange.ts';

/**
 * A reply the codec makes itself (codec errors, 426, 408 for a slow head), as Envoy makes it:
 * status, response_code_details, response flag and local reply body.
 */
export interface CodecReply {
  readonly status: number;
  readonly details: string;
  readonly flag: string;
  readonly body: string;
  /** Counts as downstream_cx_protocol_error. */
  readonly protocolError: boolean;
}

/** What the connection needs from its HTTP connection manager. */
export interface H1Host {
  readonly maxHeaderBytes: number;
  readonly maxHeaders: number;
  readonly acceptHttp10: boolean;
  readonly idleTimeoutMs: number;
  /** stream_idle_timeout: no activity on the request in flight, or on a head being received (0 = off). */
  readonly streamIdleTimeoutMs: number;
  /** request_timeout: the whole request must arrive within this (0 = off). */
  readonly requestTimeoutMs: number;
  /** A request head must be complete within this from its first byte (0 = off). */
  readonly requestHeadersTimeoutMs: number;
  readonly underscores: UnderscoreAction;
  readonly serverName: string;
  isDraining(): boolean;
  onRequest(ex: H1Exchange): void;
  /** The codec answers `ex` itself: the HCM sends the local reply and logs it. */
  onCodecReply(ex: H1Exchange, reply: CodecReply): void;
  /** Upgrade / CONNECT: the socket leaves HTTP/1.1 framing; `rest` holds bytes already read past the head. */
  onUpgrade(head: Head, socket: Socket, rest: Buffer, conn: ConnInfo): void;
}

const codecError = (status: number, details: string): CodecReply => ({ status, details, flag: 'DPE', body: STATUS_CODES[status] ?? '', protocolError: true });
const HEAD_ERRORS: Record<HeadError, CodecReply> = {
  'bad-request': codecError(400, 'http1.codec_error'),
  'invalid-characters': codecError(400, 'http1.invalid_characters'),
  'chunked-with-length': codecError(400, 'http1.content_length_and_chunked_not_allowed'),
  'underscore': codecError(400, 'http1.unexpected_underscore'),
  'too-many-headers': codecError(431, 'http1.too_many_headers'),
  'bad-transfer-encoding': codecError(501, 'http1.invalid_transfer_encoding'),
};
const CODEC_ERROR = HEAD_ERRORS['bad-request'];
const HEADERS_TOO_LARGE = codecError(431, 'http1.headers_too_large');
const INVALID_URL = codecError(400, 'http1.invalid_url');
const MISSING_HOST: CodecReply = { status: 400, details: 'missing_host_header', flag: '-', body: '', protocolError: false };
const LOW_VERSION: CodecReply = { status: 426, details: 'low_version', flag: '-', body: '', protocolError: false };
const HEADER_TIMEOUT: CodecReply = { status: 408, details: 'request_header_timeout', flag: '-', body: 'request header timeout', protocolError: false };
const HEAD_IDLE: CodecReply = { status: 408, details: 'stream_idle_timeout', flag: 'SI', body: 'stream timeout', protocolError: false };
const INTERNAL: CodecReply = { status: 500, details: 'internal_error', flag: '-', body: '', protocolError: false };


const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
const EMPTY = Buffer.alloc(0);
/** One read buffer for every plain downstream HTTP/1.1 connection on this thread (see shared-read.ts). */
const READ_BUFFER = Buffer.alloc(65536);

/**
 * One downstream HTTP/1.1 connection: parses requests straight off the socket
 * (pipelined requests wait their turn), streams bodies with backpressure and
 * writes responses with one corked write for head and first chunk. After a
 * codec error or a closing response nothing more is read as HTTP.
 */
export class H1Connection {
  readonly socket: Socket;
  readonly conn: ConnInfo;
  readonly host: H1Host;
  private buf: Buffer = EMPTY;
  private current: H1Exchange | undefined;
  private closed = false;
  /** The client sent its FIN: no request follows the one in flight. */
  private peerEnded = false;
  /** Bytes of a partial head already checked by partialHeadError (0: no partial head). */
  private scanned = 0;
  private headTimer: NodeJS.Timeout | undefined;
  private idleFor = 0;
  /** True while the bytes being handled live in READ_BUFFER: whatever outlives the read is copied. */
  borrowed = false;

  constructor(socket: Socket, conn: ConnInfo, host: H1Host) {
    this.socket = socket;
    this.conn = conn;
    this.host = host;
    socket.setNoDelay(true);
    const early = readIntoShared(socket, READ_BUFFER, (n) => this.onRead(n));
    if (early === undefined) socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('drain', () => this.current?.drained());
    socket.on('close', () => this.onClose());
    socket.on('end', () => this.onEnd());
    socket.on('error', () => { /* 'close' follows */ });
    // One socket inactivity timer serves both the connection idle timeout and the stream idle timeout.
    const tick = minPositive(host.idleTimeoutMs, host.streamIdleTimeoutMs);
    if (tick > 0) {
      socket.setTimeout(tick);
      socket.on('timeout', () => this.onInactive(tick));
    }
    socket.resume();
    // Bytes a peek put back come first, before the 'end' that draining them may have scheduled.
    if (early?.length) this.onData(early);
  }

  private onRead(n: number): void {
    this.borrowed = true;
    this.onData(READ_BUFFER.subarray(0, n));
    this.borrowed = false;
    const rest = this.buf;
    if (rest.length && rest.buffer === READ_BUFFER.buffer) this.buf = copyOf(rest);
  }

  private onInactive(tick: number): void {
    if (this.closed) return;
    const cur = this.current;
    if (cur) {
      this.idleFor = 0;
      if (this.host.streamIdleTimeoutMs > 0) cur.timedOut(408, 'stream_idle_timeout');
    } else {
      this.idleFor += tick;
      // A head being received is a stream already (Envoy creates it on the first byte).
      if (this.buf.length && this.host.streamIdleTimeoutMs > 0 && this.idleFor >= this.host.streamIdleTimeoutMs) return this.fail(HEAD_IDLE);
      if (this.host.idleTimeoutMs > 0 && this.idleFor >= this.host.idleTimeoutMs) return this.closeSoon();
    }
    // The 'timeout' event fires once per quiet period: re-arm for the next one.
    if (!this.closed) this.socket.setTimeout(tick);
  }

  /** The client's FIN: mid-body it aborts the request (Envoy resets it: DC); otherwise the one in flight is still answered. */
  private onEnd(): void {
    this.peerEnded = true;
    const cur = this.current;
    if (cur && !cur.bodyDone && !this.closed) { this.socket.destroy(); return; }
    if (!cur) this.closeSoon();
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    const cur = this.current;
    if (cur && !cur.bodyDone) {
      const used = cur.feedBody(chunk, 0);
      if (used < 0) return this.fail(CODEC_ERROR);
      if (used === chunk.length) return;
      chunk = chunk.subarray(used);
    }
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    if (this.current) {
      // Pipelined requests wait; stop reading if they pile up.
      if (this.buf.length > this.host.maxHeaderBytes) this.socket.pause();
      return;
    }
    this.parseNext();
  }

  /** Parses and starts the next buffered request, if a complete head is there. */
  private parseNext(): void {
    let buf = this.buf;
    if (buf.length !== 0 && buf[0] === 13) {
      const skip = leadingEmptyLines(buf);
      if (skip !== 0) { buf = this.buf = buf.subarray(skip); this.scanned = 0; }
    }
    if (buf.length === 0) return;
    const max = this.host.maxHeaderBytes;
    // A head already seen incomplete: look for its end among the new bytes only, natively.
    if (this.scanned > 0 && buf.indexOf('\r\n\r\n', this.scanned > 3 ? this.scanned - 3 : 0, 'latin1') < 0) return this.partialHead(buf, max);
    // A head must end within maxHeaderBytes: one not found there is too large (or incomplete).
    const at = headEnd(buf, max);
    if (at < 0) return this.partialHead(buf, max);
    if (this.scanned > 0 || this.headTimer !== undefined) this.headComplete();
    const head = parseHeadAt(buf, at, true, this.host.maxHeaders, this.host.underscores);
    if (typeof head === 'string') return this.fail(HEAD_ERRORS[head]);
    const t = head.target;
    // Absolute-form (what `curl -x` sends) is routed by its path and authority, as Envoy does.
    if (t.charCodeAt(0) !== 47 && head.method !== 'CONNECT' && !(t === '*' && head.method === 'OPTIONS')) {
      const abs = absoluteForm(t);
      if (!abs) return this.fail(t.includes('://') ? INVALID_URL : CODEC_ERROR);
      head.target = abs.path;
      head.headers.host = abs.authority;
    }
    const rest = buf.subarray(at + 4);
    this.buf = EMPTY;
    if (head.versionMinor === 1 && head.headers.host === undefined) return this.reply(new H1Exchange(this, head), MISSING_HOST);
    if (head.method === 'CONNECT' || head.upgrade) return this.upgrade(head, rest);
    const ex = new H1Exchange(this, head);
    this.current = ex;
    this.idleFor = 0;
    if (head.versionMinor === 0 && !this.host.acceptHttp10) return this.reply(ex, LOW_VERSION);
    if (this.host.requestTimeoutMs > 0 && !ex.bodyDone) ex.startRequestTimer(this.host.requestTimeoutMs);
    if (head.expectContinue && ex.hasBody) this.socket.write(CONTINUE);
    if (rest.length) {
      if (ex.bodyDone) this.buf = rest;
      else {
        const used = ex.feedBody(rest, 0);
        // Bad framing in the bytes that came with the head: answered before anything is routed.
        if (used < 0) return this.reply(ex, CODEC_ERROR);
        if (used < rest.length) this.buf = rest.subarray(used);
      }
    }
    try {
      this.host.onRequest(ex);
    } catch (e) {
      this.internalError(ex, e);
    }
  }

  /** No CRLFCRLF yet: refuse what can never become a head, else wait (bounded in size and time). */
  private partialHead(buf: Buffer, max: number): void {
    if (buf.length >= max) return this.fail(HEADERS_TOO_LARGE);
    if (partialHeadError(buf, this.scanned)) return this.fail(CODEC_ERROR);
    if (this.headTimer === undefined && this.host.requestHeadersTimeoutMs > 0) this.headTimer = setTimeout(headTimedOut, this.host.requestHeadersTimeoutMs, this);
    this.scanned = buf.length;
  }

  private headComplete(): void {
    this.scanned = 0;
    if (this.headTimer) { clearTimeout(this.headTimer); this.headTimer = undefined; }
  }

  /** request_headers_timeout: the head did not complete in time. */
  headTimedOut(): void {
    this.headTimer = undefined;
    if (!this.closed && !this.current && this.scanned > 0) this.fail(HEADER_TIMEOUT);
  }

  private upgrade(head: Head, rest: Buffer): void {
    const socket = this.socket;
    socket.removeAllListeners('data');
    socket.removeAllListeners('drain');
    socket.removeAllListeners('end');
    socket.setTimeout(0);
    socket.pause();
    this.closed = true;
    readIntoStream(socket, READ_BUFFER);
    try {
      this.host.onUpgrade(head, socket, this.borrowed ? copyOf(rest) : rest, this.conn);
    } catch (e) {
      log.error(`http1: upgrade handling failed: ${(e as Error)?.stack ?? String(e)}`);
      socket.destroy();
    }
  }

  /** The codec answers `ex` itself, then closes the connection. */
  private reply(ex: H1Exchange, r: CodecReply): void {
    this.current = ex;
    ex.closeAfterResponse();
    this.host.onCodecReply(ex, r);
  }

  /** A codec error: Envoy's local reply (or a reset once the response started); nothing after it is read as HTTP. */
  private fail(r: CodecReply): void {
    this.buf = EMPTY;
    this.headComplete();
    const cur = this.current;
    if (cur) { cur.abort(r); return; }
    // No head could be parsed: Envoy logs `"- - HTTP/1.1"`.
    this.reply(new H1Exchange(this, { ...emptyHead(), close: true }), r);
  }

  /** A bug on the request path must cost this connection, not the process and every listener on it. */
  private internalError(ex: H1Exchange, e: unknown): void {
    log.error(`http1: request handling failed: ${(e as Error)?.stack ?? String(e)}`);
    if (ex.headersSent) { ex.reset(); return; }
    ex.abort(INTERNAL);
  }

  /** The response to `ex` is complete: keep going, or close. */
  finished(ex: H1Exchange, close: boolean): void {
    if (this.current !== ex) return;
    this.current = undefined;
    if (close || !ex.bodyDone || (this.peerEnded && this.buf.length === 0)) return this.closeSoon();
    if (this.socket.isPaused()) this.socket.resume();
    if (this.buf.length) this.parseNext();
  }

  /** Ends the connection; what the client still sends is read and dropped (see endAndLinger). */
  private closeSoon(): void {
    if (this.closed) return;
    this.closed = true;
    this.headComplete();
    endAndLinger(this.socket);
  }

  private onClose(): void {
    this.closed = true;
    this.headComplete();
    this.current?.downstreamClosed();
  }

  get isClosed(): boolean { return this.closed; }

  /** Draining: close now if no request is in flight (in-flight ones get `connection: close`). */
  closeIfIdle(): void {
    if (!this.current) this.closeSoon();
  }
}

function headTimedOut(c: H1Connection): void { c.headTimedOut(); }

export function rawResponse(status: number, headers: Headers | OutgoingHttpHeaders): string {
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${serializeHeaders(headers as Record<string, string>)}\r\n`;
}

function minPositive(a: number, b: number): number {
  if (a > 0 && b > 0) return Math.min(a, b);
  return a > 0 ? a : b;
}
