import { STATUS_CODES } from '../../core/node-http.ts';

/**
 * HTTP/1.1 heads written straight into one Buffer: the byte count is summed
 * first, then every string's char codes are stored in place. Per message this
 * skips the string concatenation, its flattening and the C++ string encoder
 * (profiled at ~3 µs per proxied request), and head plus a small body leave
 * in a single write.
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

/**
 * latin1 bytes of `s` (a code unit above 255 keeps its low byte, as Buffer's latin1 encoding does).
 * By char code even for long values: Buffer#write's native copy measured no better end to end
 * (its call overhead shows in profiles as much as the loop it saves).
 */
function put(s: string, out: Buffer, pos: number): number {
  const n = s.length;
  for (let i = 0; i < n; i++) out[pos + i] = s.charCodeAt(i);
  return pos + n;
}

function valueText(v: string | number): string {
  return typeof v === 'string' ? v : String(v);
}

/** Bytes of `name: value\r\n` lines for every defined header. */
function headersLength(h: WireHeaders): number {
  let n = 0;
  for (const k in h) {
    const v = h[k];
    if (v === undefined) continue;
    if (typeof v === 'object') { for (let i = 0; i < v.length; i++) n += k.length + valueText(v[i]).length + 4; }
    else n += k.length + valueText(v).length + 4;
  }
  return n;
}

function putLine(k: string, v: string, out: Buffer, pos: number): number {
  pos = put(k, out, pos);
  out[pos++] = 58; out[pos++] = 32;
  pos = put(v, out, pos);
  out[pos++] = 13; out[pos++] = 10;
  return pos;
}

function putHeaders(h: WireHeaders, out: Buffer, pos: number): number {
  for (const k in h) {
    const v = h[k];
    if (v === undefined) continue;
    if (typeof v === 'object') { for (let i = 0; i < v.length; i++) pos = putLine(k, valueText(v[i]), out, pos); }
    else pos = putLine(k, valueText(v), out, pos);
  }
  return pos;
}

/** `METHOD path HTTP/1.1`, the headers, `extra` (pre-formatted lines) and the blank line. */
export function requestHead(method: string, path: string, h: WireHeaders, extra: string): Buffer {
  const out = Buffer.allocUnsafe(method.length + path.length + 12 + headersLength(h) + extra.length + 2);
  let pos = put(method, out, 0);
  out[pos++] = 32;
  pos = put(path, out, pos);
  pos = put(' HTTP/1.1\r\n', out, pos);
  pos = putHeaders(h, out, pos);
  pos = put(extra, out, pos);
  out[pos++] = 13; out[pos] = 10;
  return out;
}

/**
 * Status line, headers, `extra` lines and the blank line, then `prefix`, `body`
 * and `suffix` (chunk framing) in the same Buffer.
 */
export function responseMessage(status: number, h: WireHeaders, extra: string, prefix: string, body: Buffer | undefined, suffix: string): Buffer {
  const line = statusLine(status);
  const bodyLen = body ? body.length : 0;
  const out = Buffer.allocUnsafe(line.length + headersLength(h) + extra.length + 2 + prefix.length + bodyLen + suffix.length);
  let pos = put(line, out, 0);
  pos = putHeaders(h, out, pos);
  pos = put(extra, out, pos);
  out[pos++] = 13; out[pos++] = 10;
  pos = put(prefix, out, pos);
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
