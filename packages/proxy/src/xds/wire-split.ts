import { TimeSlice } from '../core/time-slice.ts';

/**
 * Splits a protobuf message into the entries of one repeated, length-delimited field, left as
 * bytes (offsets into the message; a view is made when an entry is read), and the rest of the
 * message (copied out, for an ordinary decode). A DiscoveryResponse with 20,000 resources then
 * costs one walk over its tags up front, allocating nothing per entry but two offsets, and each
 * resource is decoded when its turn comes, in time slices.
 */

/** Entries of the split field: `at(i)` is a view into the message (no copy). */
export class FieldEntries {
  private readonly buf: Uint8Array;
  /** Start and end of each entry, two numbers an entry (a packed array of small integers). */
  private readonly bounds: number[];

  constructor(buf: Uint8Array, bounds: number[]) {
    this.buf = buf;
    this.bounds = bounds;
  }

  get length(): number {
    return this.bounds.length / 2;
  }

  at(i: number): Uint8Array {
    return this.buf.subarray(this.bounds[2 * i], this.bounds[2 * i + 1]);
  }
}

/** Where the field after the last varint read starts (varint returns the value only: no tuple per call). */
let after = 0;

/** A varint at `pos`: its value (exact below 2^53); sets `after`. */
function varint(buf: Uint8Array, pos: number): number {
  let value = 0;
  for (let shift = 0, i = pos; i < buf.length && shift < 64; shift += 7, i++) {
    const b = buf[i];
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) { after = i + 1; return value; }
  }
  throw new Error(`invalid varint at offset ${pos}`);
}

/** The walk over a message's fields, resumable: `step` reads at most `n` more fields. */
class FieldWalk {
  private readonly buf: Uint8Array;
  private readonly field: number;
  private pos = 0;
  private readonly bounds: number[] = [];
  private readonly restParts: Uint8Array[] = [];

  constructor(buf: Uint8Array, field: number) {
    this.buf = buf;
    this.field = field;
  }

  /** Reads up to `n` fields; true when the message is done. */
  step(n: number): boolean {
    const buf = this.buf;
    let pos = this.pos;
    for (let k = 0; k < n && pos < buf.length; k++) {
      const start = pos;
      const tag = varint(buf, pos);
      const number = Math.floor(tag / 8);
      const wireType = tag & 7;
      let end: number;
      let body = after;
      if (wireType === 0) { varint(buf, after); end = after; }
      else if (wireType === 1) end = after + 8;
      else if (wireType === 5) end = after + 4;
      else if (wireType === 2) {
        const length = varint(buf, after);
        body = after;
        end = after + length;
      } else throw new Error(`unsupported wire type ${wireType} (field ${number}) at offset ${start}`);
      if (number === 0) throw new Error(`invalid field number 0 at offset ${start}`);
      if (end > buf.length) throw new Error(`field ${number} at offset ${start} runs past the end (${end} > ${buf.length})`);
      if (number === this.field && wireType === 2) this.bounds.push(body, end);
      else this.restParts.push(buf.subarray(start, end));
      pos = end;
    }
    this.pos = pos;
    return pos >= buf.length;
  }

  result(): { entries: FieldEntries; rest: Uint8Array } {
    const parts = this.restParts;
    return { entries: new FieldEntries(this.buf, this.bounds), rest: parts.length === 1 ? parts[0] : Buffer.concat(parts) };
  }
}

/** Fields walked between two looks at the slice's clock. */
const FIELDS_PER_CHECK = 512;

/**
 * The split, in time slices: the walk over a 20,000-resource SotW CDS response took one 24 ms task
 * at the start of the push when it ran in one go (the loop runs in V8's interpreter the first time).
 */
export async function splitRepeated(buf: Uint8Array, field: number, slice = new TimeSlice()): Promise<{ entries: FieldEntries; rest: Uint8Array }> {
  const walk = new FieldWalk(buf, field);
  while (!walk.step(FIELDS_PER_CHECK)) if (slice.due) await slice.next();
  return walk.result();
}
