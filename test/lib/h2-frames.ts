// A raw HTTP/2 client for hostile-traffic tests: writes any frame (valid or not) over a plain
// socket and parses what comes back, so a test can assert the exact GOAWAY / RST_STREAM code.
// HPACK here is the minimum: literal fields without Huffman (encoding), and for responses only
// `:status` from the first header (static-table index or a literal with a Huffman-coded number).
import { connect, type Socket } from 'node:net';

export const FrameType = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;
export const ErrorCode = { NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, FLOW_CONTROL_ERROR: 3, SETTINGS_TIMEOUT: 4, STREAM_CLOSED: 5, FRAME_SIZE_ERROR: 6, REFUSED_STREAM: 7, CANCEL: 8, COMPRESSION_ERROR: 9, CONNECT_ERROR: 10, ENHANCE_YOUR_CALM: 11, INADEQUATE_SECURITY: 12, HTTP_1_1_REQUIRED: 13 } as const;
export const Setting = { HEADER_TABLE_SIZE: 1, ENABLE_PUSH: 2, MAX_CONCURRENT_STREAMS: 3, INITIAL_WINDOW_SIZE: 4, MAX_FRAME_SIZE: 5, MAX_HEADER_LIST_SIZE: 6 } as const;

const EMPTY = Buffer.alloc(0);
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** A received frame. DATA payloads are not kept (only their length), so a flood test does not hold them. */
export interface Frame { readonly type: number; readonly flags: number; readonly stream: number; readonly length: number; readonly payload: Buffer }

export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK integer with an N-bit prefix (RFC 7541 §5.1); `first` holds the pattern bits above the prefix. */
export function hpackInt(value: number, prefixBits: number, first = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([first | value]);
  const out = [first | max];
  let v = value - max;
  while (v >= 128) { out.push((v & 0x7f) | 0x80); v = Math.floor(v / 128); }
  out.push(v);
  return Buffer.from(out);
}

function hpackString(s: string | Buffer): Buffer {
  const b = typeof s === 'string' ? Buffer.from(s, 'latin1') : s;
  return Buffer.concat([hpackInt(b.length, 7), b]);
}

/** A literal field without indexing, new name (§6.2.2). */
export function literal(name: string, value: string | Buffer): Buffer {
  return Buffer.concat([Buffer.from([0]), hpackString(name), hpackString(value)]);
}

/** A literal field with incremental indexing, new name (§6.2.1): it enters the dynamic table at index 62. */
export function literalIndexed(name: string, value: string | Buffer): Buffer {
  return Buffer.concat([Buffer.from([0x40]), hpackString(name), hpackString(value)]);
}

/** An indexed field (§6.1): 62 is the newest dynamic-table entry. */
export function indexed(index: number): Buffer {
  return hpackInt(index, 7, 0x80);
}

/** A header block of literal fields: pseudo-headers first, as the caller lists them. */
export function headerBlock(fields: ReadonlyArray<readonly [string, string]>): Buffer {
  return Buffer.concat(fields.map(([n, v]) => literal(n, v)));
}

/** A GET for `path` on `authority` (http scheme). */
export function requestBlock(path: string, extra: ReadonlyArray<readonly [string, string]> = [], method = 'GET', authority = 'localhost'): Buffer {
  return headerBlock([[':method', method], [':scheme', 'http'], [':path', path], [':authority', authority], ...extra]);
}

export function settingsPayload(entries: ReadonlyArray<readonly [number, number]>): Buffer {
  const b = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, v], i) => { b.writeUInt16BE(id, i * 6); b.writeUInt32BE(v, i * 6 + 2); });
  return b;
}

export interface GoAway { readonly lastStream: number; readonly code: number }

// Huffman codes of the digits (RFC 7541 Appendix B): enough to read a `:status` value.
const DIGIT_CODES: ReadonlyArray<readonly [number, number]> = [[0x0, 5], [0x1, 5], [0x2, 5], [0x19, 6], [0x1a, 6], [0x1b, 6], [0x1c, 6], [0x1d, 6], [0x1e, 6], [0x1f, 6]];
const STATIC_STATUS: Readonly<Record<number, number>> = { 8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500 };

function huffmanDigits(b: Buffer): string {
  let bits = '';
  for (const byte of b) bits += byte.toString(2).padStart(8, '0');
  let out = '';
  let i = 0;
  outer: while (i < bits.length) {
    for (let d = 0; d < DIGIT_CODES.length; d++) {
      const [code, len] = DIGIT_CODES[d];
      if (i + len <= bits.length && parseInt(bits.slice(i, i + len), 2) === code) { out += String(d); i += len; continue outer; }
    }
    break; // the rest is EOS padding (all ones)
  }
  return out;
}

/** `:status` of a response header block when it is the first field (nghttp2 always puts it first). */
export function statusOf(block: Buffer): number | undefined {
  const b0 = block[0];
  if (b0 & 0x80) return STATIC_STATUS[b0 & 0x7f];
  // Literal with indexed name 8 (":status"): incremental indexing (0x48), without (0x08), never (0x18).
  if (b0 !== 0x48 && b0 !== 0x08 && b0 !== 0x18) return undefined;
  const len = block[1] & 0x7f;
  const value = block.subarray(2, 2 + len);
  return Number(block[1] & 0x80 ? huffmanDigits(value) : value.toString('latin1'));
}

/**
 * One raw HTTP/2 connection. The preface and an initial SETTINGS are sent on connect; the
 * server's SETTINGS are acknowledged automatically unless `ackSettings` is false.
 */
export class RawH2 {
  readonly socket: Socket;
  readonly frames: Frame[] = [];
  closed = false;
  /** Bytes the peer sent, all frames included. */
  received = 0;
  private buf: Buffer = Buffer.alloc(0);
  private waiters: Array<() => void> = [];
  private readonly ackSettings: boolean;

  private constructor(socket: Socket, ackSettings: boolean) {
    this.socket = socket;
    this.ackSettings = ackSettings;
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', () => { /* a reset is an outcome the test looks at */ });
    socket.on('close', () => { this.closed = true; this.wake(); });
  }

  static open(port: number, opts: { settings?: ReadonlyArray<readonly [number, number]>; ackSettings?: boolean; host?: string } = {}): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: opts.host ?? '127.0.0.1', noDelay: true });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        const c = new RawH2(socket, opts.ackSettings ?? true);
        socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, settingsPayload(opts.settings ?? []))]));
        resolve(c);
      });
    });
  }

  private onData(d: Buffer): void {
    this.received += d.length;
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) break;
      const type = this.buf[3];
      const payload = type === FrameType.DATA ? EMPTY : Buffer.from(this.buf.subarray(9, 9 + len));
      const f: Frame = { type, flags: this.buf[4], stream: this.buf.readUInt32BE(5) & 0x7fffffff, length: len, payload };
      this.buf = this.buf.subarray(9 + len);
      this.frames.push(f);
      if (f.type === FrameType.SETTINGS && !(f.flags & Flag.ACK) && this.ackSettings && !this.socket.destroyed) this.write(frame(FrameType.SETTINGS, Flag.ACK, 0));
    }
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  write(b: Buffer): boolean {
    if (this.socket.destroyed) return false;
    return this.socket.write(b);
  }

  headers(stream: number, block: Buffer, opts: { endStream?: boolean; endHeaders?: boolean } = {}): boolean {
    const flags = (opts.endStream ?? true ? Flag.END_STREAM : 0) | (opts.endHeaders ?? true ? Flag.END_HEADERS : 0);
    return this.write(frame(FrameType.HEADERS, flags, stream, block));
  }

  continuation(stream: number, block: Buffer, endHeaders: boolean): boolean {
    return this.write(frame(FrameType.CONTINUATION, endHeaders ? Flag.END_HEADERS : 0, stream, block));
  }

  /** A header block split over HEADERS and CONTINUATION frames of at most `maxFrame` bytes. */
  headersSplit(stream: number, block: Buffer, endStream = true, maxFrame = 16384): void {
    const parts: Buffer[] = [];
    for (let off = 0; off < block.length; off += maxFrame) parts.push(block.subarray(off, off + maxFrame));
    parts.forEach((p, i) => {
      const last = i === parts.length - 1;
      if (i === 0) this.headers(stream, p, { endStream, endHeaders: last });
      else this.continuation(stream, p, last);
    });
  }

  data(stream: number, payload: Buffer, endStream = false): boolean {
    return this.write(frame(FrameType.DATA, endStream ? Flag.END_STREAM : 0, stream, payload));
  }

  rst(stream: number, code: number = ErrorCode.CANCEL): boolean {
    const p = Buffer.alloc(4);
    p.writeUInt32BE(code);
    return this.write(frame(FrameType.RST_STREAM, 0, stream, p));
  }

  windowUpdate(stream: number, increment: number): boolean {
    const p = Buffer.alloc(4);
    p.writeUInt32BE(increment);
    return this.write(frame(FrameType.WINDOW_UPDATE, 0, stream, p));
  }

  /** Resolves when `pred` holds over the frames so far (or the socket closed); rejects after `timeoutMs`. */
  async waitFor<T>(pred: (c: RawH2) => T | undefined | false, timeoutMs = 5000, what = 'condition'): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = pred(this);
      if (v !== undefined && v !== false) return v;
      if (this.closed) {
        const again = pred(this);
        if (again !== undefined && again !== false) return again;
        throw new Error(`connection closed before ${what}; frames: ${this.describe()}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; frames: ${this.describe()}`);
      await new Promise<void>((r) => { const t = setTimeout(r, left); this.waiters.push(() => { clearTimeout(t); r(); }); });
    }
  }

  /** The first GOAWAY the server sent (with `code`: the first with that error code). */
  goaway(code?: number): GoAway | undefined {
    const f = this.frames.find((x) => x.type === FrameType.GOAWAY && (code === undefined || x.payload.readUInt32BE(4) === code));
    return f ? { lastStream: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) } : undefined;
  }

  /** The RST_STREAM code the server sent on `stream`, if any. */
  rstCode(stream: number): number | undefined {
    const f = this.frames.find((x) => x.type === FrameType.RST_STREAM && x.stream === stream);
    return f ? f.payload.readUInt32BE(0) : undefined;
  }

  /** The response frames of one stream. */
  streamFrames(stream: number): Frame[] {
    return this.frames.filter((f) => f.stream === stream);
  }

  /** Waits for the connection to close; true if it did within `timeoutMs`. */
  async waitClosed(timeoutMs = 5000): Promise<boolean> {
    try { await this.waitFor((c) => c.closed, timeoutMs, 'close'); return true; } catch { return this.closed; }
  }

  describe(): string {
    const names = Object.fromEntries(Object.entries(FrameType).map(([k, v]) => [v, k]));
    return this.frames.slice(-12).map((f) => `${names[f.type] ?? f.type}(s${f.stream},f${f.flags}${f.type === FrameType.GOAWAY || f.type === FrameType.RST_STREAM ? `,code ${f.payload.readUInt32BE(f.type === FrameType.GOAWAY ? 4 : 0)}` : ''})`).join(' ');
  }

  close(): void { this.socket.destroy(); }
}
