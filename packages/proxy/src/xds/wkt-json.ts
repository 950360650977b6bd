/**
 * Proto-JSON of scalars and of the well-known types whose JSON is not an object (Duration,
 * Timestamp, FieldMask): shared by decoding from the wire (wire-json.ts) and from a decoded message
 * (decode.ts's messageToJson).
 */
import type { Field } from 'protobufjs';

const INT64 = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

export function scalarToJson(f: Field, v: unknown): unknown {
  if (INT64.has(f.type)) return String(v);
  if (f.type === 'bytes') return Buffer.from(v as Uint8Array).toString('base64');
  if (f.type === 'double' || f.type === 'float') {
    const n = v as number;
    if (Number.isNaN(n)) return 'NaN';
    if (n === Infinity) return 'Infinity';
    if (n === -Infinity) return '-Infinity';
    return f.type === 'float' ? shortestFloat32(n) : n;
  }
  return v;
}

/** The shortest decimal that reads back as the same float32 (what protobuf's JSON printer writes). */
export function shortestFloat32(n: number): number {
  for (let p = 1; p <= 9; p++) {
    const c = Number(n.toPrecision(p));
    if (Math.fround(c) === n) return c;
  }
  return n;
}

function toBigInt(v: unknown): bigint {
  if (v === undefined || v === null) return 0n;
  return BigInt(String(v));
}

function fraction(nanos: number): string {
  if (nanos === 0) return '';
  if (nanos % 1_000_000 === 0) return `.${String(nanos / 1_000_000).padStart(3, '0')}`;
  if (nanos % 1_000 === 0) return `.${String(nanos / 1_000).padStart(6, '0')}`;
  return `.${String(nanos).padStart(9, '0')}`;
}

export function formatDuration(seconds: unknown, nanos: unknown): string {
  const s = toBigInt(seconds);
  const n = Number(nanos ?? 0);
  const neg = s < 0n || n < 0;
  const abs = s < 0n ? -s : s;
  return `${neg ? '-' : ''}${abs}${fraction(Math.abs(n))}s`;
}

export function formatTimestamp(seconds: unknown, nanos: unknown): string {
  const s = Number(toBigInt(seconds));
  const iso = new Date(s * 1000).toISOString(); // 1970-01-01T00:00:00.000Z
  return `${iso.slice(0, 19)}${fraction(Number(nanos ?? 0))}Z`;
}

/** FieldMask paths in lowerCamel, comma-separated. */
export function formatFieldMask(paths: readonly string[] | undefined): string {
  return (paths ?? []).map((p) => p.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())).join(',');
}
