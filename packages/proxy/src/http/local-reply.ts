import type { OutgoingHttpHeaders } from 'node:http';
import type { Exchange } from './exchange.ts';

/**
 * Envoy's local reply: status, optional text body, `server` header. When the
 * response has already started there is nothing to say: reset the stream.
 */
export function sendLocalReply(ex: Exchange, status: number, body: string | Buffer | undefined, serverName: string, extra?: OutgoingHttpHeaders): number {
  if (ex.headersSent) { ex.reset(); return 0; }
  const headers: OutgoingHttpHeaders = extra ? { ...extra } : {};
  const len = body === undefined ? 0 : Buffer.byteLength(body);
  headers['content-length'] = len;
  if (len > 0 && headers['content-type'] === undefined) headers['content-type'] = 'text/plain';
  headers.date = new Date().toUTCString();
  if (serverName) headers.server = serverName;
  const sendBody = len > 0 && ex.method !== 'HEAD';
  ex.respond(status, headers, !sendBody);
  if (sendBody) { ex.write(typeof body === 'string' ? Buffer.from(body) : body as Buffer); ex.end(); }
  return len;
}
