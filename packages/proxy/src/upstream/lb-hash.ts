import { endianness } from 'node:os';
import type { Msg } from '../config/fields.ts';
import { DEFAULT_LOCALITY_LB, PriorityPlan, randomInt32, type LbHost, type LocalityLbOptions, type PriorityLevel } from './locality.ts';

/**
 * Consistent-hash load balancing with Envoy's semantics: RING_HASH (a ketama ring of 64-bit
 * xxHash64 or MurmurHash2 points of "address_replica") and MAGLEV (Envoy's weighted permutation
 * table), one table per priority level, the priority chosen from the hash as Envoy does. Tables
 * are built once per host-set or health change; `pick` allocates nothing.
 *
 * 64-bit values travel as two 32-bit halves (hi, lo); `bigint` appears only at the API edge.
 */

if (endianness() !== 'LE') throw new Error('lb-hash assumes a little-endian platform');

// ---------------------------------------------------------------------------------------------
// 64-bit arithmetic on (hi, lo) 32-bit halves.
//
// Every half is a signed int32 (`| 0`), never a uint32: on x64 Node a small integer is a
// 32-bit Smi, so int32 halves pass between functions and sit in `RH` without boxing, where a
// uint32 above 2^31 would become a heap number. A helper returns the low half and leaves the
// high half in RH.

let RH = 0;

/** (ah, al) × (bh, bl) mod 2^64. */
function mul64(ah: number, al: number, bh: number, bl: number): number {
  const a0 = al & 0xffff, a1 = al >>> 16, b0 = bl & 0xffff, b1 = bl >>> 16;
  const p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  RH = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(ah, bl) + Math.imul(al, bh)) | 0;
  return (mid << 16) | (p00 & 0xffff);
}

/** (ah, al) + (bh, bl) mod 2^64. */
function add64(ah: number, al: number, bh: number, bl: number): number {
  const l = (al >>> 0) + (bl >>> 0);
  RH = (ah + bh + (l > 0xffffffff ? 1 : 0)) | 0;
  return l | 0;
}

/** Rotate left by 0 < r < 32. */
function rotl64(h: number, l: number, r: number): number {
  RH = (h << r) | (l >>> (32 - r));
  return (l << r) | (h >>> (32 - r));
}

/**
 * (hi × 2^32 + lo) mod m for m < 2^26, halves as int32 or uint32. Exact: x stays below 2^53,
 * and the quotient estimate from a float division is corrected by at most one m (a float
 * `%` would call out to C fmod, several times slower).
 */
export function mod64(hi: number, lo: number, m: number): number {
  const x = ((hi >>> 0) % m) * (4294967296 % m) + (lo >>> 0);
  let r = x - Math.floor(x / m) * m;
  if (r < 0) r += m;
  else if (r >= m) r -= m;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Byte scratch: strings are loaded here once, then hashed from 32-bit words.

/** How a JS string becomes the bytes that are hashed. */
export type Encoding = 'wire' | 'latin1' | 'utf8';
// 'wire':   every char is below U+0100 because it was decoded from bytes as latin1 (Node's and
//           Skua's HTTP parsers do this for header values and paths): one char, one byte,
//           exactly the bytes Envoy would hash. Long strings are copied natively.
// 'latin1': chars below U+0100 are one byte each, others UTF-8 (request data mixed with config text).
// 'utf8':   UTF-8 (config strings: addresses, hostnames).

let scratch = Buffer.allocUnsafeSlow(1024);
let bytes: Uint8Array = scratch;
let words = new Int32Array(scratch.buffer, 0, scratch.length >> 2);

function ensureScratch(n: number): void {
  if (n + 8 <= scratch.length) return;
  let size = scratch.length;
  while (size < n + 8) size *= 2;
  const next = Buffer.allocUnsafeSlow(size);
  scratch.copy(next);
  scratch = next;
  bytes = next;
  words = new Int32Array(next.buffer, 0, size >> 2);
}

/** Below this many chars a JS loop beats Buffer#write's call overhead. */
const NATIVE_MIN = 16;

/** Writes s[start, end) into the scratch at `at` (0 or a multiple of 8) and returns the end offset. */
function loadString(s: string, start: number, end: number, enc: Encoding, at: number): number {
  const n = end - start;
  ensureScratch(at + n * 3);
  if (enc !== 'latin1' && n >= NATIVE_MIN && start === 0 && end === s.length) {
    return at + scratch.write(s, at, enc === 'wire' ? 'latin1' : 'utf8');
  }
  const b = bytes;
  let o = at;
  if (enc === 'wire') {
    for (let i = start; i < end; i++) b[o++] = s.charCodeAt(i);
    return o;
  }
  for (let i = start; i < end; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80 || (enc === 'latin1' && c < 0x100)) { b[o++] = c; continue; }
    if (c < 0x800) { b[o++] = 0xc0 | (c >> 6); b[o++] = 0x80 | (c & 0x3f); continue; }
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < end) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        b[o++] = 0xf0 | (c >> 18); b[o++] = 0x80 | ((c >> 12) & 0x3f); b[o++] = 0x80 | ((c >> 6) & 0x3f); b[o++] = 0x80 | (c & 0x3f);
        continue;
      }
    }
    if (c >= 0xd800 && c < 0xe000) c = 0xfffd; // a lone surrogate, as Buffer and TextEncoder write it
    b[o++] = 0xe0 | (c >> 12); b[o++] = 0x80 | ((c >> 6) & 0x3f); b[o++] = 0x80 | (c & 0x3f);
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// xxHash64 (XXH64), the hash Envoy's HashUtil::xxHash64 uses.

const P1H = 0x9e3779b1 | 0, P1L = 0x85ebca87 | 0;
const P2H = 0xc2b2ae3d | 0, P2L = 0x27d4eb4f | 0;
const P3H = 0x165667b1 | 0, P3L = 0x9e3779f9 | 0;
const P4H = 0x85ebca77 | 0, P4L = 0xc2b2ae63 | 0;
const P5H = 0x27d4eb2f | 0, P5L = 0x165667c5 | 0;
/** 2^64 − P1, for v4 = seed − P1. */
const NP1H = 0x61c8864e | 0, NP1L = 0x7a143579 | 0;

/** acc = rotl(acc + input × P2, 31) × P1, both multiplications written out (the hot loop). */
function xxRound(ah: number, al: number, ih: number, il: number): number {
  // t = input × P2 (P2L = 0x27d4_eb4f)
  let a0 = il & 0xffff, a1 = il >>> 16;
  let p00 = a0 * 0xeb4f, p01 = a0 * 0x27d4, p10 = a1 * 0xeb4f, p11 = a1 * 0x27d4;
  let mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const tl = (mid << 16) | (p00 & 0xffff);
  const th = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(ih, 0x27d4eb4f) + Math.imul(il, -1028477379 /* P2H */);
  // x = acc + t
  const sum = (al >>> 0) + (tl >>> 0);
  const xl = sum | 0;
  const xh = (ah + th + (sum > 0xffffffff ? 1 : 0)) | 0;
  // y = rotl(x, 31)
  const yl = (xl << 31) | (xh >>> 1);
  const yh = (xh << 31) | (xl >>> 1);
  // y × P1 (P1L = 0x85eb_ca87)
  a0 = yl & 0xffff; a1 = yl >>> 16;
  p00 = a0 * 0xca87; p01 = a0 * 0x85eb; p10 = a1 * 0xca87; p11 = a1 * 0x85eb;
  mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  RH = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(yh, -2048144761 /* P1L */) + Math.imul(yl, -1640531535 /* P1H */)) | 0;
  return (mid << 16) | (p00 & 0xffff);
}

/** acc = (acc ^ round(0, val)) × P1 + P4 */
function xxMerge(ah: number, al: number, vh: number, vl: number): number {
  let l = xxRound(0, 0, vh, vl);
  l = mul64(ah ^ RH, al ^ l, P1H, P1L);
  return add64(RH, l, P4H, P4L);
}

/** XXH64 of scratch bytes [0, len) with seed (sh, sl): returns the low half, the high half in RH. */
function xxh64Scratch(len: number, sh: number, sl: number): number {
  const w = words;
  const b = bytes;
  let p = 0;
  let hh: number, hl: number;
  if (len >= 32) {
    let l = add64(sh, sl, P1H, P1L);
    let v1l = add64(RH, l, P2H, P2L), v1h = RH;
    let v2l = add64(sh, sl, P2H, P2L), v2h = RH;
    let v3h = sh, v3l = sl;
    let v4l = add64(sh, sl, NP1H, NP1L), v4h = RH;
    const limit = len - 32;
    do {
      const q = p >>> 2;
      v1l = xxRound(v1h, v1l, w[q + 1], w[q]); v1h = RH;
      v2l = xxRound(v2h, v2l, w[q + 3], w[q + 2]); v2h = RH;
      v3l = xxRound(v3h, v3l, w[q + 5], w[q + 4]); v3h = RH;
      v4l = xxRound(v4h, v4l, w[q + 7], w[q + 6]); v4h = RH;
      p += 32;
    } while (p <= limit);
    hl = rotl64(v1h, v1l, 1); hh = RH;
    l = rotl64(v2h, v2l, 7); hl = add64(hh, hl, RH, l); hh = RH;
    l = rotl64(v3h, v3l, 12); hl = add64(hh, hl, RH, l); hh = RH;
    l = rotl64(v4h, v4l, 18); hl = add64(hh, hl, RH, l); hh = RH;
    hl = xxMerge(hh, hl, v1h, v1l); hh = RH;
    hl = xxMerge(hh, hl, v2h, v2l); hh = RH;
    hl = xxMerge(hh, hl, v3h, v3l); hh = RH;
    hl = xxMerge(hh, hl, v4h, v4l); hh = RH;
  } else {
    hl = add64(sh, sl, P5H, P5L); hh = RH;
  }
  hl = add64(hh, hl, 0, len | 0); hh = RH; // inputs stay far below 4 GiB
  while (p + 8 <= len) {
    const q = p >>> 2;
    let l = xxRound(0, 0, w[q + 1], w[q]);
    l = rotl64(hh ^ RH, hl ^ l, 27);
    l = mul64(RH, l, P1H, P1L);
    hl = add64(RH, l, P4H, P4L); hh = RH;
    p += 8;
  }
  if (p + 4 <= len) {
    let l = mul64(0, w[p >>> 2], P1H, P1L);
    l = rotl64(hh ^ RH, hl ^ l, 23);
    l = mul64(RH, l, P2H, P2L);
    hl = add64(RH, l, P3H, P3L); hh = RH;
    p += 4;
  }
  while (p < len) {
    let l = mul64(0, b[p], P5H, P5L);
    l = rotl64(hh ^ RH, hl ^ l, 11);
    hl = mul64(RH, l, P1H, P1L); hh = RH;
    p++;
  }
  // avalanche
  hl ^= hh >>> 1;
  hl = mul64(hh, hl, P2H, P2L); hh = RH;
  hl ^= (hl >>> 29) | (hh << 3);
  hh ^= hh >>> 29;
  hl = mul64(hh, hl, P3H, P3L); hh = RH;
  return hl ^ hh;
}

/**
 * xxHash64 of s[start, end) with seed (seedHi, seedLo), written to out[0] (low 32 bits) and
 * out[1] (high 32 bits). Allocation-free. See Encoding for `enc` ('wire' for request data).
 */
export function xxHash64Into(out: Uint32Array, s: string, start: number, end: number, enc: Encoding, seedHi = 0, seedLo = 0): void {
  const len = loadString(s, start, end, enc, 0);
  out[0] = xxh64Scratch(len, seedHi | 0, seedLo | 0);
  out[1] = RH;
}

const U64 = new BigUint64Array(1);
const U32 = new Uint32Array(U64.buffer);
/** The same 8 bytes as int32 halves, for the pick path (see the note on int32 above). */
const I32 = new Int32Array(U64.buffer);

/** xxHash64 of the UTF-8 bytes of `s` (Envoy's HashUtil::xxHash64). */
export function xxHash64(s: string, seed: bigint = 0n): bigint {
  U64[0] = seed;
  xxHash64Into(U32, s, 0, s.length, 'utf8', U32[1], U32[0]);
  return U64[0];
}

// ---------------------------------------------------------------------------------------------
// MurmurHash2, 64-bit, as libstdc++'s std::hash (Envoy's MurmurHash::murmurHash2, seed 0xc70f6907).

const MH = 0xc6a4a793 | 0, ML = 0x5bd1e995 | 0;

/** MurmurHash2-64 of scratch bytes [0, len): returns the low half, the high half in RH. */
function murmurScratch(len: number): number {
  const w = words, b = bytes;
  let hl = mul64(0, len | 0, MH, ML) ^ 0xc70f6907;
  let hh = RH;
  const aligned = len & ~7;
  for (let p = 0; p < aligned; p += 8) {
    const q = p >>> 2;
    let l = mul64(w[q + 1], w[q], MH, ML);
    l = mul64(RH, l ^ (RH >>> 15), MH, ML); // shift_mix, then × mul
    hl = mul64(hh ^ RH, hl ^ l, MH, ML); hh = RH;
  }
  const rem = len & 7;
  if (rem !== 0) {
    let dh = 0, dl = 0;
    for (let i = rem - 1; i >= 0; i--) {
      dh = (dh << 8) | (dl >>> 24);
      dl = (dl << 8) | b[aligned + i];
    }
    hl = mul64(hh ^ dh, hl ^ dl, MH, ML); hh = RH;
  }
  hl = mul64(hh, hl ^ (hh >>> 15), MH, ML); hh = RH;
  return hl ^ (hh >>> 15);
}

/** MurmurHash2-64 of the UTF-8 bytes of `s` with libstdc++'s seed (RingHashLbConfig MURMUR_HASH_2). */
export function murmurHash2(s: string): bigint {
  const len = loadString(s, 0, s.length, 'utf8', 0);
  U32[0] = murmurScratch(len);
  U32[1] = RH;
  return U64[0];
}

// ---------------------------------------------------------------------------------------------
// Hash tables

/** The host fields a hash table reads. `Host` (host.ts) satisfies it. */
export interface HashHost extends LbHost {
  /** "ip:port" or "[ipv6]:port": Envoy's address()->asString(), the default hash key. */
  readonly hostPort: string;
  /** Used as the key with consistent_hashing_lb_config.use_hostname_for_hashing. */
  readonly hostname: string;
}

/** One host with its hash key and normalized weight (weights of a table sum to 1). */
export interface WeightedHost<T> {
  readonly host: T;
  readonly key: string;
  readonly weight: number;
}

/** A consistent-hash table over one priority level's hosts. */
export interface HashTable<T> {
  /** Ring entries or table slots. */
  readonly size: number;
  /**
   * The host for the 64-bit hash (hi, lo), halves as int32 or uint32; `attempt` > 0 asks for
   * an alternative (host_selection_retry_max_attempts).
   */
  pickHiLo(hi: number, lo: number, attempt: number): T | undefined;
}

export const DEFAULT_MIN_RING_SIZE = 1024;
export const DEFAULT_MAX_RING_SIZE = 8 * 1024 * 1024;
export const DEFAULT_MAGLEV_TABLE_SIZE = 65537;
export const MAX_MAGLEV_TABLE_SIZE = 5000011;

/**
 * Envoy's RingHashLoadBalancer::Ring: every host gets scale × weight points hashed from
 * "key_i" (running sums so fractional shares even out), scale = min(ceil(minWeight ×
 * minRingSize) / minWeight, maxRingSize); sorted; a hash picks the first point ≥ it, wrapping.
 */
export class RingHash<T> implements HashTable<T> {
  readonly size: number;
  /** Least and most points any host got (Envoy's ring_hash_lb.min/max_hashes_per_host). */
  readonly minHashesPerHost: number;
  readonly maxHashesPerHost: number;
  private readonly hi: Uint32Array;
  private readonly lo: Uint32Array;
  private readonly hosts: T[];

  constructor(entries: readonly WeightedHost<T>[], minRingSize = DEFAULT_MIN_RING_SIZE, maxRingSize = DEFAULT_MAX_RING_SIZE, hashFunction: HashFunction = 'XX_HASH') {
    let minWeight = 1;
    for (const e of entries) if (e.weight < minWeight) minWeight = e.weight;
    const scale = entries.length === 0 ? 0 : Math.min(Math.ceil(minWeight * minRingSize) / minWeight, maxRingSize);
    const his: number[] = [], los: number[] = [], owner: number[] = [];
    let current = 0, target = 0;
    let minPer = entries.length ? Math.ceil(scale) : 0, maxPer = 0;
    for (let e = 0; e < entries.length; e++) {
      // The key and '_' once; each point appends its decimal index.
      const base = loadString(entries[e].key, 0, entries[e].key.length, 'utf8', 0);
      bytes[base] = 0x5f;
      target += scale * entries[e].weight;
      let i = 0;
      while (current < target) {
        const len = writeDecimal(i, base + 1);
        const lo = hashFunction === 'MURMUR_HASH_2' ? murmurScratch(len) : xxh64Scratch(len, 0, 0);
        his.push(RH >>> 0); los.push(lo >>> 0); owner.push(e);
        i++;
        current++;
      }
      if (i < minPer) minPer = i;
      if (i > maxPer) maxPer = i;
    }
    const n = his.length;
    const order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((a, b) => his[a] - his[b] || los[a] - los[b]);
    this.size = n;
    this.hi = new Uint32Array(n);
    this.lo = new Uint32Array(n);
    this.hosts = new Array<T>(n);
    for (let i = 0; i < n; i++) {
      const k = order[i];
      this.hi[i] = his[k];
      this.lo[i] = los[k];
      this.hosts[i] = entries[owner[k]].host;
    }
    this.minHashesPerHost = minPer;
    this.maxHashesPerHost = maxPer;
  }

  pickHiLo(hi: number, lo: number, attempt: number): T | undefined {
    const n = this.size;
    if (n === 0) return undefined;
    hi >>>= 0;
    lo >>>= 0;
    const H = this.hi, L = this.lo;
    let a = 0, b = n;
    while (a < b) {
      const m = (a + b) >>> 1;
      const mh = H[m];
      if (mh < hi || (mh === hi && L[m] < lo)) a = m + 1;
      else b = m;
    }
    let i = a === n ? 0 : a;
    // A retry behaves as if this point were not on the ring: the next one.
    if (attempt > 0) i = (i + attempt) % n;
    return this.hosts[i];
  }

  /** The ring as (hash, host) pairs in order, for admin output and tests. */
  entries(): Array<{ hash: bigint; host: T }> {
    const out: Array<{ hash: bigint; host: T }> = [];
    for (let i = 0; i < this.size; i++) {
      U32[0] = this.lo[i];
      U32[1] = this.hi[i];
      out.push({ hash: U64[0], host: this.hosts[i] });
    }
    return out;
  }
}

/** Writes the decimal digits of i at `at`; returns the end offset. */
function writeDecimal(i: number, at: number): number {
  ensureScratch(at + 16);
  if (i === 0) { bytes[at] = 0x30; return at + 1; }
  let digits = 0;
  for (let v = i; v > 0; v = Math.floor(v / 10)) digits++;
  let o = at + digits;
  for (let v = i; v > 0; v = Math.floor(v / 10)) bytes[--o] = 0x30 + (v % 10);
  return at + digits;
}

/**
 * Envoy's Maglev table (weighted Maglev, paper listing 1): hosts sorted by key; each gets
 * offset = xxHash64(key) mod M and skip = xxHash64(key, seed 1) mod (M − 1) + 1, then they
 * take turns claiming the next free slot of their permutation, a host of weight w taking a
 * turn on iteration i when i × w ≥ its running target (+= the largest weight per turn).
 */
export class MaglevTable<T> implements HashTable<T> {
  readonly size: number;
  /** Slots per host, in the (sorted) entry order, like maglev_lb.min/max_entries_per_host. */
  readonly counts: readonly number[];
  private readonly table: T[];
  private readonly twoPow32ModM: number;

  constructor(entries: readonly WeightedHost<T>[], tableSize = DEFAULT_MAGLEV_TABLE_SIZE) {
    const M = tableSize;
    this.size = entries.length === 0 ? 0 : M;
    this.twoPow32ModM = 4294967296 % M;
    if (entries.length === 0) { this.table = []; this.counts = []; return; }
    // Stable order by key, so the table does not depend on the order hosts arrived in.
    const sorted = entries.map((e, i) => ({ e, i })).sort((a, b) => (a.e.key < b.e.key ? -1 : a.e.key > b.e.key ? 1 : a.i - b.i)).map((x) => x.e);
    const n = sorted.length;
    let maxWeight = 0;
    for (const e of sorted) if (e.weight > maxWeight) maxWeight = e.weight;
    // pos[i] is Envoy's permutation(entry) = (offset + skip × next) mod M, kept incrementally.
    const pos = new Int32Array(n), skip = new Int32Array(n), weight = new Float64Array(n), target = new Float64Array(n);
    const counts = new Array<number>(n).fill(0);
    const out = new Uint32Array(2);
    for (let i = 0; i < n; i++) {
      const k = sorted[i].key;
      xxHash64Into(out, k, 0, k.length, 'utf8', 0, 0);
      pos[i] = mod64(out[1], out[0], M);
      xxHash64Into(out, k, 0, k.length, 'utf8', 0, 1);
      skip[i] = mod64(out[1], out[0], M - 1) + 1;
      weight[i] = sorted[i].weight;
    }
    const slots = new Int32Array(M).fill(-1);
    let filled = 0;
    for (let iteration = 1; filled < M; iteration++) {
      for (let i = 0; i < n && filled < M; i++) {
        if (iteration * weight[i] < target[i]) continue;
        target[i] += maxWeight;
        let c = pos[i];
        const step = skip[i];
        while (slots[c] !== -1) {
          c += step;
          if (c >= M) c -= M;
        }
        slots[c] = i;
        c += step;
        pos[i] = c >= M ? c - M : c;
        counts[i]++;
        filled++;
      }
    }
    this.table = new Array<T>(M);
    for (let c = 0; c < M; c++) this.table[c] = sorted[slots[c]].host;
    this.counts = counts;
  }

  pickHiLo(hi: number, lo: number, attempt: number): T | undefined {
    const M = this.size;
    if (M === 0) return undefined;
    if (attempt > 0) {
      // Envoy: hash ^= ~0 − attempt + 1, a large change for every retry.
      hi = ~hi;
      lo ^= -attempt;
    }
    const x = ((hi >>> 0) % M) * this.twoPow32ModM + (lo >>> 0);
    let r = x - Math.floor(x / M) * M;
    if (r < 0) r += M;
    else if (r >= M) r -= M;
    return this.table[r];
  }
}

// ---------------------------------------------------------------------------------------------
// Config

export type HashFunction = 'XX_HASH' | 'MURMUR_HASH_2';
const HASH_FUNCTIONS = ['XX_HASH', 'MURMUR_HASH_2'] as const;

/** The compiled ring_hash_lb_config / maglev_lb_config with the consistent-hashing common fields. */
export interface HashLbConfig {
  readonly policy: 'RING_HASH' | 'MAGLEV';
  readonly minRingSize: number;
  readonly maxRingSize: number;
  readonly hashFunction: HashFunction;
  readonly tableSize: number;
  /** common_lb_config.consistent_hashing_lb_config.use_hostname_for_hashing */
  readonly useHostnameForHashing: boolean;
}

/**
 * The consistent-hashing fields of a Cluster: lb_policy RING_HASH (ring_hash_lb_config) or
 * MAGLEV (maglev_lb_config) and common_lb_config.consistent_hashing_lb_config. Undefined for
 * other policies. Errors name the field.
 */
export function compileHashLbConfig(m: Msg): HashLbConfig | undefined {
  const raw = m.raw.lb_policy;
  const policy = raw === 'RING_HASH' || raw === 2 ? 'RING_HASH' : raw === 'MAGLEV' || raw === 5 ? 'MAGLEV' : undefined;
  if (!policy) {
    if (m.has('ring_hash_lb_config')) throw m.error('ring_hash_lb_config', 'needs lb_policy RING_HASH');
    if (m.has('maglev_lb_config')) throw m.error('maglev_lb_config', 'needs lb_policy MAGLEV');
    return undefined;
  }
  let useHostnameForHashing = false;
  const chc = m.msg('common_lb_config')?.msg('consistent_hashing_lb_config');
  if (chc) {
    if (chc.has('hash_balance_factor')) throw chc.error('hash_balance_factor', 'bounded-load consistent hashing is not supported');
    if (chc.rawList('hash_policy').length) throw chc.error('hash_policy', 'cluster-level hash policies are not supported; use the route hash_policy');
    useHostnameForHashing = chc.bool('use_hostname_for_hashing');
  }
  let minRingSize = DEFAULT_MIN_RING_SIZE, maxRingSize = DEFAULT_MAX_RING_SIZE;
  let hashFunction: HashFunction = 'XX_HASH';
  let tableSize = DEFAULT_MAGLEV_TABLE_SIZE;
  if (policy === 'RING_HASH') {
    if (m.has('maglev_lb_config')) throw m.error('maglev_lb_config', 'is for lb_policy MAGLEV, not RING_HASH');
    const rc = m.msg('ring_hash_lb_config');
    if (rc) {
      rc.onlyFields(['minimum_ring_size', 'maximum_ring_size', 'hash_function']);
      minRingSize = ringSize(rc, 'minimum_ring_size', DEFAULT_MIN_RING_SIZE);
      maxRingSize = ringSize(rc, 'maximum_ring_size', DEFAULT_MAX_RING_SIZE);
      hashFunction = rc.enumOf('hash_function', HASH_FUNCTIONS);
      if (minRingSize > maxRingSize) throw rc.error('minimum_ring_size', `ring hash: minimum_ring_size (${minRingSize}) > maximum_ring_size (${maxRingSize})`);
    }
  } else {
    if (m.has('ring_hash_lb_config')) throw m.error('ring_hash_lb_config', 'is for lb_policy RING_HASH, not MAGLEV');
    const mc = m.msg('maglev_lb_config');
    if (mc) {
      mc.onlyFields(['table_size']);
      tableSize = mc.num('table_size', DEFAULT_MAGLEV_TABLE_SIZE);
      if (!Number.isInteger(tableSize) || tableSize > MAX_MAGLEV_TABLE_SIZE) throw mc.error('table_size', `must be an integer no larger than ${MAX_MAGLEV_TABLE_SIZE}`);
      if (!isPrime(tableSize)) throw mc.error('table_size', `the table size of maglev must be a prime number, got ${tableSize}`);
    }
  }
  return { policy, minRingSize, maxRingSize, hashFunction, tableSize, useHostnameForHashing };
}

function ringSize(m: Msg, field: string, fallback: number): number {
  const v = m.num(field, fallback);
  if (!Number.isInteger(v) || v < 0 || v > DEFAULT_MAX_RING_SIZE) throw m.error(field, `must be an integer between 0 and ${DEFAULT_MAX_RING_SIZE}`);
  return v;
}

export function isPrime(n: number): boolean {
  if (n < 2) return false;
  if (n % 2 === 0) return n === 2;
  for (let d = 3; d * d <= n; d += 2) if (n % d === 0) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// The load balancer a cluster holds

/**
 * Envoy's ThreadAwareLoadBalancerBase::normalizeWeights for one level: the level's healthy
 * hosts (all hosts in panic), weights normalized to sum 1; with locality weighting, each
 * locality's share is its load_balancing_weight / Σ, split over its hosts by host weight
 * (localities of weight 0 are left out).
 */
export function normalizedHostWeights<T extends HashHost>(level: PriorityLevel<T>, localityWeighted: boolean, useHostname: boolean): WeightedHost<T>[] {
  const out: WeightedHost<T>[] = [];
  const key = (h: T): string => (useHostname ? h.hostname : h.hostPort);
  const add = (hosts: readonly T[], share: number): void => {
    let sum = 0;
    for (const h of hosts) sum += h.weight;
    if (sum === 0) return;
    for (const h of hosts) out.push({ host: h, key: key(h), weight: (h.weight * share) / sum });
  };
  if (!localityWeighted || level.localities.length === 0) {
    add(level.panic ? level.hosts : level.healthy, 1);
    return out;
  }
  let total = 0;
  for (const l of level.localities) total += l.weight;
  if (total === 0) return out;
  for (const l of level.localities) {
    if (l.weight !== 0) add(level.panic ? l.hosts : l.healthy, l.weight / total);
  }
  return out;
}

/**
 * RING_HASH or MAGLEV over a whole host set: a table per priority level (healthy hosts, or
 * all of them in panic) and the priority chosen by hash % 100 against the priority load, as
 * Envoy's thread-aware load balancer does. Immutable: build a new one when hosts or their
 * health change.
 */
export class HashLoadBalancer<T extends HashHost> {
  readonly config: HashLbConfig;
  readonly plan: PriorityPlan<T>;
  /** Indexed by priority. */
  readonly tables: readonly HashTable<T>[];

  constructor(hosts: readonly T[], config: HashLbConfig, options: LocalityLbOptions = DEFAULT_LOCALITY_LB) {
    this.config = config;
    this.plan = new PriorityPlan(hosts, options);
    this.tables = this.plan.levels.map((level) => {
      const weighted = normalizedHostWeights(level, options.localityWeighted, config.useHostnameForHashing);
      return config.policy === 'MAGLEV'
        ? new MaglevTable(weighted, config.tableSize)
        : new RingHash(weighted, config.minRingSize, config.maxRingSize, config.hashFunction);
    });
  }

  /**
   * The host for a request hash: a bigint (64-bit, e.g. from computeRequestHash), a
   * non-negative integer number, or undefined for "no hash" (Envoy then uses a random value,
   * so the pick is random). `attempt` > 0 for host-selection retries. Allocation-free.
   */
  pick(hash: bigint | number | undefined, attempt = 0): T | undefined {
    if (typeof hash === 'bigint') {
      U64[0] = hash;
      return this.pickHiLo(I32[1], I32[0], attempt);
    }
    if (hash === undefined) return this.pickHiLo(randomInt32(), randomInt32(), attempt);
    return this.pickHiLo((hash / 4294967296) | 0, hash | 0, attempt);
  }

  pickHiLo(hi: number, lo: number, attempt: number): T | undefined {
    const tables = this.tables;
    const n = tables.length;
    let p = 0;
    if (n > 1) {
      p = this.plan.chooseSlot(mod64(hi, lo, 100) + 1);
      if (p >= n) p -= n; // a degraded share: the level's table (healthy hosts) all the same, as Envoy
    }
    return tables[p].pickHiLo(hi, lo, attempt);
  }
}
