/**
 * The parts of the DNS wire format (RFC 1035) the proxy needs: read a query's header and
 * first question, write answers (A, AAAA, CNAME) for names it owns, walk a forwarded
 * response's records to age their TTLs, and set the transaction id. Anything malformed
 * throws DnsFormatError; the caller answers FORMERR or drops it.
 */

export const TYPE = { A: 1, CNAME: 5, SOA: 6, OPT: 41, AAAA: 28 } as const;
export const CLASS_IN = 1;
export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
const HEADER = 12;
/** The classic UDP limit without EDNS. */
export const MIN_UDP_SIZE = 512;

export class DnsFormatError extends Error {}

export interface Question {
  /** Lower-cased, with the trailing dot (`reviews.default.svc.cluster.local.`). */
  readonly name: string;
  readonly type: number;
  readonly class: number;
}

export interface Query {
  readonly id: number;
  readonly flags: number;
  readonly question: Question | undefined;
  /** The question section exactly as sent (echoed back in replies). */
  readonly questionBytes: Buffer;
  /** EDNS0 UDP payload size the client advertised (0: no OPT record). */
  readonly ednsSize: number;
}

/** Reads a possibly compressed name at `off`; returns it (lower-cased, dotted) and the offset after it. */
export function readName(buf: Buffer, start: number): { name: string; next: number } {
  const labels: string[] = [];
  let off = start;
  let next = -1;
  let jumps = 0;
  let length = 0;
  for (;;) {
    if (off >= buf.length) throw new DnsFormatError('name runs past the message');
    const len = buf[off];
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= buf.length) throw new DnsFormatError('truncated compression pointer');
      if (++jumps > 32) throw new DnsFormatError('compression pointer loop');
      if (next < 0) next = off + 2;
      off = ((len & 0x3f) << 8) | buf[off + 1];
      continue;
    }
    if (len & 0xc0) throw new DnsFormatError('unsupported label type');
    off++;
    if (len === 0) break;
    if (off + len > buf.length) throw new DnsFormatError('label runs past the message');
    length += len + 1;
    if (length > 255) throw new DnsFormatError('name longer than 255 octets');
    labels.push(buf.toString('latin1', off, off + len).toLowerCase());
    off += len;
  }
  return { name: labels.length ? `${labels.join('.')}.` : '.', next: next < 0 ? off : next };
}

/** Skips one resource record; returns the offset of its TTL field and of the record's end. */
function skipRecord(buf: Buffer, off: number): { type: number; ttlAt: number; end: number; rdataAt: number } {
  const { next } = readName(buf, off);
  if (next + 10 > buf.length) throw new DnsFormatError('record header runs past the message');
  const type = buf.readUInt16BE(next);
  const rdlen = buf.readUInt16BE(next + 8);
  const end = next + 10 + rdlen;
  if (end > buf.length) throw new DnsFormatError('record data runs past the message');
  return { type, ttlAt: next + 4, end, rdataAt: next + 10 };
}

export function parseQuery(buf: Buffer): Query {
  if (buf.length < HEADER) throw new DnsFormatError('message shorter than a header');
  const id = buf.readUInt16BE(0);
  const flags = buf.readUInt16BE(2);
  const qd = buf.readUInt16BE(4);
  if (flags & 0x8000) throw new DnsFormatError('a response, not a query');
  let off = HEADER;
  let question: Question | undefined;
  let firstEnd = HEADER;
  for (let i = 0; i < qd; i++) {
    const n = readName(buf, off);
    if (n.next + 4 > buf.length) throw new DnsFormatError('question runs past the message');
    if (i === 0) { question = { name: n.name, type: buf.readUInt16BE(n.next), class: buf.readUInt16BE(n.next + 2) }; firstEnd = n.next + 4; }
    off = n.next + 4;
  }
  // Only the first question is answered (and echoed); resolvers send one.
  const questionBytes = buf.subarray(HEADER, firstEnd);
  let ednsSize = 0;
  // Answer and authority sections are empty in queries; the additional section may hold the OPT record.
  const rest = buf.readUInt16BE(6) + buf.readUInt16BE(8) + buf.readUInt16BE(10);
  for (let i = 0; i < rest && off < buf.length; i++) {
    const r = skipRecord(buf, off);
    if (r.type === TYPE.OPT) ednsSize = buf.readUInt16BE(r.ttlAt - 2);
    off = r.end;
  }
  return { id, flags, question, questionBytes, ednsSize };
}

export interface Answer {
  /** The owner name (dotted, trailing dot). */
  readonly name: string;
  readonly type: number;
  readonly ttl: number;
  /** A / AAAA: 4 or 16 address bytes; CNAME: the target name. */
  readonly data: Buffer | string;
}

function writeName(name: string, out: number[]): void {
  for (const label of name.split('.')) {
    if (label === '') continue;
    const bytes = Buffer.from(label, 'latin1');
    out.push(bytes.length, ...bytes);
  }
  out.push(0);
}

/**
 * A reply to `q`: same id and question, QR set, RD copied, RA set, `aa` when we are the
 * authority. When the answers do not fit `maxSize`, they are dropped and TC is set (the
 * client retries over TCP, where nothing is truncated).
 */
export function buildReply(q: Query, rcode: number, answers: readonly Answer[], authoritative: boolean, maxSize: number): Buffer {
  const body: number[] = [];
  for (const a of answers) {
    writeName(a.name, body);
    const rdata: number[] = [];
    if (typeof a.data === 'string') writeName(a.data, rdata);
    else rdata.push(...a.data);
    body.push(a.type >> 8, a.type & 0xff, CLASS_IN >> 8, CLASS_IN & 0xff,
      (a.ttl >>> 24) & 0xff, (a.ttl >>> 16) & 0xff, (a.ttl >>> 8) & 0xff, a.ttl & 0xff, rdata.length >> 8, rdata.length & 0xff, ...rdata);
  }
  const qlen = q.question ? q.questionBytes.length : 0;
  let truncated = false;
  let count = answers.length;
  if (HEADER + qlen + body.length > maxSize) { truncated = true; count = 0; }
  const out = Buffer.alloc(HEADER + qlen + (truncated ? 0 : body.length));
  out.writeUInt16BE(q.id, 0);
  // QR, opcode copied, AA, TC, RD copied, RA, rcode.
  const flags = 0x8000 | (q.flags & 0x7800) | (authoritative ? 0x0400 : 0) | (truncated ? 0x0200 : 0) | (q.flags & 0x0100) | 0x0080 | (rcode & 0xf);
  out.writeUInt16BE(flags, 2);
  out.writeUInt16BE(q.question ? 1 : 0, 4);
  out.writeUInt16BE(count, 6);
  q.questionBytes.copy(out, HEADER, 0, qlen);
  if (!truncated) Buffer.from(body).copy(out, HEADER + qlen);
  return out;
}

/** A bare error reply (no question when the query could not be read that far). */
export function errorReply(q: Query, rcode: number): Buffer {
  return buildReply(q, rcode, [], false, 65535);
}

/** What a forwarded response says about caching: its rcode and the smallest TTL of its records. */
export function responseInfo(buf: Buffer): { id: number; rcode: number; truncated: boolean; minTtl: number; soaMinimum: number } {
  if (buf.length < HEADER) throw new DnsFormatError('message shorter than a header');
  const flags = buf.readUInt16BE(2);
  let off = HEADER;
  for (let i = buf.readUInt16BE(4); i > 0; i--) off = readName(buf, off).next + 4;
  let minTtl = Infinity;
  let soaMinimum = -1;
  const records = buf.readUInt16BE(6) + buf.readUInt16BE(8) + buf.readUInt16BE(10);
  for (let i = 0; i < records; i++) {
    const r = skipRecord(buf, off);
    if (r.type !== TYPE.OPT) minTtl = Math.min(minTtl, buf.readUInt32BE(r.ttlAt));
    if (r.type === TYPE.SOA) soaMinimum = Math.min(buf.readUInt32BE(r.end - 4), buf.readUInt32BE(r.ttlAt));
    off = r.end;
  }
  return { id: buf.readUInt16BE(0), rcode: flags & 0xf, truncated: (flags & 0x0200) !== 0, minTtl, soaMinimum };
}

/** A copy of a cached response for a new query: its id, and every TTL lowered by the time it spent cached. */
export function agedCopy(cached: Buffer, id: number, elapsedSec: number): Buffer {
  const out = Buffer.from(cached);
  out.writeUInt16BE(id, 0);
  if (elapsedSec <= 0) return out;
  let off = HEADER;
  for (let i = out.readUInt16BE(4); i > 0; i--) off = readName(out, off).next + 4;
  const records = out.readUInt16BE(6) + out.readUInt16BE(8) + out.readUInt16BE(10);
  for (let i = 0; i < records; i++) {
    const r = skipRecord(out, off);
    if (r.type !== TYPE.OPT) out.writeUInt32BE(Math.max(0, out.readUInt32BE(r.ttlAt) - elapsedSec), r.ttlAt);
    off = r.end;
  }
  return out;
}
