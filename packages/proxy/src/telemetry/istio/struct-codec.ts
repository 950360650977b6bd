/**
 * google.protobuf.Struct / Value / Any in protobuf binary, as Istio's metadata exchange
 * carries node metadata (HTTP: base64 of a Struct; TCP: an Any holding a Struct).
 * Field numbers: Struct.fields=1 (map entry key=1, value=2); Value null=1, number=2 (double),
 * string=3, bool=4, struct=5, list=6; ListValue.values=1; Any type_url=1, value=2.
 * Map entries are written sorted by key (deterministic, as Istio serializes them).
 */
export type JsonValue = null | number | string | boolean | JsonValue[] | { [k: string]: JsonValue };
export type JsonStruct = { [k: string]: JsonValue };

export const STRUCT_TYPE_URL = 'type.googleapis.com/google.protobuf.Struct';

class Writer {
  private buf = Buffer.allocUnsafe(256);
  len = 0;
  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
  varint(v: number): void {
    this.ensure(10);
    while (v > 0x7f) { this.buf[this.len++] = (v & 0x7f) | 0x80; v = Math.floor(v / 128); }
    this.buf[this.len++] = v;
  }
  tag(field: number, wire: number): void { this.varint((field << 3) | wire); }
  bytes(field: number, b: Buffer): void { this.tag(field, 2); this.varint(b.length); this.ensure(b.length); b.copy(this.buf, this.len); this.len += b.length; }
  string(field: number, s: string): void { this.bytes(field, Buffer.from(s, 'utf8')); }
  double(field: number, v: number): void { this.tag(field, 1); this.ensure(8); this.buf.writeDoubleLE(v, this.len); this.len += 8; }
  finish(): Buffer { return this.buf.subarray(0, this.len); }
}

function encodeValue(v: JsonValue): Buffer {
  const w = new Writer();
  if (v === null) { w.tag(1, 0); w.varint(0); }
  else if (typeof v === 'number') w.double(2, v);
  else if (typeof v === 'string') w.string(3, v);
  else if (typeof v === 'boolean') { w.tag(4, 0); w.varint(v ? 1 : 0); }
  else if (Array.isArray(v)) {
    const list = new Writer();
    for (const item of v) list.bytes(1, encodeValue(item));
    w.bytes(6, list.finish());
  } else w.bytes(5, encodeStruct(v));
  return w.finish();
}

export function encodeStruct(s: JsonStruct): Buffer {
  const w = new Writer();
  for (const key of Object.keys(s).sort()) {
    const v = s[key];
    if (v === undefined) continue;
    const entry = new Writer();
    entry.string(1, key);
    entry.bytes(2, encodeValue(v));
    w.bytes(1, entry.finish());
  }
  return w.finish();
}

export function encodeAny(typeUrl: string, value: Buffer): Buffer {
  const w = new Writer();
  w.string(1, typeUrl);
  w.bytes(2, value);
  return w.finish();
}

/** A malformed message: callers treat the peer's metadata as absent. */
export class StructDecodeError extends Error {}

class Reader {
  readonly buf: Buffer;
  pos: number;
  readonly end: number;
  constructor(buf: Buffer, start = 0, end = buf.length) { this.buf = buf; this.pos = start; this.end = end; }
  get done(): boolean { return this.pos >= this.end; }
  varint(): number {
    let result = 0, mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new StructDecodeError('truncated varint');
      const b = this.buf[this.pos++];
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 128;
    }
    throw new StructDecodeError('varint too long');
  }
  /** The bounds of a length-delimited field's payload. */
  sub(): Reader {
    const n = this.varint();
    if (this.pos + n > this.end) throw new StructDecodeError('truncated field');
    const r = new Reader(this.buf, this.pos, this.pos + n);
    this.pos += n;
    return r;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.sub();
    else if (wire === 5) this.pos += 4;
    else throw new StructDecodeError(`unsupported wire type ${wire}`);
    if (this.pos > this.end) throw new StructDecodeError('truncated field');
  }
  text(): string { const r = this.sub(); return r.buf.toString('utf8', r.pos, r.end); }
}

function decodeValue(r: Reader, depth: number): JsonValue {
  if (depth > 32) throw new StructDecodeError('nested too deeply');
  let v: JsonValue = null;
  while (!r.done) {
    const tag = r.varint();
    const field = tag >>> 3, wire = tag & 7;
    if (field === 1 && wire === 0) { r.varint(); v = null; }
    else if (field === 2 && wire === 1) {
      if (r.pos + 8 > r.end) throw new StructDecodeError('truncated double');
      v = r.buf.readDoubleLE(r.pos); r.pos += 8;
    } else if (field === 3 && wire === 2) v = r.text();
    else if (field === 4 && wire === 0) v = r.varint() !== 0;
    else if (field === 5 && wire === 2) v = decodeStructFrom(r.sub(), depth + 1);
    else if (field === 6 && wire === 2) {
      const list: JsonValue[] = [];
      const lr = r.sub();
      while (!lr.done) {
        const t = lr.varint();
        if (t >>> 3 === 1 && (t & 7) === 2) list.push(decodeValue(lr.sub(), depth + 1)); else lr.skip(t & 7);
      }
      v = list;
    } else r.skip(wire);
  }
  return v;
}

function decodeStructFrom(r: Reader, depth: number): JsonStruct {
  const out: JsonStruct = {};
  while (!r.done) {
    const tag = r.varint();
    if (tag >>> 3 !== 1 || (tag & 7) !== 2) { r.skip(tag & 7); continue; }
    const entry = r.sub();
    let key = '';
    let value: JsonValue = null;
    while (!entry.done) {
      const t = entry.varint();
      if (t >>> 3 === 1 && (t & 7) === 2) key = entry.text();
      else if (t >>> 3 === 2 && (t & 7) === 2) value = decodeValue(entry.sub(), depth);
      else entry.skip(t & 7);
    }
    out[key] = value;
  }
  return out;
}

export function decodeStruct(buf: Buffer): JsonStruct {
  return decodeStructFrom(new Reader(buf), 0);
}

export function decodeAny(buf: Buffer): { typeUrl: string; value: Buffer } {
  const r = new Reader(buf);
  let typeUrl = '';
  let value: Buffer = Buffer.alloc(0);
  while (!r.done) {
    const tag = r.varint();
    if (tag >>> 3 === 1 && (tag & 7) === 2) typeUrl = r.text();
    else if (tag >>> 3 === 2 && (tag & 7) === 2) { const s = r.sub(); value = s.buf.subarray(s.pos, s.end); }
    else r.skip(tag & 7);
  }
  return { typeUrl, value };
}
