import type { OutgoingHttpHeaders } from 'node:http';
import type { ServerHttp2Stream, IncomingHttpHeaders as H2Headers } from 'node:http2';
import type { Readable } from 'node:stream';
import type { ConnInfo } from '../listener/conn-info.ts';

export type Headers = Record<string, string | string[] | undefined>;

/** Connection-specific headers that never cross a proxy hop (RFC 9110 §7.6.1, RFC 9113 §8.2.2). */
export const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te'];

/**
 * One downstream request/response, whichever codec carried it. The router only
 * talks to this, so HTTP/1.1 and HTTP/2 share one forwarding path.
 */
export interface Exchange {
  readonly protocol: 'HTTP/1.0' | 'HTTP/1.1' | 'HTTP/2';
  readonly method: string;
  /** Mutable: the HCM's path normalisation rewrites it before routing. */
  path: string;
  readonly authority: string;
  readonly scheme: string;
  /** Request headers without pseudo-headers; the router edits them in place for the upstream. */
  readonly headers: Headers;
  readonly hasBody: boolean;
  /** The request body. A filter that buffered it (ext_authz with_request_body) puts back a stream that replays those bytes. */
  body: Readable;
  readonly conn: ConnInfo;
  readonly headersSent: boolean;
  respond(status: number, headers: OutgoingHttpHeaders, endStream: boolean): void;
  /** False when the downstream is full; `onDrain` fires when it can take more. */
  write(chunk: Buffer): boolean;
  end(trailers?: Headers): void;
  /** Abort the stream: RST_STREAM on HTTP/2, close the connection on HTTP/1. */
  reset(): void;
  /** Called on drain, and with `closed=true` if the downstream went away before the response finished. */
  watch(onDrain: () => void, onClose: () => void): void;
}

const kLocalReset = Symbol('skua.h2.localReset');

/** Marks a stream this proxy reset (not the client), for the codec's reset accounting. */
export function markLocalReset(stream: ServerHttp2Stream): void {
  (stream as ServerHttp2Stream & { [kLocalReset]?: boolean })[kLocalReset] = true;
}

export function wasLocalReset(stream: ServerHttp2Stream): boolean {
  return (stream as ServerHttp2Stream & { [kLocalReset]?: boolean })[kLocalReset] === true;
}

export class H2Exchange implements Exchange {
  readonly protocol = 'HTTP/2' as const;
  readonly method: string;
  path: string;
  readonly authority: string;
  readonly scheme: string;
  readonly headers: Headers;
  readonly hasBody: boolean;
  body: Readable;
  readonly conn: ConnInfo;
  private readonly stream: ServerHttp2Stream;
  private trailers: Headers | undefined;
  /** The response ended with its head (HEADERS with END_STREAM): end() has nothing left to send. */
  private endedWithHead = false;
  private onClose: (() => void) | undefined;

  /** `idleTimeoutMs`: the HCM's stream_idle_timeout (0 = off). */
  constructor(stream: ServerHttp2Stream, raw: H2Headers, endStream: boolean, conn: ConnInfo, idleTimeoutMs = 0) {
    this.stream = stream;
    if (idleTimeoutMs > 0) stream.setTimeout(idleTimeoutMs, () => this.idleTimeout());
    this.method = (raw[':method'] as string) ?? 'GET';
    this.path = (raw[':path'] as string) ?? '/';
    this.authority = (raw[':authority'] as string) ?? (raw.host as string) ?? '';
    this.scheme = (raw[':scheme'] as string) ?? (conn.tls ? 'https' : 'http');
    const headers: Headers = {};
    for (const k in raw) if (k.charCodeAt(0) !== 58) headers[k] = raw[k];
    this.headers = headers;
    this.hasBody = !endStream;
    this.body = stream;
    this.conn = conn;
  }

  get headersSent(): boolean { return this.stream.headersSent; }

  respond(status: number, headers: OutgoingHttpHeaders, endStream: boolean): void {
    if (this.stream.destroyed) return;
    for (const h of HOP_BY_HOP) delete headers[h];
    headers[':status'] = status;
    this.endedWithHead = endStream;
    this.stream.respond(headers, { endStream, waitForTrailers: !endStream });
    if (!endStream) this.stream.once('wantTrailers', () => this.sendTrailers());
  }

  /** With no trailers node sends an empty DATA frame with END_STREAM (never RST_STREAM). */
  private sendTrailers(): void {
    if (!this.stream.destroyed) this.stream.sendTrailers(this.trailers ?? {});
  }

  write(chunk: Buffer): boolean { return this.stream.write(chunk); }

  end(trailers?: Headers): void {
    if (this.endedWithHead) return;
    this.trailers = trailers;
    this.stream.end();
  }

  reset(): void {
    if (this.stream.destroyed) return;
    markLocalReset(this.stream);
    this.stream.close(2 /* INTERNAL_ERROR */);
  }

  /** stream_idle_timeout: no frame either way for that long. 408 if nothing was sent yet, else a reset (Envoy). */
  private idleTimeout(): void {
    const s = this.stream;
    if (s.destroyed) return;
    if (!s.headersSent) s.respond({ ':status': 408, 'content-length': '0' }, { endStream: true });
    else { markLocalReset(s); s.close(2 /* INTERNAL_ERROR */); }
    this.onClose?.();
  }

  watch(onDrain: () => void, onClose: () => void): void {
    const stream = this.stream;
    this.onClose = onClose;
    stream.on('drain', onDrain);
    stream.on('close', () => { if (!stream.writableFinished || stream.rstCode) onClose(); });
  }
}
