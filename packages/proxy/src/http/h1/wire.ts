import { STATUS_CODES } from '../../core/node-http.ts';
import { serializeHeaders } from './parse.ts';

/**
 * HTTP/1.1 heads as one string of concatenated pieces (a rope), copied into the message's
 * Buffer by one native latin1 write, which flattens it in C++; head plus a small body leave in a
 * single write. Storing every string's char codes into the Buffer from JS (the previous way) took
 * 14% of the instructions of a proxied request against 7% for this (callgrind,
 * bench/tools/instructions-per-request.ts): charCodeAt on strings of mixed kinds (internalised
 * names, sliced values, ropes) costs ~25 instructions per byte.
 */
export type WireHeaders = Record<string, string | string[] | number | undefined>;

const STATUS_LINES: string[] = [];

/** `HTTP/1.1 <code> <reason>\r\n`, built once per status code. */
function statusLine(status: number): string {
  let line = STATUS_LINES[status];
  if (line === undefined) {
    line = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    if (status >= 100 && status <= 999) STATUS_LINES[status] = line;
  }
  return line;
}

/** latin1 bytes of a short `s` (chunk framing), where a native call would cost more than the loop. */
function put(s: string, out: Buffer, pos: number): number {
  const n = s.length;
  for (let i = 0; i < n; i++) out[pos + i] = s.charCodeAt(i);
  return pos + n;
}

/** `METHOD path HTTP/1.1`, the headers, `extra` (pre-formatted lines) and the blank line. */
export function requestHead(method: string, path: string, h: WireHeaders, extra: string): Buffer {
  return Buffer.from(method + ' ' + path + ' HTTP/1.1\r\n' + serializeHeaders(h) + extra + '\r\n', 'latin1');
}

/**
 * Status line, headers, `extra` lines and the blank line, then `prefix`, `body`
 * and `suffix` (chunk framing) in the same Buffer.
 */
export function responseMessage(status: number, h: WireHeaders, extra: string, prefix: string, body: Buffer | undefined, suffix: string): Buffer {
  const text = statusLine(status) + serializeHeaders(h) + extra + '\r\n' + prefix;
  const bodyLen = body ? body.length : 0;
  const out = Buffer.allocUnsafe(text.length + bodyLen + suffix.length);
  let pos = out.write(text, 0, 'latin1');
  if (body) { out.set(body, pos); pos += bodyLen; }
  put(suffix, out, pos);
  return out;
}

/** `prefix`, `body`, `suffix` in one Buffer (a chunk with its framing). */
export function framed(prefix: string, body: Buffer | undefined, suffix: string): Buffer {
  const bodyLen = body ? body.length : 0;
  const out = Buffer.allocUnsafe(prefix.length + bodyLen + suffix.length);
  let pos = put(prefix, out, 0);
  if (body) { out.set(body, pos); pos += bodyLen; }
  put(suffix, out, pos);
  return out;
}
