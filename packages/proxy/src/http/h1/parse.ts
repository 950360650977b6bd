/**
 * HTTP/1.1 message heads (RFC 9112), parsed strictly: anything a smuggling
 * attack could use (obs-fold, bare CR/LF, whitespace before the colon, TE with
 * CL, bad Content-Length) is an error, never a guess.
 */
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

/** Why a head was refused; the server maps these to 400 / 431 / 501. */
export type HeadError = 'bad-request' | 'too-many-headers' | 'bad-transfer-encoding';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[\0\r\n\x7f]/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^\s\0]+) HTTP\/1\.([01])$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/;
const DIGITS = /^\d{1,15}$/;

/** Parses `buf[start, end)` (the head without its final CRLFCRLF). */
export function parseHead(buf: Buffer, start: number, end: number, isRequest: boolean, maxHeaders: number): Head | HeadError {
  const text = buf.toString('latin1', start, end);
  const lines = text.split('\r\n');
  const first = lines[0];
  const head: Head = {
    method: '', target: '', status: 0, reason: '', versionMinor: 1, headers: {}, headerCount: lines.length - 1,
    contentLength: -1, chunked: false, close: false, upgrade: false, expectContinue: false,
  };
  if (isRequest) {
    const m = REQUEST_LINE.exec(first);
    if (!m) return 'bad-request';
    head.method = m[1];
    head.target = m[2];
    head.versionMinor = m[3] === '0' ? 0 : 1;
  } else {
    const m = STATUS_LINE.exec(first);
    if (!m) return 'bad-request';
    head.versionMinor = m[1] === '0' ? 0 : 1;
    head.status = Number(m[2]);
    head.reason = m[3] ?? '';
  }
  if (head.headerCount > maxHeaders) return 'too-many-headers';
  const headers = head.headers;
  let keepAlive = false, connectionUpgrade = false, te = '';
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(':');
    if (colon <= 0) return 'bad-request';
    const rawName = line.slice(0, colon);
    if (!TOKEN.test(rawName)) return 'bad-request';
    const raw = line.slice(colon + 1);
    // Check before trimming: String.trim would also eat a smuggled bare CR/LF at the edges.
    if (BAD_VALUE.test(raw)) return 'bad-request';
    const value = trimOws(raw);
    const name = rawName.toLowerCase();
    const prev = headers[name];
    if (prev === undefined) headers[name] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else headers[name] = [prev, value];
    switch (name) {
      case 'content-length': {
        if (!DIGITS.test(value)) return 'bad-request';
        const n = Number(value);
        if (head.contentLength >= 0 && head.contentLength !== n) return 'bad-request';
        head.contentLength = n;
        break;
      }
      case 'transfer-encoding': te = te ? `${te}, ${value}` : value; break;
      case 'connection':
        for (const token of value.toLowerCase().split(',')) {
          const t = trimOws(token);
          if (t === 'close') head.close = true;
          else if (t === 'keep-alive') keepAlive = true;
          else if (t === 'upgrade') connectionUpgrade = true;
        }
        break;
      case 'expect': if (value.toLowerCase() === '100-continue') head.expectContinue = true; break;
    }
  }
  if (te) {
    // Only "chunked" as the final coding is understood; with Content-Length too it is a smuggling vector.
    const codings = te.toLowerCase().split(',').map((s) => s.trim()).filter(Boolean);
    if (codings[codings.length - 1] !== 'chunked' || codings.length > 1) return 'bad-transfer-encoding';
    if (head.contentLength >= 0) return 'bad-request';
    head.chunked = true;
  }
  if (head.versionMinor === 0 && !keepAlive) head.close = true;
  head.upgrade = connectionUpgrade && headers.upgrade !== undefined;
  return head;
}

/** Trims optional whitespace (SP / HTAB only, RFC 9110 §5.6.3). */
function trimOws(s: string): string {
  let a = 0, b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

/** Index just past the CRLFCRLF that ends a head starting at `from`, or -1. */
export function findHeadEnd(buf: Buffer, from: number): number {
  const i = buf.indexOf('\r\n\r\n', from, 'latin1');
  return i < 0 ? -1 : i + 4;
}

const St = { SIZE: 0, EXT: 1, SIZE_LF: 2, DATA: 3, DATA_CR: 4, DATA_LF: 5, TRAILER: 6, DONE: 7 } as const;

/**
 * Streaming chunked-encoding decoder. `push` returns the number of bytes of
 * `buf` it consumed (all of them unless the message ended inside `buf`), or -1
 * on a framing error. Data slices go to `onData` without copying.
 */
export class ChunkedDecoder {
  private state: number = St.SIZE;
  private size = 0;
  private sizeDigits = 0;
  private trailerLine = '';
  private trailerBytes = 0;
  trailers: Headers | undefined;
  done = false;

  push(buf: Buffer, start: number, onData: (chunk: Buffer) => void): number {
    let i = start;
    const n = buf.length;
    while (i < n) {
      switch (this.state) {
        case St.SIZE: {
          const c = buf[i];
          const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
          if (d >= 0) {
            if (++this.sizeDigits > 15) return -1;
            this.size = this.size * 16 + d;
            i++;
          } else if (this.sizeDigits === 0) return -1;
          else if (c === 13) { this.state = St.SIZE_LF; i++; }
          else if (c === 59 || c === 32 || c === 9) { this.state = St.EXT; i++; }
          else return -1;
          break;
        }
        case St.EXT: {
          const cr = buf.indexOf(13, i);
          const lf = buf.indexOf(10, i);
          // A bare LF inside an extension is a known smuggling vector.
          if (lf >= 0 && (cr < 0 || lf < cr)) return -1;
          if (cr < 0) { i = n; break; }
          i = cr + 1;
          this.state = St.SIZE_LF;
          break;
        }
        case St.SIZE_LF:
          if (buf[i++] !== 10) return -1;
          this.sizeDigits = 0;
          this.state = this.size === 0 ? St.TRAILER : St.DATA;
          break;
        case St.DATA: {
          const take = Math.min(this.size, n - i);
          onData(buf.subarray(i, i + take));
          i += take;
          this.size -= take;
          if (this.size === 0) this.state = St.DATA_CR;
          break;
        }
        case St.DATA_CR:
          if (buf[i++] !== 13) return -1;
          this.state = St.DATA_LF;
          break;
        case St.DATA_LF:
          if (buf[i++] !== 10) return -1;
          this.state = St.SIZE;
          break;
        case St.TRAILER: {
          const lf = buf.indexOf(10, i);
          const end = lf < 0 ? n : lf + 1;
          this.trailerBytes += end - i;
          if (this.trailerBytes > 65536) return -1;
          this.trailerLine += buf.toString('latin1', i, end);
          i = end;
          if (lf < 0) break;
          const line = this.trailerLine;
          this.trailerLine = '';
          if (line === '\r\n') { this.state = St.DONE; this.done = true; return i - start; }
          if (!line.endsWith('\r\n')) return -1;
          const colon = line.indexOf(':');
          if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) return -1;
          const value = line.slice(colon + 1, -2);
          if (BAD_VALUE.test(value)) return -1;
          (this.trailers ??= {})[line.slice(0, colon).toLowerCase()] = trimOws(value);
          break;
        }
        default:
          return i - start;
      }
    }
    return i - start;
  }
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
