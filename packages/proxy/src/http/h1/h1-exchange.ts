import { Readable } from 'node:stream';
import type { OutgoingHttpHeaders } from 'node:http';
import { ChunkedDecoder, serializeHeaders, type Head, type Headers } from './parse.ts';
import type { Exchange } from '../exchange.ts';
import { framed, responseMessage, type WireHeaders } from './wire.ts';
import { batchedWrite } from './write-batch.ts';
import type { ConnInfo } from '../../listener/conn-info.ts';
import type { H1Connection } from './server.ts';

export function copyOf(b: Buffer): Buffer {
  const c = Buffer.allocUnsafe(b.length);
  c.set(b);
  return c;
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
  /** Set when the codec aborted this request (bad body framing): how the access log tells it. */
  codecError: { readonly status: number; readonly flag: string; readonly details: string } | undefined = undefined;
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

  /** The connection closes after this response (codec replies). */
  closeAfterResponse(): void { this.closeAfter = true; }

  /**
   * The codec gave up on this request (bad body framing, a bug on the request path): Envoy's
   * local reply if nothing was sent yet, else a reset. Whoever forwards the request sees the
   * downstream go away, and the body stream fails.
   */
  abort(r: { readonly status: number; readonly body: string; readonly flag: string; readonly details: string }): void {
    if (this.done) return;
    const onClose = this.onClose;
    this.codecError = r;
    if (this.bodyStream && !this.bodyDone) this.bodyStream.destroy(new Error('request aborted by the HTTP/1.1 codec'));
    if (this.headersSent) this.reset();
    else {
      this.closeAfter = true;
      this.headersSent = true;
      const body = Buffer.from(r.body);
      const h: WireHeaders = body.length ? { 'content-type': 'text/plain', 'content-length': body.length } : { 'content-length': 0 };
      batchedWrite(this.c.socket, responseMessage(r.status, h, 'connection: close\r\n', '', body, ''));
      this.finish();
    }
    onClose?.();
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
