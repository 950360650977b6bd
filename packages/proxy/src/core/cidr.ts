import type { Msg } from '../config/fields.ts';
import { ConfigError } from './errors.ts';

/**
 * IP addresses and CIDR ranges (envoy.config.core.v3.CidrRange), compiled at config load.
 *
 * Addresses are held as four big-endian 32-bit words (IPv4 uses word 0). An IPv4-mapped IPv6
 * address (`::ffff:1.2.3.4`, how Node reports IPv4 peers on a dual-stack socket) is treated as
 * IPv4 everywhere, so it matches IPv4 ranges. Match-time functions parse into module-level scratch
 * arrays and allocate nothing; that is safe because a parse never yields to other code.
 */

export type IpFamily = 4 | 6;

export interface CidrRange {
  readonly family: IpFamily;
  /** Network address with host bits cleared (Envoy truncates them too). IPv4 lives in words[0]. */
  readonly words: Uint32Array;
  readonly prefixLen: number;
  /** Canonical text, e.g. `10.0.0.0/8`, `2001:db8::/32`: a stable key for de-duplication. */
  readonly text: string;
}

/**
 * Envoy's CidrRange doc: "prefix_len ... Defaults to 0 when unset" (the UInt32Value wrapper reads
 * as 0), so `{address_prefix: '10.1.2.3'}` alone matches every IPv4 address, exactly as in Envoy.
 */
export const DEFAULT_PREFIX_LEN = 0;

const SCRATCH = new Uint32Array(4);
const SCRATCH_B = new Uint32Array(4);
const GROUPS = new Uint16Array(8);

/** Compiles a CidrRange message; errors name `address_prefix` / `prefix_len`. */
export function parseCidrRange(m: Msg): CidrRange {
  const addr = m.requiredStr('address_prefix');
  const out = new Uint32Array(4);
  const family = addr.includes('%') ? 0 : parseIpInto(addr, out);
  if (family === 0) throw m.error('address_prefix', `malformed IP address ${JSON.stringify(addr)}`);
  const len = m.num('prefix_len', DEFAULT_PREFIX_LEN);
  const range = toRange(family, addr, out, len);
  if (!range) throw m.error('prefix_len', `must be an integer in [0, ${family === 4 && !addr.includes(':') ? 32 : 128}], got ${len}`);
  return range;
}

/** Parses `10.0.0.0/8`-style text (no `/len` means a single host); for tests and flat config. */
export function parseCidrText(text: string, path: string): CidrRange {
  const slash = text.indexOf('/');
  const addr = slash < 0 ? text : text.slice(0, slash);
  const out = new Uint32Array(4);
  const family = addr.includes('%') ? 0 : parseIpInto(addr, out);
  if (family === 0) throw new ConfigError(path, `malformed IP address ${JSON.stringify(addr)}`);
  const lenText = text.slice(slash + 1);
  const len = slash < 0 ? (addr.includes(':') ? 128 : 32) : /^\d{1,3}$/.test(lenText) ? Number(lenText) : -1;
  const range = toRange(family, addr, out, len);
  if (!range) throw new ConfigError(path, `malformed CIDR range ${JSON.stringify(text)}`);
  return range;
}

/** Range from a parsed address, or undefined for a bad length. Handles ranges written as IPv4-mapped. */
function toRange(family: IpFamily, addr: string, words: Uint32Array, len: number): CidrRange | undefined {
  if (!Number.isInteger(len) || len < 0) return undefined;
  if (family === 4 && addr.includes(':')) {
    // `::ffff:10.0.0.0/104` is the IPv4 range 10.0.0.0/8; shorter prefixes stay IPv6 ranges.
    if (len > 128) return undefined;
    if (len >= 96) return makeRange(4, words, len - 96);
    words[3] = words[0]; words[0] = 0; words[1] = 0; words[2] = 0xffff;
    return makeRange(6, words, len);
  }
  if (len > (family === 4 ? 32 : 128)) return undefined;
  return makeRange(family, words, len);
}

function makeRange(family: IpFamily, words: Uint32Array, prefixLen: number): CidrRange {
  for (let w = 0; w < 4; w++) words[w] = maskWord(words[w], prefixLen - w * 32);
  const text = `${formatWords(family, words)}/${prefixLen}`;
  return Object.freeze({ family, words, prefixLen, text });
}

/** Keeps the top `bits` bits of a word (all of it when bits >= 32, none when bits <= 0). */
function maskWord(word: number, bits: number): number {
  if (bits >= 32) return word;
  if (bits <= 0) return 0;
  return (word & (0xffffffff << (32 - bits))) >>> 0;
}

/** True when `ip` (a peer/local address string) falls inside `range`. Non-IP strings never match. */
export function contains(range: CidrRange, ip: string): boolean {
  return parseIpInto(ip, SCRATCH) === range.family && wordsInRange(range, SCRATCH);
}

function wordsInRange(range: CidrRange, words: Uint32Array): boolean {
  const len = range.prefixLen;
  for (let w = 0; w * 32 < len; w++) {
    if (maskWord(words[w], len - w * 32) !== range.words[w]) return false;
  }
  return true;
}

export function isIp(ip: string): boolean {
  return parseIpInto(ip, SCRATCH) !== 0;
}

/** 127.0.0.0/8 or ::1 (and their IPv4-mapped forms). */
export function isLoopback(ip: string): boolean {
  const f = parseIpInto(ip, SCRATCH);
  if (f === 4) return SCRATCH[0] >>> 24 === 127;
  return f === 6 && SCRATCH[0] === 0 && SCRATCH[1] === 0 && SCRATCH[2] === 0 && SCRATCH[3] === 1;
}

/** Same address regardless of spelling (`::ffff:10.0.0.1` equals `10.0.0.1`). */
export function sameIp(a: string, b: string): boolean {
  const fa = parseIpInto(a, SCRATCH);
  if (fa === 0 || parseIpInto(b, SCRATCH_B) !== fa) return false;
  return SCRATCH[0] === SCRATCH_B[0] && SCRATCH[1] === SCRATCH_B[1] && SCRATCH[2] === SCRATCH_B[2] && SCRATCH[3] === SCRATCH_B[3];
}

/**
 * Longest-prefix lookup over many ranges: one binary trie per family in flat Int32Arrays, walked
 * bit by bit (at most 32 or 128 steps, no allocation). When a range is given twice the first
 * value is kept.
 */
export class CidrTable<T> {
  readonly size: number;
  readonly #values: T[] = [];
  readonly #v4: Trie;
  readonly #v6: Trie;

  constructor(entries: Iterable<readonly [CidrRange, T]>) {
    const b4 = new TrieBuilder(), b6 = new TrieBuilder();
    for (const [range, value] of entries) {
      const b = range.family === 4 ? b4 : b6;
      if (b.insert(range, this.#values.length)) this.#values.push(value);
    }
    this.size = this.#values.length;
    this.#v4 = b4.build();
    this.#v6 = b6.build();
  }

  /** The value of the longest range containing `ip`, or undefined (also for non-IP strings). */
  lookup(ip: string): T | undefined {
    const family = parseIpInto(ip, SCRATCH);
    if (family === 0) return undefined;
    const trie = family === 4 ? this.#v4 : this.#v6;
    const { child, val } = trie;
    const bits = family === 4 ? 32 : 128;
    let node = 0, best = val[0];
    for (let d = 0; d < bits; d++) {
      node = child[node * 2 + ((SCRATCH[d >>> 5] >>> (31 - (d & 31))) & 1)];
      if (node === 0) break;
      if (val[node] >= 0) best = val[node];
    }
    return best >= 0 ? this.#values[best] : undefined;
  }
}

interface Trie {
  /** child[2n] / child[2n+1]: node index for bit 0 / 1; 0 means none (the root is never a child). */
  readonly child: Int32Array;
  /** Index into the values array, or -1. */
  readonly val: Int32Array;
}

class TrieBuilder {
  readonly child: number[] = [0, 0];
  readonly val: number[] = [-1];

  /** Returns false when the range is already present. */
  insert(range: CidrRange, valueIndex: number): boolean {
    let node = 0;
    for (let d = 0; d < range.prefixLen; d++) {
      const slot = node * 2 + ((range.words[d >>> 5] >>> (31 - (d & 31))) & 1);
      if (this.child[slot] === 0) {
        this.child[slot] = this.val.length;
        this.val.push(-1);
        this.child.push(0, 0);
      }
      node = this.child[slot];
    }
    if (this.val[node] >= 0) return false;
    this.val[node] = valueIndex;
    return true;
  }

  build(): Trie {
    return { child: Int32Array.from(this.child), val: Int32Array.from(this.val) };
  }
}

/**
 * Parses an IPv4 or IPv6 address into `out` (four words) without allocating. Returns the family,
 * or 0 when `ip` is not an address. IPv4-mapped IPv6 is reported as 4; a `%zone` suffix is ignored.
 */
export function parseIpInto(ip: string, out: Uint32Array): 0 | IpFamily {
  const n = ip.length;
  if (n === 0) return 0;
  let colon = false;
  let end = n;
  for (let i = 0; i < n; i++) {
    const c = ip.charCodeAt(i);
    if (c === 58) colon = true;
    else if (c === 37) { end = i; break; } // '%'
  }
  if (!colon) {
    if (end !== n) return 0;
    const v = parseV4(ip, 0, n);
    if (v < 0) return 0;
    out[0] = v; out[1] = 0; out[2] = 0; out[3] = 0;
    return 4;
  }
  if (!parseV6(ip, end)) return 0;
  for (let w = 0; w < 4; w++) out[w] = ((GROUPS[w * 2] << 16) | GROUPS[w * 2 + 1]) >>> 0;
  if (out[0] === 0 && out[1] === 0 && out[2] === 0xffff) {
    out[0] = out[3]; out[1] = 0; out[2] = 0; out[3] = 0;
    return 4;
  }
  return 6;
}

/** Dotted quad in s[start, end) as an unsigned number, or -1. Leading zeros are refused, as inet_pton does. */
function parseV4(s: string, start: number, end: number): number {
  let value = 0, octet = 0, digits = 0, dots = 0;
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || dots === 3) return -1;
      value = value * 256 + octet;
      dots++; octet = 0; digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits === 1 && octet === 0) return -1;
      octet = octet * 10 + (c - 48);
      if (++digits > 3 || octet > 255) return -1;
    } else {
      return -1;
    }
  }
  if (digits === 0 || dots !== 3) return -1;
  return value * 256 + octet;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/** Fills GROUPS from s[0, end); handles `::` and a trailing dotted quad. */
function parseV6(s: string, end: number): boolean {
  let n = 0, gap = -1, i = 0;
  if (s.charCodeAt(0) === 58) {
    if (end < 2 || s.charCodeAt(1) !== 58) return false;
    gap = 0; i = 2;
  }
  while (i < end) {
    let j = i, v = 0;
    for (; j < end; j++) {
      const h = hexValue(s.charCodeAt(j));
      if (h < 0) break;
      v = v * 16 + h;
    }
    if (j < end && s.charCodeAt(j) === 46) {
      if (n > 6) return false;
      const v4 = parseV4(s, i, end);
      if (v4 < 0) return false;
      GROUPS[n++] = v4 >>> 16;
      GROUPS[n++] = v4 & 0xffff;
      i = end;
      break;
    }
    if (j === i || j - i > 4 || n === 8) return false;
    GROUPS[n++] = v;
    if (j === end) { i = end; break; }
    if (s.charCodeAt(j) !== 58) return false;
    j++;
    if (j < end && s.charCodeAt(j) === 58) {
      if (gap >= 0) return false;
      gap = n;
      j++;
    } else if (j === end) {
      return false;
    }
    i = j;
  }
  if (gap < 0) return n === 8;
  if (n > 7) return false;
  // Slide the groups after `::` to the end and zero the gap.
  const tail = n - gap;
  for (let k = 1; k <= tail; k++) GROUPS[8 - k] = GROUPS[n - k];
  for (let k = gap; k < 8 - tail; k++) GROUPS[k] = 0;
  return true;
}

/** Canonical text (RFC 5952 for IPv6: lower case, longest zero run of 2+ groups as `::`). */
export function formatWords(family: IpFamily, words: Uint32Array): string {
  if (family === 4) {
    const v = words[0];
    return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  const g: number[] = [];
  for (let w = 0; w < 4; w++) g.push(words[w] >>> 16, words[w] & 0xffff);
  let bestStart = -1, bestLen = 1;
  for (let k = 0; k < 8;) {
    if (g[k] !== 0) { k++; continue; }
    let e = k;
    while (e < 8 && g[e] === 0) e++;
    if (e - k > bestLen) { bestStart = k; bestLen = e - k; }
    k = e;
  }
  const hex = (from: number, to: number) => g.slice(from, to).map((x) => x.toString(16)).join(':');
  if (bestStart < 0) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLen, 8)}`;
}
