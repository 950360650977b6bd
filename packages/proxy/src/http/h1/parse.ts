/**
 * HTTP/1.1 message heads (RFC 9112), parsed strictly: anything a smuggling
 * attack could use (obs-fold, bare CR/LF, whitespace before the colon, TE with
 * CL, bad Content-Length) is an error, never a guess.
 */
import { trimOws } from './chunked.ts';

export { ChunkedDecoder } from './chunked.ts';
export type Headers = Record<string, string | string[] | undefined>;

export interface Head {
  /** Request: method and target. Response: '' and ''. */
  method: string;
  target: string;
  /** Response: status code and reason. Request: 0 and ''. */
  status: number;
  reason: string;
  versionMinor: number;
  headers: Headers;
  headerCount: number;
  /** -1 when absent. */
  contentLength: number;
  chunked: boolean;
  /** `connection: close` (or HTTP/1.0 without keep-alive). */
  close: boolean;
  upgrade: boolean;
  expectContinue: boolean;
}

/**
 * Why a head was refused; the server maps these to 400 / 431 / 501 and to Envoy's
 * response_code_details (http1.codec_error, http1.too_many_headers, ...).
 */
export type HeadError = 'bad-request' | 'too-many-headers' | 'bad-transfer-encoding' | 'invalid-characters'
  | 'chunked-with-length' | 'underscore';

/** headers_with_underscores_action: what a request header name with `_` gets. */
export const Underscores = { Allow: 0, Reject: 1, Drop: 2 } as const;
export type UnderscoreAction = (typeof Underscores)[keyof typeof Underscores];


/** tchar (RFC 9110 §5.6.2) by char code. */
const TCHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let c = 48; c <= 57; c++) TCHAR[c] = 1;
for (let c = 65; c <= 90; c++) TCHAR[c] = 2; // upper case: needs folding
for (let c = 97; c <= 122; c++) TCHAR[c] = 1;
TCHAR[95] = 5; // '_' (4 marks it for headers_with_underscores_action)

const CR = 13, LF = 10, SP = 32, HTAB = 9, COLON = 58;

/**
 * Parses `buf[start, end)` (the head without its final CRLFCRLF). The head is
 * decoded once to a latin1 string for the substrings that are kept, and scanned
 * byte by byte in the Buffer: no split, no per-line regex. (charCodeAt on the
 * string cost ~3x the instructions of a typed-array load per byte under callgrind.)
 */
export function parseHead(buf: Buffer, start: number, end: number, isRequest: boolean, maxHeaders: number, underscores: UnderscoreAction = 0): Head | HeadError {
  const b = start === 0 ? buf : buf.subarray(start, end);
  return parseHeadBytes(b, buf.toString('latin1', start, end), end - start, isRequest, maxHeaders, underscores);
}

/** Parses the head that ends (CRLFCRLF) at `at` in `buf`, which starts at the head's first byte. */
export function parseHeadAt(buf: Buffer, at: number, isRequest: boolean, maxHeaders: number, underscores: UnderscoreAction = 0): Head | HeadError {
  return parseHeadBytes(buf, headWindow(buf, at), at, isRequest, maxHeaders, underscores);
}

/** The first `limit` bytes of `buf` as latin1 text (a head whose end headEnd found). */
export function headWindow(buf: Buffer, limit: number): string {
  return buf.toString('latin1', 0, buf.length < limit ? buf.length : limit);
}

const CRLF_CRLF = Buffer.from('\r\n\r\n', 'latin1');

/**
 * Where the head in `buf` ends (the index of its CRLFCRLF), found natively, or -1 when it does not end
 * within `limit` bytes. Only the head then becomes a string (headWindow(buf, end)): a body that came with
 * it is never converted.
 */
export function headEnd(buf: Buffer, limit: number): number {
  const at = buf.indexOf(CRLF_CRLF);
  return at < 0 || at + 4 > limit ? -1 : at;
}

/** A head with nothing parsed into it yet (a fresh header map each time). */
export function emptyHead(): Head {
  return {
    method: '', target: '', status: 0, reason: '', versionMinor: 1, headers: {}, headerCount: 0,
    contentLength: -1, chunked: false, close: false, upgrade: false, expectContinue: false,
  };
}

/**
 * Parses `text[0, n)`, a head without its final CRLFCRLF. A request header field that may appear
 * once (Host; Content-Length unless repeated identically) is refused when repeated; other repeated
 * request fields are combined into one comma-separated value (`; ` for Cookie, RFC 9110 §5.3), so
 * every request header value is a string. Responses keep repeats as arrays (Set-Cookie).
 */
export function parseHeadText(text: string, n: number, isRequest: boolean, maxHeaders: number, underscores: UnderscoreAction = 0): Head | HeadError {
  // A code unit above 255 (not from a latin1 decode) must not pass as the byte it truncates to.
  return parseHeadBytes(latin1Bytes(text, n), text, n, isRequest, maxHeaders, underscores);
}

/** `text[0, n)` as bytes; a code unit above 255 (not from a latin1 decode) becomes 0, which every scan refuses. */
function latin1Bytes(text: string, n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) { const c = text.charCodeAt(i); bytes[i] = c > 255 ? 0 : c; }
  return bytes;
}

/** The parser proper: `b` and `text` hold the same head, `b` is scanned, `text` is sliced. */
function parseHeadBytes(b: Uint8Array, text: string, n: number, isRequest: boolean, maxHeaders: number, underscores: UnderscoreAction): Head | HeadError {
  let eol = lineEnd(text, 0, n);
  if (eol < 0) return 'bad-request';
  const head = emptyHead();
  if (!(isRequest ? requestLine(b, text, eol, head) : statusLine(b, text, eol, head))) return 'bad-request';
  const headers = head.headers;
  let keepAlive = false, connectionUpgrade = false, te: string | undefined;
  let pos = eol + 2;
  while (pos < n) {
    if (++head.headerCount > maxHeaders) return 'too-many-headers';
    // Name: tchars up to the colon (no whitespace before it, no obs-fold; CR and LF are not tchars).
    // The kinds of the name's characters, OR-ed: 2 = upper case, 4 = underscore.
    let i = pos, kinds = 0;
    for (; i < n; i++) {
      const c = b[i];
      if (c === COLON) break;
      const t = c < 128 ? TCHAR[c] : 0;
      if (t === 0) return 'bad-request';
      kinds |= t;
    }
    if (i === pos || i === n) return 'bad-request';
    // Value: up to the line's CRLF (or the head's end), no control characters but HTAB, no bare CR
    // or LF. The line's end is found by this same scan: no separate search per line.
    let ve = i + 1;
    for (; ve < n; ve++) {
      const c = b[ve];
      if (c >= SP) { if (c === 127) return 'invalid-characters'; continue; }
      if (c === HTAB) continue;
      if (c === CR && ve + 1 < n && b[ve + 1] === LF) break;
      return 'invalid-characters';
    }
    eol = ve;
    const upper = (kinds & 2) !== 0;
    if ((kinds & 4) !== 0 && underscores !== 0 && isRequest) {
      if (underscores === 1) return 'underscore';
      pos = eol + 2;
      continue;
    }
    const name = knownName(b, pos, i) ?? (upper ? lowerName(text.slice(pos, i)) : text.slice(pos, i));
    // OWS-trimmed.
    let vs = i + 1;
    while (vs < ve && (b[vs] === SP || b[vs] === HTAB)) vs++;
    while (ve > vs && (b[ve - 1] === SP || b[ve - 1] === HTAB)) ve--;
    const value = text.slice(vs, ve);
    pos = eol + 2;
    const prev = headers[name];
    if (prev === undefined) headers[name] = value;
    else if (typeof prev !== 'string' && !Array.isArray(prev)) ownHeader(headers, name, value);
    else if (name === 'content-length') { if (prev !== value) return 'bad-request'; }
    else if (isRequest) {
      if (name === 'host') return 'bad-request';
      // An empty line adds nothing to the list (no trailing ", ").
      if (value !== '') headers[name] = prev === '' ? value : `${prev as string}${name === 'cookie' ? '; ' : ', '}${value}`;
    } else if (Array.isArray(prev)) prev.push(value);
    else headers[name] = [prev, value];
    switch (name) {
      case 'content-length': {
        const len = parseDigits(value);
        if (len < 0 || (head.contentLength >= 0 && head.contentLength !== len)) return 'bad-request';
        head.contentLength = len;
        break;
      }
      case 'transfer-encoding': te = te === undefined ? value : `${te}, ${value}`; break;
      case 'connection':
        if (value.indexOf(',') < 0) {
          // One option, the usual case: compared in place, nothing allocated.
          if (sameLower(value, 'keep-alive')) keepAlive = true;
          else if (sameLower(value, 'close')) head.close = true;
          else if (sameLower(value, 'upgrade')) connectionUpgrade = true;
          break;
        }
        for (const token of value.toLowerCase().split(',')) {
          const t = trimOws(token);
          if (t === 'close') head.close = true;
          else if (t === 'keep-alive') keepAlive = true;
          else if (t === 'upgrade') connectionUpgrade = true;
        }
        break;
      case 'expect': if (sameLower(value, '100-continue') || hasToken(value, '100-continue')) head.expectContinue = true; break;
    }
  }
  // An empty Transfer-Encoding is a coding we do not understand (501), never "no coding".
  if (te !== undefined) {
    // With Content-Length too it is a smuggling vector (checked first, as Envoy does); only "chunked" is understood.
    if (head.contentLength >= 0) return 'chunked-with-length';
    const codings = te.toLowerCase().split(',').map((x) => x.trim()).filter(Boolean);
    if (codings[codings.length - 1] !== 'chunked' || codings.length > 1) return 'bad-transfer-encoding';
    // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty framing.
    if (isRequest && head.versionMinor === 0) return 'bad-request';
    head.chunked = true;
  }
  if (head.versionMinor === 0 && !keepAlive) head.close = true;
  // An `Upgrade: h2c` offer is ignored, as Envoy does: the request is served over HTTP/1.1.
  head.upgrade = connectionUpgrade && headers.upgrade !== undefined && !(isRequest && sameLower(headers.upgrade as string, 'h2c'));
  return head;
}

/**
 * A header named like an Object.prototype member (`constructor`, `toString`, `__proto__`): the
 * lookup found the inherited member, not a header. Defined as an own property, so it is a plain
 * header (and `__proto__` does not reach the prototype setter).
 */
function ownHeader(headers: Headers, name: string, value: string): void {
  Object.defineProperty(headers, name, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * Lower-cased header names, cached: peers send the same mixed-case names on every
 * message, and a cached name is already an internalised string, so using it as a
 * property key skips both toLowerCase and the string-table lookup. Bounded.
 */
const LOWER = new Map<string, string>();

function lowerName(raw: string): string {
  let v = LOWER.get(raw);
  if (v === undefined) {
    v = raw.toLowerCase();
    if (LOWER.size < 1024) LOWER.set(raw, v);
  }
  return v;
}

/**
 * Index of the CRLF ending the line at `pos` (the head's end `n` counts as one).
 * A bare CR or LF inside the line is caught by the per-character checks of
 * the name, value, request line and status line scans.
 */
function lineEnd(text: string, pos: number, n: number): number {
  const i = text.indexOf('\r\n', pos);
  return i < 0 || i > n ? n : i;
}

/**
 * Header names peers send on almost every message, by length. A name matched here
 * (case-insensitively, in place) is this constant, already internalised: no substring,
 * no lower-casing, and a cheap property key.
 */
const KNOWN: string[][] = [];
const KNOWN_BYTES: Uint8Array[][] = [];
for (const name of [
  'te', 'date', 'etag', 'host', 'vary', 'range', 'accept', 'cookie', 'expect', 'origin', 'pragma', 'server', 'upgrade',
  'referer', 'location', 'keep-alive', 'connection', 'set-cookie', 'user-agent', 'traceparent', 'grpc-status',
  'x-request-id', 'content-type', 'grpc-message', 'cache-control', 'authorization', 'accept-ranges', 'if-none-match',
  'last-modified', 'content-length', 'accept-encoding', 'accept-language', 'x-forwarded-for', 'content-encoding',
  'x-forwarded-proto', 'transfer-encoding', 'if-modified-since', 'x-envoy-attempt-count', 'x-content-type-options',
  'strict-transport-security', 'x-envoy-upstream-service-time', 'x-envoy-expected-rq-timeout-ms',
  'access-control-allow-origin',
]) {
  (KNOWN[name.length] ??= []).push(name);
  (KNOWN_BYTES[name.length] ??= []).push(Buffer.from(name, 'latin1'));
}

/**
 * `b[s, e)` (tchars only, checked by the caller) as a known lower-case name, or undefined.
 * OR-ing 0x20 folds A-Z onto a-z; no other tchar folds onto a letter, digit or '-'.
 */
function knownName(b: Uint8Array, s: number, e: number): string | undefined {
  const len = e - s;
  const list = KNOWN_BYTES[len];
  if (list === undefined) return undefined;
  for (let k = 0; k < list.length; k++) {
    const cand = list[k];
    let i = 0;
    while (i < len && (b[s + i] | 0x20) === cand[i]) i++;
    if (i === len) return KNOWN[len][k];
  }
  return undefined;
}

/** Whether the comma-separated list `v` has the lower-case token `lower` (repeated fields are combined). */
function hasToken(v: string, lower: string): boolean {
  if (v.indexOf(',') < 0) return false;
  for (const t of v.split(',')) if (sameLower(t, lower)) return true;
  return false;
}

/** Whether `v` equals the lower-case token `lower`, ignoring ASCII case (and OWS around it, as trimOws does). */
function sameLower(v: string, lower: string): boolean {
  const t = v.length === lower.length ? v : trimOws(v);
  if (t.length !== lower.length) return false;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if ((c >= 65 && c <= 90 ? c | 0x20 : c) !== lower.charCodeAt(i)) return false;
  }
  return true;
}

/** 1 to 15 decimal digits, else -1. */
function parseDigits(v: string): number {
  if (v.length === 0 || v.length > 15) return -1;
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    const d = v.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/** Whether `c` is a tchar (RFC 9110 §5.6.2), what a method or header name is made of. */
export function isTokenChar(c: number): boolean {
  return c < 128 && TCHAR[c] !== 0;
}

/** Whether `line` (without its CRLF) is a request line this codec accepts. */
export function isRequestLine(line: string): boolean {
  return requestLine(latin1Bytes(line, line.length), line, line.length, emptyHead());
}

/** `METHOD SP target SP HTTP/1.x`. */
function requestLine(b: Uint8Array, text: string, eol: number, head: Head): boolean {
  let i = 0;
  for (; i < eol; i++) {
    const c = b[i];
    if (c === SP) break;
    if (c >= 128 || TCHAR[c] === 0) return false;
  }
  if (i === 0 || i === eol) return false;
  head.method = text.slice(0, i);
  const ts = i + 1;
  let j = ts;
  for (; j < eol; j++) {
    const c = b[j];
    if (c === SP) break;
    if (c < 33 || c === 127) return false;
  }
  if (j === ts || eol - j !== 9 || !text.startsWith(' HTTP/1.', j)) return false;
  const minor = b[eol - 1];
  if (minor !== 48 && minor !== 49) return false;
  head.target = text.slice(ts, j);
  head.versionMinor = minor - 48;
  return true;
}

/** `HTTP/1.x SP 3DIGIT [SP reason]`. */
function statusLine(b: Uint8Array, text: string, eol: number, head: Head): boolean {
  if (eol < 12 || !text.startsWith('HTTP/1.', 0) || b[8] !== SP) return false;
  const minor = b[7];
  if (minor !== 48 && minor !== 49) return false;
  const status = parseDigits(text.slice(9, 12));
  if (status < 100 || status > 999) return false;
  if (eol > 12 && b[12] !== SP) return false;
  for (let i = 13; i < eol; i++) { const c = b[i]; if ((c < SP && c !== HTAB) || c === 127) return false; }
  head.versionMinor = minor - 48;
  head.status = status;
  head.reason = eol > 13 ? text.slice(13, eol) : '';
  return true;
}

/** Index just past the CRLFCRLF that ends a head starting at `from`, or -1. */
export function findHeadEnd(buf: Buffer, from: number): number {
  const i = buf.indexOf('\r\n\r\n', from, 'latin1');
  return i < 0 ? -1 : i + 4;
}

/** Serialises a header map for the wire (names are already lower case). */
export function serializeHeaders(h: Record<string, string | string[] | number | undefined>): string {
  let out = '';
  for (const k in h) {
    const v = h[k];
    if (v === undefined) continue;
    if (typeof v === 'object') { for (let i = 0; i < v.length; i++) out += k + ': ' + v[i] + '\r\n'; }
    else out += k + ': ' + v + '\r\n';
  }
  return out;
}
