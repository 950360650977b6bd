import { constants as h2c, type ClientHttp2Stream, type IncomingHttpHeaders as H2Headers, type OutgoingHttpHeaders } from 'node:http2';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { UpstreamHandler, UpstreamRequest } from './h1-pool.ts';

/** The pool's side of a call: pending accounting. */
export interface CallOwner {
  settlePending(call: H2Call): void;
  cancelled(): void;
}

/** The connection a call's stream runs on: told once when the stream no longer needs its slot. */
export interface StreamSlot {
  streamEnded(): void;
}

const kCall = Symbol('skua.h2call');
type CallStream = ClientHttp2Stream & { [kCall]?: H2Call };

/**
 * One request on an upstream HTTP/2 stream, and the controller its handler pauses and aborts.
 * Response data is handed over in order and the trailers only on 'end', after every buffered
 * byte: a stream paused for downstream backpressure keeps its data until it is resumed.
 */
export class H2Call implements Dispatcher.DispatchController {
  readonly req: UpstreamRequest;
  readonly handler: UpstreamHandler;
  readonly owner: CallOwner;
  stream: CallStream | undefined;
  conn: StreamSlot | undefined;
  /** Waiting for a stream slot: counts against max_pending_requests. */
  pending = false;
  aborted = false;
  paused = false;
  reason: Error | null = null;
  /** The response head ended the stream (HEADERS with END_STREAM: trailers-only or header-only). */
  endStream = false;
  private trailers: H2Headers | undefined;
  private responded = false;
  private over = false;

  constructor(req: UpstreamRequest, handler: UpstreamHandler, owner: CallOwner) {
    this.req = req;
    this.handler = handler;
    this.owner = owner;
  }

  pause(): void { this.paused = true; this.stream?.pause(); }
  resume(): void { this.paused = false; if (this.responded) this.stream?.resume(); }

  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    if (this.pending) { this.owner.settlePending(this); this.owner.cancelled(); }
    const s = this.stream;
    if (s && !s.destroyed) s.close(h2c.NGHTTP2_CANCEL);
    this.done();
  }

  /** Takes the stream a connection opened for this call and wires it up. */
  attach(stream: ClientHttp2Stream, conn: StreamSlot): void {
    const s = stream as CallStream;
    this.stream = s;
    this.conn = conn;
    s[kCall] = this;
    s.on('response', onResponse);
    s.on('trailers', onTrailers);
    s.on('end', onEnd);
    s.on('error', onError);
    s.on('close', onClose);
    const body = this.req.body;
    if (body) pipeBody(body, s, this);
  }

  onResponse(headers: H2Headers, flags: number): void {
    if (this.aborted || this.over) return;
    const status = Number(headers[':status']);
    this.endStream = (flags & h2c.NGHTTP2_FLAG_END_STREAM) !== 0;
    const out: Record<string, string | string[] | undefined> = {};
    for (const k in headers) if (k.charCodeAt(0) !== 58) out[k] = headers[k];
    this.responded = true;
    this.handler.onResponseStart?.(this, status, out as IncomingHttpHeaders, '');
    const s = this.stream;
    if (!s || this.aborted) return;
    // Pause before listening: adding a 'data' listener does not resume an explicitly paused stream.
    if (this.paused) s.pause();
    s.on('data', onData);
  }

  onData(chunk: Buffer): void {
    if (this.aborted || this.over) return;
    this.handler.onResponseData?.(this, chunk);
  }

  onTrailers(t: H2Headers): void { this.trailers = t; }

  onEnd(): void {
    if (this.aborted || this.over || !this.responded) return;
    this.done();
    // The request body may still be flowing (the server answered early): the exchange is over.
    const s = this.stream;
    if (s && !s.destroyed && this.req.body && !this.req.body.readableEnded) s.close(h2c.NGHTTP2_NO_ERROR);
    this.handler.onResponseEnd?.(this, (this.trailers ?? {}) as IncomingHttpHeaders);
  }

  /** The response completed or the call was given up: nothing more is reported. */
  get settled(): boolean { return this.aborted || this.over; }

  /** Before the response completed: a reset, a GOAWAY above this stream, or the session went away. */
  fail(err: Error): void {
    if (this.aborted || this.over) return;
    this.done();
    this.handler.onResponseError?.(this, err);
  }

  /** Could not open a stream at all (no connection): the request never left. */
  failBeforeStart(err: Error): void {
    if (this.aborted || this.over) return;
    this.over = true;
    this.handler.onResponseError?.(this, err);
  }

  private done(): void {
    if (this.over) return;
    this.over = true;
    this.conn?.streamEnded();
  }
}

function callOf(s: CallStream): H2Call | undefined { return s[kCall]; }
function onResponse(this: CallStream, headers: H2Headers, flags: number): void { callOf(this)?.onResponse(headers, flags); }
function onData(this: CallStream, chunk: Buffer): void { callOf(this)?.onData(chunk); }
function onTrailers(this: CallStream, t: H2Headers): void { callOf(this)?.onTrailers(t); }
function onEnd(this: CallStream): void { callOf(this)?.onEnd(); }
function onError(this: CallStream, err: Error): void { callOf(this)?.fail(err); }
function onClose(this: CallStream): void {
  const call = callOf(this);
  if (!call) return;
  this[kCall] = undefined;
  // Every stream closes; only one closing before its response is a failure (an Error costs a stack trace).
  if (!call.settled) call.fail(streamError(this.rstCode));
}

/** RFC 9113 §7 error codes by value, named as node names them in its stream errors. */
const CODE_NAMES = ['NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT', 'STREAM_CLOSED', 'FRAME_SIZE_ERROR',
  'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR', 'CONNECT_ERROR', 'ENHANCE_YOUR_CALM', 'INADEQUATE_SECURITY', 'HTTP_1_1_REQUIRED'];

/** The error a stream that closed without a complete response fails with (as node words a reset). */
export function streamError(code: number | undefined): Error {
  if (code === undefined || code === h2c.NGHTTP2_NO_ERROR) {
    return Object.assign(new Error('upstream stream closed before the response was complete'), { code: 'ECONNRESET' });
  }
  return Object.assign(new Error(`Stream closed with error code ${CODE_NAMES[code] ? `NGHTTP2_${CODE_NAMES[code]}` : code}`), { code: 'ERR_HTTP2_STREAM_ERROR' });
}

/** Request headers for node's HTTP/2 client: pseudo-headers from the request line and `host`. */
export function h2RequestHeaders(req: UpstreamRequest, scheme: string): OutgoingHttpHeaders {
  const h = req.headers;
  const out: OutgoingHttpHeaders = { ':method': req.method, ':scheme': scheme, ':path': req.path };
  for (const k in h) {
    const v = h[k];
    if (v === undefined) continue;
    if (k === 'host') out[':authority'] = v;
    else out[k] = v;
  }
  return out;
}

/** Streams a request body into the upstream stream with backpressure. */
function pipeBody(body: Readable, stream: ClientHttp2Stream, call: H2Call): void {
  const handler = call.handler;
  body.on('data', (chunk: Buffer) => {
    if (stream.destroyed) return;
    handler.onBodySent?.(chunk);
    if (!stream.write(chunk)) body.pause();
  });
  stream.on('drain', () => body.resume());
  body.once('end', () => { if (!stream.destroyed) stream.end(); });
  body.once('error', () => { if (!stream.destroyed) stream.close(h2c.NGHTTP2_CANCEL); });
}
