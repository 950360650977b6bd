/**
 * Incremental TLS ClientHello parser for the tls_inspector listener filter.
 *
 * Called with all bytes read so far on a new connection (re-parsing from the start each time is
 * cheap: a ClientHello is one or two KiB). It walks the handshake stream across record
 * boundaries with a forward-only cursor over `buf`, so a hello split over several records needs no
 * reassembly buffer; the only allocations are the strings and object of a 'tls' result.
 *
 * Checks follow what Envoy's tls_inspector (BoringSSL) treats as "not a ClientHello" closely
 * enough: any malformed record or hello framing, or a malformed server_name extension, is
 * 'not-tls'. A malformed ALPN extension is ignored (BoringSSL leaves it to the handshake).
 */

export type ClientHelloResult =
  | { readonly state: 'need-more' }
  /** `tooLarge`: no complete hello within MAX_CLIENT_HELLO bytes. Envoy closes such connections. */
  | { readonly state: 'not-tls'; readonly tooLarge: boolean }
  | { readonly state: 'tls'; readonly serverName: string; readonly alpn: string[] };

/** Envoy's TLS_MAX_CLIENT_HELLO: tls_inspector gives up after this many bytes. */
export const MAX_CLIENT_HELLO = 64 * 1024;

const NEED_MORE: ClientHelloResult = Object.freeze({ state: 'need-more' });
const NOT_TLS: ClientHelloResult = Object.freeze({ state: 'not-tls', tooLarge: false });
const TOO_LARGE: ClientHelloResult = Object.freeze({ state: 'not-tls', tooLarge: true });

const RECORD_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
const MAX_PLAINTEXT_RECORD = 16384;
const EXT_SERVER_NAME = 0;
const EXT_ALPN = 16;
const MAX_HOST_NAME = 255;

/** Outcome of a cursor read: ok, ran out of bytes, or a framing error. */
const OK = 0, MORE = 1, BAD = 2;

/**
 * Forward-only reader over the handshake bytes inside TLS records. One module-level instance is
 * reused: parsing is synchronous, so no two parses interleave.
 */
class Cursor {
  buf: Buffer = Buffer.alloc(0);
  limit = 0; // bytes of buf we may look at
  pos = 0; // next byte in buf
  recEnd = 0; // end of the current record's payload in buf
  status = OK;

  reset(buf: Buffer): void {
    this.buf = buf;
    this.limit = Math.min(buf.length, MAX_CLIENT_HELLO);
    this.pos = 0;
    this.recEnd = 0;
    this.status = OK;
  }

  /** Makes pos point at a payload byte, stepping over record headers. False when stopped. */
  private ready(): boolean {
    while (this.pos >= this.recEnd) {
      if (this.status !== OK) return false;
      const p = this.recEnd;
      if (p + 5 > this.limit) {
        // Reject early on what we can already see, so plain text is not-tls from its first byte.
        if (p < this.limit && this.buf[p] !== RECORD_HANDSHAKE) return this.fail(BAD);
        if (p + 1 < this.limit && this.buf[p + 1] !== 3) return this.fail(BAD);
        return this.fail(MORE);
      }
      const b = this.buf;
      const len = (b[p + 3] << 8) | b[p + 4];
      if (b[p] !== RECORD_HANDSHAKE || b[p + 1] !== 3 || len > MAX_PLAINTEXT_RECORD) return this.fail(BAD);
      this.pos = p + 5;
      this.recEnd = p + 5 + len;
    }
    if (this.pos >= this.limit) return this.fail(MORE);
    return true;
  }

  private fail(status: number): false {
    if (this.status === OK) this.status = status;
    return false;
  }

  u8(): number {
    return this.ready() ? this.buf[this.pos++] : -1;
  }

  u16(): number {
    const hi = this.u8(), lo = this.u8();
    return lo < 0 ? -1 : (hi << 8) | lo;
  }

  u24(): number {
    const hi = this.u8(), rest = this.u16();
    return rest < 0 ? -1 : hi * 65536 + rest;
  }

  skip(n: number): boolean {
    while (n > 0) {
      if (!this.ready()) return false;
      const step = Math.min(n, this.recEnd - this.pos, this.limit - this.pos);
      this.pos += step;
      n -= step;
    }
    return true;
  }

  /** Reads n bytes as a latin1 string; `lower` folds ASCII upper case (Envoy keeps SNI lower case). */
  str(n: number, lower: boolean): string {
    if (this.ready() && this.pos + n <= this.recEnd && this.pos + n <= this.limit) {
      const start = this.pos;
      this.pos += n;
      let upper = false;
      for (let i = start; i < this.pos; i++) if (this.buf[i] >= 65 && this.buf[i] <= 90) upper = true;
      const s = this.buf.toString('latin1', start, this.pos);
      return lower && upper ? asciiLower(s) : s;
    }
    // Rare: the string straddles a record boundary.
    let s = '';
    for (let i = 0; i < n; i++) {
      const c = this.u8();
      if (c < 0) return '';
      s += String.fromCharCode(lower && c >= 65 && c <= 90 ? c + 32 : c);
    }
    return s;
  }
}

const cur = new Cursor();

function asciiLower(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += String.fromCharCode(c >= 65 && c <= 90 ? c + 32 : c);
  }
  return out;
}

/** Looks at the first bytes of a connection and says whether they are a complete TLS ClientHello. */
export function parseClientHello(buf: Buffer): ClientHelloResult {
  const c = cur;
  c.reset(buf);
  const r = parseHello(c);
  c.buf = EMPTY; // do not keep the connection's buffer alive
  return r;
}

const EMPTY = Buffer.alloc(0);

function stopped(c: Cursor): ClientHelloResult {
  if (c.status === BAD) return NOT_TLS;
  return c.buf.length >= MAX_CLIENT_HELLO ? TOO_LARGE : NEED_MORE;
}

function parseHello(c: Cursor): ClientHelloResult {
  const type = c.u8();
  if (type < 0) return stopped(c);
  if (type !== HANDSHAKE_CLIENT_HELLO) return NOT_TLS;
  const bodyLen = c.u24();
  if (bodyLen < 0) return stopped(c);
  // Bytes needed at least: the first record header plus the whole handshake message.
  if (5 + 4 + bodyLen > MAX_CLIENT_HELLO) return TOO_LARGE;
  // Lengths are checked before each read, so a short hello never reads into what follows it.
  // Smallest body: version, random, empty session id, one cipher suite, one compression method.
  if (bodyLen < 2 + 32 + 1 + 2 + 2 + 1 + 1) return NOT_TLS;
  let left = bodyLen; // bytes of the hello body not yet consumed

  // legacy_version, random
  const version = c.u16();
  if (version < 0) return stopped(c);
  if (version >>> 8 !== 3) return NOT_TLS;
  if (!c.skip(32)) return stopped(c);
  left -= 34;

  const sidLen = c.u8();
  if (sidLen < 0) return stopped(c);
  if (sidLen > 32 || left < 1 + sidLen + 2) return NOT_TLS;
  if (!c.skip(sidLen)) return stopped(c);
  left -= 1 + sidLen;

  const csLen = c.u16();
  if (csLen < 0) return stopped(c);
  if (csLen < 2 || (csLen & 1) !== 0 || left < 2 + csLen + 1) return NOT_TLS;
  if (!c.skip(csLen)) return stopped(c);
  left -= 2 + csLen;

  const cmLen = c.u8();
  if (cmLen < 0) return stopped(c);
  if (cmLen < 1 || left < 1 + cmLen) return NOT_TLS;
  if (!c.skip(cmLen)) return stopped(c);
  left -= 1 + cmLen;

  let serverName = '';
  let alpn: string[] = [];
  if (left === 0) return { state: 'tls', serverName, alpn }; // no extensions at all
  if (left < 2) return NOT_TLS;
  const extLen = c.u16();
  if (extLen < 0) return stopped(c);
  if (left !== 2 + extLen) return NOT_TLS;
  left = extLen;
  let sawSni = false, sawAlpn = false;
  while (left > 0) {
    if (left < 4) return NOT_TLS;
    const extType = c.u16(), len = c.u16();
    if (len < 0) return stopped(c);
    if (left < 4 + len) return NOT_TLS;
    left -= 4 + len;
    if (extType === EXT_SERVER_NAME) {
      if (sawSni) return NOT_TLS;
      sawSni = true;
      const name = readServerName(c, len);
      if (name === undefined) return stopped(c);
      if (name === null) return NOT_TLS;
      serverName = name;
    } else if (extType === EXT_ALPN) {
      if (sawAlpn) return NOT_TLS;
      sawAlpn = true;
      const list = readAlpn(c, len);
      if (list === undefined) return stopped(c);
      alpn = list;
    } else if (!c.skip(len)) {
      return stopped(c);
    }
  }
  return { state: 'tls', serverName, alpn };
}

/**
 * BoringSSL accepts exactly one host_name entry, 1..255 bytes, no NUL. Returns the name, null when
 * malformed, undefined when the cursor stopped.
 */
function readServerName(c: Cursor, len: number): string | null | undefined {
  if (len < 5) return c.skip(len) ? null : undefined;
  const listLen = c.u16();
  if (listLen < 0) return undefined;
  if (listLen !== len - 2) return c.skip(len - 2) ? null : undefined;
  const nameType = c.u8(), nameLen = c.u16();
  if (nameLen < 0) return undefined;
  if (nameType !== 0 || nameLen === 0 || nameLen > MAX_HOST_NAME || nameLen !== listLen - 3) {
    return c.skip(listLen - 3) ? null : undefined;
  }
  const name = c.str(nameLen, true);
  if (c.status !== OK) return undefined;
  return name.includes('\0') ? null : name;
}

/** Protocol names in client order; an empty list when the extension is malformed. */
function readAlpn(c: Cursor, len: number): string[] | undefined {
  if (len < 2) return c.skip(len) ? [] : undefined;
  const listLen = c.u16();
  if (listLen < 0) return undefined;
  let left = len - 2;
  if (listLen !== left || listLen < 2) return c.skip(left) ? [] : undefined;
  const out: string[] = [];
  let bad = false;
  while (left > 0) {
    const n = c.u8();
    if (n < 0) return undefined;
    left -= 1;
    if (n === 0 || n > left) {
      bad = true;
      break;
    }
    out.push(c.str(n, false));
    if (c.status !== OK) return undefined;
    left -= n;
  }
  if (bad) return c.skip(left) ? [] : undefined;
  return out;
}
