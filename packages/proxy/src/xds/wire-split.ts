/**
 * Splits a protobuf message into the entries of one repeated, length-delimited field, left as
 * bytes (views into the message, not copies), and the rest of the message (copied out, for an
 * ordinary decode). A DiscoveryResponse with 20,000 resources then costs one walk over its tags
 * up front, and each resource is decoded when its turn comes, in time slices.
 */

/** A varint at `pos`: its value (exact below 2^53) and where the next field starts. */
function varint(buf: Uint8Array, pos: number): [number, number] {
  let value = 0;
  for (let shift = 0, i = pos; i < buf.length && shift < 64; shift += 7, i++) {
    const b = buf[i];
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return [value, i + 1];
  }
  throw new Error(`invalid varint at offset ${pos}`);
}

export function splitRepeated(buf: Uint8Array, field: number): { entries: Uint8Array[]; rest: Uint8Array } {
  const entries: Uint8Array[] = [];
  const restParts: Uint8Array[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    const [tag, afterTag] = varint(buf, pos);
    const number = Math.floor(tag / 8);
    const wireType = tag & 7;
    let end: number;
    let body = afterTag;
    if (wireType === 0) end = varint(buf, afterTag)[1];
    else if (wireType === 1) end = afterTag + 8;
    else if (wireType === 5) end = afterTag + 4;
    else if (wireType === 2) {
      const [length, afterLength] = varint(buf, afterTag);
      body = afterLength;
      end = afterLength + length;
    } else throw new Error(`unsupported wire type ${wireType} (field ${number}) at offset ${start}`);
    if (number === 0) throw new Error(`invalid field number 0 at offset ${start}`);
    if (end > buf.length) throw new Error(`field ${number} at offset ${start} runs past the end (${end} > ${buf.length})`);
    if (number === field && wireType === 2) entries.push(buf.subarray(body, end));
    else restParts.push(buf.subarray(start, end));
    pos = end;
  }
  return { entries, rest: restParts.length === 1 ? restParts[0] : Buffer.concat(restParts) };
}
