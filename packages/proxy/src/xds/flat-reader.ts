/**
 * A protobufjs reader whose validated (proto3) strings come out flat. protobufjs reads a UTF-8
 * checked string under 64 bytes by appending 8 characters at a time: a chain of cons strings
 * (~300 bytes of heap for a 45-character cluster name instead of ~60). 20,000 clusters hold
 * ~75 such strings each, and the garbage of building them is what the young-generation GC copies.
 * Here ASCII (every name, address and version an istiod sends) is sliced from the buffer in one
 * step; anything else goes through the same strict TextDecoder protobufjs uses.
 */
import protobuf from 'protobufjs';

const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A protobuf string's bytes as one flat string: ASCII sliced in one step, the rest strictly UTF-8 decoded (throws on invalid bytes). */
export function flatString(buf: Buffer, start: number, end: number): string {
  for (let i = start; i < end; i++) {
    if (buf[i] >= 0x80) return strict.decode(buf.subarray(start, end));
  }
  return buf.toString('latin1', start, end);
}

class FlatStringReader extends protobuf.BufferReader {
  override stringVerify(): string {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.len) throw new RangeError(`index out of range: ${start} + ${length} > ${this.len}`);
    this.pos = end;
    return flatString(this.buf as Buffer, start, end);
  }
}

/** A protobuf string field's bytes (a length-delimited entry) as a string. */
export function utf8String(bytes: Uint8Array): string {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return flatString(buf, 0, buf.length);
}

/** A reader over `bytes` (no copy) for `Type.decode`. */
export function readerOf(bytes: Uint8Array): protobuf.Reader {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return new FlatStringReader(buf);
}
