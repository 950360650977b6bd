/**
 * The HTTP/1.1 codec's parsers (http/h1/parse.ts, wire.ts) on arbitrary bytes.
 * Invariants: never throw; an accepted head is well-formed (token method and names, lower-case
 * names, values without CR/LF/NUL or outer whitespace, coherent framing); what we would write
 * for it (requestHead) parses back to the same head; the chunked decoder gives the same body,
 * trailers and verdict whether the bytes come in one piece or one byte at a time.
 */
import { ChunkedDecoder, findHeadEnd, parseHead, type Head } from '../../packages/proxy/src/http/h1/parse.ts';
import { requestHead } from '../../packages/proxy/src/http/h1/wire.ts';
import { fail } from './invariant.ts';

const MAX_HEADERS = 100;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const LOWER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const BAD_VALUE = /[\0\r\n]|^[ \t]|[ \t]$/;

export function fuzz(data: Buffer): void {
  const end = findHeadEnd(data, 0);
  if (end < 0) return;
  const req = parseHead(data, 0, end - 4, true, MAX_HEADERS);
  if (typeof req === 'object') {
    checkHead(req, true);
    roundTrip(req);
    if (req.chunked) checkChunked(data.subarray(end));
  }
  const res = parseHead(data, 0, end - 4, false, MAX_HEADERS);
  if (typeof res === 'object') checkHead(res, false);
}

function checkHead(h: Head, isRequest: boolean): void {
  if (isRequest) {
    if (!TOKEN.test(h.method)) fail('method is not a token', h.method);
    if (h.target === '' || /[\0- \x7f]/.test(h.target)) fail('request target has a space or control character', h.target);
  } else if (h.status < 100 || h.status > 999) fail('status out of range', h.status);
  if (h.versionMinor !== 0 && h.versionMinor !== 1) fail('version', h.versionMinor);
  if (h.headerCount > MAX_HEADERS) fail('more headers than allowed', h.headerCount);
  let count = 0;
  for (const [name, v] of Object.entries(h.headers)) {
    if (!LOWER_TOKEN.test(name)) fail('header name is not a lower-case token', name);
    // Repeated request fields are combined into one value: no array ever reaches routing.
    if (isRequest && typeof v !== 'string') fail('request header value is not one string', { name, v });
    for (const value of Array.isArray(v) ? v : [v]) {
      count++;
      if (value === undefined || BAD_VALUE.test(value)) fail('header value is not clean', { name, value });
    }
  }
  // Repeated request fields are combined and an identical repeated Content-Length is kept once:
  // never more values than lines.
  if (count > h.headerCount) fail('headerCount does not match the headers', { count, headerCount: h.headerCount });
  if (!Number.isSafeInteger(h.contentLength) || h.contentLength < -1) fail('content length', h.contentLength);
  if (h.chunked && h.contentLength >= 0) fail('both chunked and content-length', h);
}

/** What the proxy writes upstream for this head reads back as the same head. */
function roundTrip(h: Head): void {
  if (h.versionMinor !== 1) return;
  const wire = requestHead(h.method, h.target, h.headers, '');
  const again = parseHead(wire, 0, wire.length - 4, true, MAX_HEADERS);
  if (typeof again !== 'object') fail('re-serialised head does not parse', { error: again, wire: wire.toString('latin1') });
  for (const k of ['method', 'target', 'contentLength', 'chunked', 'close', 'upgrade', 'expectContinue'] as const) {
    if (again[k] !== h[k]) fail(`re-serialised head differs in ${k}`, { before: h[k], after: again[k] });
  }
  if (JSON.stringify(again.headers) !== JSON.stringify(h.headers)) fail('re-serialised headers differ', { before: h.headers, after: again.headers });
}

interface Decoded { used: number; body: string; trailers: string; done: boolean }

function decode(bytes: Buffer, step: number): Decoded {
  const d = new ChunkedDecoder();
  let body = '', used = 0;
  for (let i = 0; i < bytes.length && !d.done; i += step) {
    const piece = bytes.subarray(i, Math.min(i + step, bytes.length));
    const n = d.push(piece, 0, (c) => { body += c.toString('latin1'); });
    if (n < 0) return { used: -1, body, trailers: '', done: false };
    if (n > piece.length) fail('decoder consumed more than it was given', { n, length: piece.length });
    used += n;
    if (n < piece.length && !d.done) fail('decoder stopped early without finishing', { n, length: piece.length });
  }
  return { used, body, trailers: JSON.stringify(d.trailers ?? {}), done: d.done };
}

function checkChunked(bytes: Buffer): void {
  const whole = decode(bytes, bytes.length || 1);
  const bytewise = decode(bytes, 1);
  if (whole.used !== bytewise.used || whole.done !== bytewise.done || whole.trailers !== bytewise.trailers) {
    fail('chunked verdict depends on how the bytes are split', { whole, bytewise });
  }
  // Data handed out before an error may differ in length (one piece vs byte by byte), never in content.
  if (!whole.body.startsWith(bytewise.body) && !bytewise.body.startsWith(whole.body)) fail('chunked body depends on the split', { whole, bytewise });
  if (whole.used >= 0 && whole.body !== bytewise.body) fail('chunked body depends on the split', { whole, bytewise });
}
