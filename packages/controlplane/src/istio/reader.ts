/**
 * A field reader for Istio / Kubernetes objects that collects every problem instead of stopping at
 * the first (as the API server and istiod's webhook do), each naming the field path
 * (`spec.http[0].route[1].weight`). Messages follow the API server's wording where Istio relies on
 * its CRD schema (`Invalid value`, `Required value`, `Unsupported value`) and istiod's elsewhere.
 */
export type Level = 'Error' | 'Warning' | 'Info';

export interface Finding {
  readonly level: Level;
  /** istioctl analyze's message codes: IST0106 schema error, IST0133 schema warning, IST0101 missing reference; SKUA0001 not applied. */
  readonly code: string;
  readonly field: string;
  readonly message: string;
}

export const CODE = {
  schemaError: 'IST0106',
  schemaWarning: 'IST0133',
  notFound: 'IST0101',
  notApplied: 'SKUA0001',
} as const;

type Json = Record<string, unknown>;

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, µs: 0.001, ns: 0.000001 };

/** A Go duration string ("1.5s", "300ms", "1m30s") in milliseconds, or undefined. */
export function durationMs(v: string): number | undefined {
  let rest = v.trim(), total = 0;
  if (rest === '') return undefined;
  while (rest !== '') {
    const m = /^(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]];
    rest = rest.slice(m[0].length);
  }
  return total;
}

/** Collects findings for one resource. */
export class Findings {
  readonly list: Finding[] = [];
  error(field: string, message: string, code: string = CODE.schemaError): void { this.list.push({ level: 'Error', code, field, message }); }
  warn(field: string, message: string, code: string = CODE.schemaWarning): void { this.list.push({ level: 'Warning', code, field, message }); }
  notApplied(field: string, why: string): void { this.list.push({ level: 'Warning', code: CODE.notApplied, field, message: `accepted but not applied: ${why}` }); }
  get errors(): number { return this.list.filter((f) => f.level === 'Error').length; }
}

/** One object of the document with its path. Readers return undefined (and record why) on bad input. */
export class Node {
  readonly raw: Json;
  readonly path: string;
  readonly f: Findings;

  constructor(raw: Json, path: string, f: Findings) {
    this.raw = raw;
    this.path = path;
    this.f = f;
  }

  /** Wraps `v` when it is an object; records a type error otherwise. */
  static of(v: unknown, path: string, f: Findings): Node | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'object' || Array.isArray(v)) {
      f.error(path, `Invalid value: "${kindOf(v)}": ${path} in body must be of type object`);
      return undefined;
    }
    return new Node(v as Json, path, f);
  }

  at(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  has(key: string): boolean {
    return this.raw[key] !== undefined && this.raw[key] !== null;
  }

  error(key: string, message: string, code?: string): void { this.f.error(key ? this.at(key) : this.path, message, code); }
  warn(key: string, message: string): void { this.f.warn(key ? this.at(key) : this.path, message); }
  invalid(key: string, value: unknown, why: string): void {
    this.error(key, `Invalid value: ${typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value) ?? String(value)}: ${why}`);
  }
  /** A rule over the whole object (the API server's CEL rules say `Invalid value: "object"`). */
  rule(message: string): void { this.f.error(this.path, `Invalid value: "object": ${message}`); }
  notApplied(key: string, why: string): void { this.f.notApplied(this.at(key), why); }

  /**
   * Every field must be one of `known` (the API's fields); the ones in `skip` are valid Istio but
   * not acted on here, so each is reported as a warning naming it.
   */
  known(known: readonly string[], skip: Readonly<Record<string, string>> = {}): void {
    for (const k of Object.keys(this.raw)) {
      if (this.raw[k] === undefined) continue;
      // The API server's default field validation warns about unknown fields (and drops them).
      if (!known.includes(k)) this.warn(k, `unknown field "${this.at(k)}"`);
      else if (k in skip && this.raw[k] !== null) this.notApplied(k, skip[k]);
    }
  }

  private typed(key: string, type: string): unknown {
    const v = this.raw[key];
    if (v === undefined || v === null) return undefined;
    const t = kindOf(v);
    if (t === type || (type === 'number' && t === 'integer')) return v;
    this.error(key, `Invalid value: "${t}": ${this.at(key)} in body must be of type ${type}`);
    return undefined;
  }

  str(key: string): string | undefined {
    return this.typed(key, 'string') as string | undefined;
  }

  reqStr(key: string): string | undefined {
    const v = this.str(key);
    if (v === undefined && !this.has(key)) this.error(key, 'Required value');
    return v;
  }

  num(key: string, min?: number, max?: number): number | undefined {
    const v = this.typed(key, 'number') as number | undefined;
    if (v === undefined) return undefined;
    if (min !== undefined && v < min) { this.invalid(key, v, `${this.at(key)} in body should be greater than or equal to ${min}`); return undefined; }
    if (max !== undefined && v > max) { this.invalid(key, v, `${this.at(key)} in body should be less than or equal to ${max}`); return undefined; }
    return v;
  }

  int(key: string, min?: number, max?: number): number | undefined {
    const v = this.typed(key, 'integer') as number | undefined;
    return v === undefined ? undefined : this.num(key, min, max);
  }

  bool(key: string): boolean | undefined {
    return this.typed(key, 'boolean') as boolean | undefined;
  }

  obj(key: string): Node | undefined {
    return Node.of(this.raw[key], this.at(key), this.f);
  }

  reqObj(key: string): Node | undefined {
    if (!this.has(key)) { this.error(key, 'Required value'); return undefined; }
    return this.obj(key);
  }

  rawList(key: string): unknown[] {
    const v = this.typed(key, 'array');
    return (v as unknown[] | undefined) ?? [];
  }

  list(key: string): Node[] {
    const out: Node[] = [];
    for (const [i, v] of this.rawList(key).entries()) {
      const n = Node.of(v, `${this.at(key)}[${i}]`, this.f);
      if (n) out.push(n);
      else if (v === null) this.f.error(`${this.at(key)}[${i}]`, 'may not be null');
    }
    return out;
  }

  strList(key: string): string[] {
    const out: string[] = [];
    for (const [i, v] of this.rawList(key).entries()) {
      if (typeof v === 'string') out.push(v);
      else this.f.error(`${this.at(key)}[${i}]`, `Invalid value: "${kindOf(v)}": ${this.at(key)}[${i}] in body must be of type string`);
    }
    return out;
  }

  /** A map of strings (labels, header values). */
  strMap(key: string): Record<string, string> {
    const n = this.obj(key);
    const out: Record<string, string> = {};
    if (!n) return out;
    for (const [k, v] of Object.entries(n.raw)) {
      if (typeof v === 'string') out[k] = v;
      else n.error(k, `Invalid value: "${kindOf(v)}": ${n.at(k)} in body must be of type string`);
    }
    return out;
  }

  /** An enum given by name; undefined when unset. */
  oneOf<T extends string>(key: string, values: readonly T[]): T | undefined {
    const v = this.str(key);
    if (v === undefined) return undefined;
    if ((values as readonly string[]).includes(v)) return v as T;
    this.error(key, `Unsupported value: ${JSON.stringify(v)}: supported values: ${values.map((x) => JSON.stringify(x)).join(', ')}`);
    return undefined;
  }

  /** A duration of at least 1ms (Istio's CRD rule), in milliseconds. */
  duration(key: string): number | undefined {
    const v = this.str(key);
    if (v === undefined) return undefined;
    const ms = durationMs(v);
    if (ms === undefined || ms < 1) { this.invalid(key, v, 'must be a valid duration greater than 1ms'); return undefined; }
    return ms;
  }
}

/** A duration in milliseconds as Envoy's proto-JSON writes it ("1.5s"). */
export function protoDuration(ms: number): string {
  return `${Number((ms / 1000).toFixed(9))}s`;
}
