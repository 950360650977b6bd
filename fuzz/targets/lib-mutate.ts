/**
 * Structure-aware mutation of a JSON config, driven by the fuzzer's bytes (so libFuzzer's own
 * mutations of those bytes explore the config space, and a crash input replays exactly).
 */

/** Reads the fuzz input as a stream of choices; past its end every choice is 0. */
export class Bytes {
  private readonly data: Buffer;
  private at = 0;
  constructor(data: Buffer) { this.data = data; }
  get done(): boolean { return this.at >= this.data.length; }
  byte(): number { return this.at < this.data.length ? this.data[this.at++] : 0; }
  /** An integer in [0, n). */
  int(n: number): number {
    if (n <= 1) return 0;
    const v = n <= 256 ? this.byte() : (this.byte() << 16) | (this.byte() << 8) | this.byte();
    return v % n;
  }
  str(): string {
    const len = this.int(24);
    const end = Math.min(this.data.length, this.at + len);
    const s = this.data.toString('latin1', this.at, end);
    this.at = end;
    return s;
  }
}

type Container = Record<string, unknown> | unknown[];
interface Slot { parent: Container; key: string | number }

/** Every (parent, key) in the tree, depth first. */
function slots(root: Container, out: Slot[] = []): Slot[] {
  const keys: Array<string | number> = Array.isArray(root) ? root.map((_v, i) => i) : Object.keys(root);
  for (const k of keys) {
    out.push({ parent: root, key: k });
    const v = (root as Record<string | number, unknown>)[k];
    if (v && typeof v === 'object') slots(v as Container, out);
  }
  return out;
}

/** Values that break assumptions: wrong types, edges of ranges, Envoy-looking strings. */
const INTERESTING: readonly unknown[] = [
  null, true, false, 0, -1, 1, 0.5, 2 ** 31, 2 ** 53, -(2 ** 63), 1e308, Number.NaN, '', ' ', '0', '-1', '1.5s', '-1s', '1e9s',
  '99999999999999999999', 'NaN', '0.0.0.0', '::', '127.0.0.1', '[::1]', '*', '/', '.*', '(', '[', '\\', '%', '%REQ(', '%%',
  'type.googleapis.com/google.protobuf.Struct', 'type.googleapis.com/unknown.Type', 'envoy.filters.http.router',
  'STATIC', 'EDS', 'ROUND_ROBIN', 'ORIGINAL_DST', 'HTTP2', 'AUTO', 'INBOUND', 'x'.repeat(300), {}, [], [{}], { '@type': '' },
];

/** A fresh copy: the shared objects must never be edited by a later mutation. */
function pick(b: Bytes): unknown {
  return structuredClone(INTERESTING[b.int(INTERESTING.length)]);
}

export function mutate(root: Record<string, unknown>, b: Bytes): void {
  const all = slots(root);
  if (all.length === 0) { root[b.str() || 'x'] = pick(b); return; }
  const s = all[b.int(all.length)];
  const p = s.parent as Record<string | number, unknown>;
  switch (b.int(8)) {
    case 0: p[s.key] = pick(b); break;
    case 1: if (Array.isArray(s.parent)) s.parent.splice(s.key as number, 1); else delete p[s.key]; break;
    case 2: p[s.key] = b.str(); break;
    case 3: p[s.key] = b.int(1 << 24) - (1 << 23); break;
    case 4: { const other = all[b.int(all.length)]; p[s.key] = structuredClone((other.parent as Record<string | number, unknown>)[other.key]); break; }
    case 5: if (Array.isArray(s.parent)) s.parent.push(structuredClone(p[s.key])); else p[`${String(s.key)}${b.str()}`] = p[s.key]; break;
    case 6: { const v = p[s.key]; p[s.key] = Array.isArray(v) ? v[0] : [v]; break; }
    default: { const v = p[s.key]; if (v && typeof v === 'object' && !Array.isArray(v)) (v as Record<string, unknown>)[b.str() || 'unknown_field'] = pick(b); else p[s.key] = String(v); }
  }
}
