/**
 * A path-aware reader over decoded JSON/YAML: every accessor checks the type and throws a
 * ConfigError naming the field (`workloads[2].workloadIps[0]: ...`). Unknown keys are refused
 * when the caller lists the known ones (ztunnel's deny_unknown_fields).
 */
import { canonicalIpText, ConfigError } from '../core.ts';

type Json = Record<string, unknown>;

/** Raw IP bytes (base64 in proto-JSON) → canonical text. */
export function ipFromBytes(b64: string, path: string): string {
  const b = Buffer.from(b64, 'base64');
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length === 16) {
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i).toString(16));
    return canonicalIpText(groups.join(':')) as string;
  }
  throw new ConfigError(path, `an IP address is 4 or 16 bytes, got ${b.length}`);
}

export class Reader {
  readonly raw: Json;
  readonly path: string;

  constructor(raw: unknown, path: string) {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(path, 'must be an object');
    this.raw = raw as Json;
    this.path = path;
  }

  at(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  error(key: string, message: string): ConfigError {
    return new ConfigError(key ? this.at(key) : this.path, message);
  }

  /** Refuses keys outside `known`. */
  only(known: readonly string[]): this {
    for (const k of Object.keys(this.raw)) if (!known.includes(k)) throw this.error(k, 'unknown field');
    return this;
  }

  has(key: string): boolean {
    return this.raw[key] !== undefined && this.raw[key] !== null;
  }

  str(key: string, fallback = ''): string {
    const v = this.raw[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'string') throw this.error(key, 'must be a string');
    return v;
  }

  bool(key: string): boolean {
    const v = this.raw[key];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw this.error(key, 'must be true or false');
    return v;
  }

  /** A non-negative integer (proto-JSON may write 64-bit ones as strings). */
  int(key: string, fallback = 0, max = 0xffffffff): number {
    const v = this.raw[key];
    if (v === undefined || v === null) return fallback;
    const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > max) throw this.error(key, `must be an integer in [0, ${max}]`);
    return n;
  }

  port(key: string): number {
    return this.int(key, 0, 65535);
  }

  msg(key: string): Reader | undefined {
    return this.has(key) ? new Reader(this.raw[key], this.at(key)) : undefined;
  }

  list(key: string): unknown[] {
    const v = this.raw[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw this.error(key, 'must be a list');
    return v;
  }

  msgs(key: string): Reader[] {
    return this.list(key).map((x, i) => new Reader(x, `${this.at(key)}[${i}]`));
  }

  strs(key: string): string[] {
    return this.list(key).map((x, i) => {
      if (typeof x !== 'string') throw new ConfigError(`${this.at(key)}[${i}]`, 'must be a string');
      return x;
    });
  }

  /** An enum given by name, one of `names` (the first is the default when absent). */
  oneOf<T extends string>(key: string, names: readonly T[]): T {
    const v = this.raw[key];
    if (v === undefined || v === null) return names[0];
    if (typeof v !== 'string' || !names.includes(v as T)) throw this.error(key, `must be one of ${names.join(', ')}, got ${JSON.stringify(v)}`);
    return v as T;
  }
}
