import type { OutgoingHttpHeaders } from 'node:http';
import type { RequestRecord } from './request-record.ts';
import { rewriteLocalReply, type LocalReplyConfig } from './local-reply-config.ts';

/**
 * Envoy's local reply: status, optional text body, `server` header, rewritten
 * by local_reply_config when there is one. When the response has already
 * started there is nothing to say: reset the stream. Returns the body size.
 */
export function sendLocalReply(rec: RequestRecord, status: number, body: string | Buffer | undefined,
  s: { serverName: string; localReply: LocalReplyConfig | undefined }, extra?: OutgoingHttpHeaders): number {
  const ex = rec.ex;
  if (ex.headersSent) { ex.reset(); return 0; }
  const headers: OutgoingHttpHeaders = extra ? { ...extra } : {};
  if (s.localReply) {
    const r = rewriteLocalReply(s.localReply, rec, status, body === undefined ? '' : body.toString(), headers as Record<string, string>);
    status = r.status;
    rec.status = status;
    body = r.body === '' ? undefined : r.body;
    if (r.contentType) headers['content-type'] = r.contentType;
  }
  const ct = ex.headers['content-type'];
  if (typeof ct === 'string' && ct.startsWith('application/grpc')) return grpcLocalReply(rec, status, body, s, headers);
  rec.filters?.encodeHeaders(status, headers as Record<string, string>);
  // An encoder filter (the compressor) took the response: the body goes out encoded.
  if (rec.bodyEncoder !== undefined && body !== undefined) body = rec.bodyEncoder.encodeAll(typeof body === 'string' ? Buffer.from(body) : body);
  const len = body === undefined ? 0 : Buffer.byteLength(body);
  headers['content-length'] = len;
  if (len > 0 && headers['content-type'] === undefined) headers['content-type'] = 'text/plain';
  headers.date = new Date().toUTCString();
  if (s.serverName) headers.server = s.serverName;
  const sendBody = len > 0 && ex.method !== 'HEAD';
  ex.respond(status, headers, !sendBody);
  if (sendBody) { ex.write(typeof body === 'string' ? Buffer.from(body) : body as Buffer); ex.end(); }
  return len;
}

/** Envoy's HTTP → gRPC status mapping for local replies (Grpc::Utility::httpToGrpcStatus). */
export function httpToGrpcStatus(status: number): number {
  switch (status) {
    case 400: return 13;
    case 401: return 16;
    case 403: return 7;
    case 404: return 12;
    case 429: case 502: case 503: case 504: return 14;
    default: return 2;
  }
}

/** A gRPC caller gets a trailers-only answer: HTTP 200, grpc-status from the HTTP status, grpc-message = body. */
function grpcLocalReply(rec: RequestRecord, status: number, body: string | Buffer | undefined, s: { serverName: string }, headers: OutgoingHttpHeaders): number {
  const ex = rec.ex;
  headers['content-type'] = 'application/grpc';
  if (headers['grpc-status'] === undefined) headers['grpc-status'] = String(httpToGrpcStatus(status));
  if (body !== undefined && headers['grpc-message'] === undefined) headers['grpc-message'] = encodeURIComponent(body.toString());
  headers['content-length'] = 0;
  if (s.serverName) headers.server = s.serverName;
  rec.filters?.encodeHeaders(200, headers as Record<string, string>);
  rec.status = 200;
  ex.respond(200, headers, true);
  return 0;
}
