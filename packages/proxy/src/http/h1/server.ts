import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { STATUS_CODES, type OutgoingHttpHeaders } from 'node:http';
import { ChunkedDecoder, headWindow, parseHeadText, serializeHeaders, type Head, type Headers } from './parse.ts';
import type { Exchange } from '../exchange.ts';
import { framed, responseMessage, type WireHeaders } from './wire.ts';
import { readIntoShared, readIntoStream } from './shared-read.ts';
import { batchedWrite } from './write-batch.ts';
import type { ConnInfo } from '../../listener/conn-info.ts';

/** What the connection needs from its HTTP connection manager. */
export interface H1Host {
  readonly maxHeaderBytes: number;
  readonly maxHeaders: number;
  readonly acceptHttp10: boolean;
  readonly idleTimeoutMs: number;
  /** stream_idle_timeout: no activity on the request in flight (0 = off). */
  readonly streamIdleTimeoutMs: number;
  /** request_timeout: the whole request must arrive within this (0 = off). */
  readonly requestTimeoutMs: number;
  readonly serverName: string;
  isDraining(): boolean;
  onRequest(ex: H1Exchange): void;
  /** Upgrade / CONNECT: the socket leaves HTTP/1.1 framing; `rest` holds bytes already read past the head. */
  onUpgrade(head: Head, socket: Socket, rest: Buffer, conn: ConnInfo): void;
  onProtocolError(kind: string): void;
}

const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';
const TOO_LARGE = 'HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';
const NOT_IMPLEMENTED = 'HTTP/1.1 501 Not Implemented\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
const EMPTY = Buffer.alloc(0);
/** One read buffer for every plain downstream HTTP/1.1 connection on this thread (see shared-read.ts). */
const READ_BUFFER = Buffer.alloc(65536);

function copyOf(b: Buffer): Buffer {
  const c = Buffer.allocUnsafe(b.length);
  c.set(b);
  return c;
}

/**
 * One downstream HTTP/1.1 connection: parses requests straight off the socket
 * (pipelined requests wait their turn), streams bodies with backpressure and
 * writes responses with one corked write for head and first chunk.
 */
export class H1Connection {
  readonly socket: Socket;
  readonly conn: ConnInfo;
  readonly host: H1Host;
  private buf: Buffer = EMPTY;
  private current: H1Exchange | undefined;
  private closed = false;

  constructor(socket: Socket, conn: ConnInfo, host: H1Host) {
    this.socket = socket;
    this.conn = conn;
    this.host = host;
    socket.setNoDelay(true);
    const early = readIntoShared(socket, READ_BUFFER, (n) => this.onRead(n));
    if (early === undefined) socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('drain', () => this.current?.drained());
    socket.on('close', () => this.onClose());
    socket.on('end', () => { if (!this.current) socket.end(); });
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

  private idleFor = 0;
  /** True while the bytes being handled live in READ_BUFFER: whatever outlives the read is copied. */
  borrowed = false;

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
      if (this.host.idleTimeoutMs > 0 && this.idleFor >= this.host.idleTimeoutMs) { this.closed = true; this.socket.end(); return; }
    }
    // The 'timeout' event fires once per quiet period: re-arm for the next one.
    if (!this.closed) this.socket.setTimeout(tick);
  }

  private onData(chunk: Buffer): void {
    const cur = this.current;
    if (cur && !cur.bodyDone) {
      const used = cur.feedBody(chunk, 0);
      if (used < 0) return this.fail(BAD_REQUEST, 'body');
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
    const buf = this.buf;
    if (buf.length === 0) return;
    // A head must end within maxHeaderBytes: one not found there is too large (or incomplete).
    const max = this.host.maxHeaderBytes;
    const text = headWindow(buf, max);
    const at = text.indexOf('\r\n\r\n');
    if (at < 0) {
      if (buf.length >= max) this.fail(TOO_LARGE, 'headers_too_large');
      return;
    }
    const end = at + 4;
    const head = parseHeadText(text, at, true, this.host.maxHeaders);
    if (typeof head === 'string') {
      return this.fail(head === 'too-many-headers' ? TOO_LARGE : head === 'bad-transfer-encoding' ? NOT_IMPLEMENTED : BAD_REQUEST, head);
    }
    if (head.versionMinor === 1 && head.headers.host === undefined) return this.fail(BAD_REQUEST, 'missing_host');
    const rest = buf.subarray(end);
    this.buf = EMPTY;
    if (head.method === 'CONNECT' || head.upgrade) {
      this.socket.removeAllListeners('data');
      this.socket.removeAllListeners('drain');
      this.socket.removeAllListeners('end');
      this.socket.setTimeout(0);
      this.socket.pause();
      this.closed = true;
      readIntoStream(this.socket, READ_BUFFER);
      this.host.onUpgrade(head, this.socket, this.borrowed ? copyOf(rest) : rest, this.conn);
      return;
    }
    const ex = new H1Exchange(this, head);
    this.current = ex;
    this.idleFor = 0;
    if (this.host.requestTimeoutMs > 0 && !ex.bodyDone) ex.startRequestTimer(this.host.requestTimeoutMs);
    if (head.versionMinor === 0 && !this.host.acceptHttp10) {
      ex.localReply(426);
      return;
    }
    if (head.expectContinue && ex.hasBody) this.socket.write(CONTINUE);
    if (rest.length) {
      if (ex.bodyDone) this.buf = rest;
      else {
        const used = ex.feedBody(rest, 0);
        if (used < 0) return this.fail(BAD_REQUEST, 'body');
        if (used < rest.length) this.buf = rest.subarray(used);
      }
    }
    this.host.onRequest(ex);
  }

  /** The response to `ex` is complete: keep going, or close. */
  finished(ex: H1Exchange, close: boolean): void {
    if (this.current !== ex) return;
    this.current = undefined;
    if (close || !ex.bodyDone) { this.closed = true; this.socket.end(); return; }
    if (this.socket.isPaused()) this.socket.resume();
    if (this.buf.length) this.parseNext();
  }

  private fail(response: string, kind: string): void {
    this.host.onProtocolError(kind);
    this.closed = true;
    this.buf = EMPTY;
    if (this.current && this.current.headersSent) { this.socket.destroy(); return; }
    this.socket.end(response);
  }

  private onClose(): void {
    this.closed = true;
    this.current?.downstreamClosed();
  }

  get isClosed(): boolean { return this.closed; }

  /** Draining: close now if no request is in flight (in-flight ones get `connection: close`). */
  closeIfIdle(): void {
    if (!this.current && !this.closed) { this.closed = true; this.socket.end(); }
  }
}

/** One HTTP/1.1 request/response on an H1Connection. */
export class H1Exchange implements Exchange {
  readonly protocol: 'HTTP/1.0' | 'HTTP/1.1';
  readonly method: string;
  path: string;
  readonly authority: string;
  readonly scheme: string;
  readonly headers: Headers;
  readonly hasBody: boolean;
  readonly conn: ConnInfo;
  headersSent = false;
  bodyDone: boolean;
  private readonly c: H1Connection;
  private readonly requestClose: boolean;
  private bodyRemaining: number;
  private readonly chunked: ChunkedDecoder | undefined;
  private bodyStream: Readable | undefined;
  /** Set by a filter that buffered the body: the connection keeps feeding bodyStream, readers get this. */
  private bodyOverride: Readable | undefined;
  private bodyQueue: Buffer[] | undefined;
  private chunkedOut = false;
  private noBody = false;
  private closeAfter = false;
  private done = false;
  private onDrain: (() => void) | undefined;
  private onClose: (() => void) | undefined;
  /** The response head, held back so it leaves with the first body bytes in one write. */
  private pendingHeaders: WireHeaders | undefined;
  private pendingStatus = 0;
  private pendingExtra = '';

  constructor(c: H1Connection, head: Head) {
    this.c = c;
    this.conn = c.conn;
    this.protocol = head.versionMinor === 0 ? 'HTTP/1.0' : 'HTTP/1.1';
    this.method = head.method;
    this.path = head.target;
    this.headers = head.headers;
    this.authority = (head.headers.host as string | undefined) ?? '';
    this.scheme = c.conn.tls ? 'https' : 'http';
    this.requestClose = head.close;
    this.chunked = head.chunked ? new ChunkedDecoder() : undefined;
    this.bodyRemaining = head.chunked ? -1 : Math.max(0, head.contentLength);
    this.hasBody = head.chunked || head.contentLength > 0;
    this.bodyDone = !this.hasBody;
  }

  /** The request body as a stream; created on first use, fed by the connection (or a filter's replacement). */
  get body(): Readable {
    if (this.bodyOverride) return this.bodyOverride;
    if (!this.bodyStream) {
      const socket = this.c.socket;
      this.bodyStream = new Readable({ read: () => { if (!this.c.isClosed && socket.isPaused()) socket.resume(); } });
      if (this.bodyQueue) for (const b of this.bodyQueue) this.pushBody(b);
      this.bodyQueue = undefined;
      if (this.bodyDone) this.bodyStream.push(null);
    }
    return this.bodyStream;
  }

  set body(replacement: Readable) { this.bodyOverride = replacement; }

  private pushBody(chunk: Buffer): void {
    if (this.c.borrowed) chunk = copyOf(chunk);
    if (!this.bodyStream) { (this.bodyQueue ??= []).push(chunk); return; }
    if (!this.bodyStream.push(chunk)) this.c.socket.pause();
  }

  /** Bytes of request body from the socket; returns how many belonged to this request, -1 on bad framing. */
  feedBody(chunk: Buffer, start: number): number {
    if (this.chunked) {
      const used = this.chunked.push(chunk, start, (d) => this.pushBody(d));
      if (used < 0) return -1;
      if (this.chunked.done) this.endBody();
      return used;
    }
    const take = Math.min(this.bodyRemaining, chunk.length - start);
    if (take > 0) this.pushBody(start === 0 && take === chunk.length ? chunk : chunk.subarray(start, start + take));
    this.bodyRemaining -= take;
    if (this.bodyRemaining === 0) this.endBody();
    return take;
  }

  private endBody(): void {
    this.bodyDone = true;
    if (this.requestTimer) { clearTimeout(this.requestTimer); this.requestTimer = undefined; }
    this.bodyStream?.push(null);
  }

  private requestTimer: NodeJS.Timeout | undefined;

  startRequestTimer(ms: number): void {
    this.requestTimer = setTimeout(() => this.timedOut(408, 'request_overall_timeout'), ms);
  }

  /** request_timeout / stream_idle_timeout: 408 if nothing was sent yet, otherwise reset. */
  timedOut(status: number, _details: string): void {
    if (this.done) return;
    if (this.headersSent) { this.reset(); this.onClose?.(); return; }
    this.closeAfter = true;
    this.respond(status, { 'content-length': 0 }, true);
    this.onClose?.();
  }

  respond(status: number, headers: OutgoingHttpHeaders, endStream: boolean): void {
    if (this.done || this.c.isClosed) return;
    this.headersSent = true;
    this.noBody = this.method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200);
    const h = headers as WireHeaders;
    let framing = '';
    if (!this.noBody && h['content-length'] === undefined) {
      if (endStream) framing = 'content-length: 0\r\n';
      else if (this.protocol === 'HTTP/1.1') { framing = 'transfer-encoding: chunked\r\n'; this.chunkedOut = true; }
      else this.closeAfter = true;
    }
    if (this.requestClose || this.c.host.isDraining() || !this.bodyDone) this.closeAfter = true;
    const conn = this.closeAfter ? 'connection: close\r\n' : this.protocol === 'HTTP/1.0' ? 'connection: keep-alive\r\n' : '';
    if (endStream) { batchedWrite(this.c.socket, responseMessage(status, h, framing + conn, '', undefined, '')); this.finish(); return; }
    this.pendingStatus = status;
    this.pendingHeaders = h;
    this.pendingExtra = framing + conn;
  }

  /** Writes the held-back head (if any) with `prefix`, `chunk` and `suffix`: one Buffer, one syscall for small responses. */
  private flush(prefix: string, chunk: Buffer | undefined, suffix: string): boolean {
    const socket = this.c.socket;
    const h = this.pendingHeaders;
    this.pendingHeaders = undefined;
    const small = !chunk || chunk.length <= 8192;
    if (small) return batchedWrite(socket, h ? responseMessage(this.pendingStatus, h, this.pendingExtra, prefix, chunk, suffix) : framed(prefix, chunk, suffix));
    socket.cork();
    if (h) socket.write(responseMessage(this.pendingStatus, h, this.pendingExtra, prefix, undefined, ''));
    else if (prefix) socket.write(prefix, 'latin1');
    socket.write(chunk);
    const ok = suffix ? socket.write(suffix, 'latin1') : true;
    socket.uncork();
    return ok && socket.writableLength < socket.writableHighWaterMark;
  }

  write(chunk: Buffer): boolean {
    if (this.done || this.noBody || chunk.length === 0) return true;
    if (this.chunkedOut) return this.flush(chunk.length.toString(16) + '\r\n', chunk, '\r\n');
    if (this.pendingHeaders) return this.flush('', chunk, '');
    return this.c.socket.write(chunk);
  }

  end(trailers?: Headers): void {
    if (this.done) return;
    if (this.chunkedOut) this.flush(trailers ? `0\r\n${serializeHeaders(trailers)}\r\n` : '0\r\n\r\n', undefined, '');
    else if (this.pendingHeaders) this.flush('', undefined, '');
    this.finish();
  }

  private finish(): void {
    this.done = true;
    if (this.requestTimer) clearTimeout(this.requestTimer);
    this.c.finished(this, this.closeAfter);
  }

  /** A local reply before anything was sent (426 and friends). */
  localReply(status: number): void {
    this.closeAfter = true;
    this.respond(status, { 'content-length': 0 }, true);
  }

  reset(): void {
    this.done = true;
    this.c.socket.destroy();
  }

  watch(onDrain: () => void, onClose: () => void): void {
    this.onDrain = onDrain;
    this.onClose = onClose;
  }

  drained(): void { this.onDrain?.(); }

  downstreamClosed(): void {
    if (this.bodyStream && !this.bodyDone) this.bodyStream.destroy(new Error('downstream closed'));
    if (!this.done) { this.done = true; this.onClose?.(); }
  }
}

export function rawResponse(status: number, headers: Headers | OutgoingHttpHeaders): string {
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${serializeHeaders(headers as Record<string, string>)}\r\n`;
}

function minPositive(a: number, b: number): number {
  if (a > 0 && b > 0) return Math.min(a, b);
  return a > 0 ? a : b;
}
