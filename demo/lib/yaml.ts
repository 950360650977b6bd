/**
 * A YAML emitter for plain config trees (objects, arrays, strings, numbers, booleans), enough for
 * Envoy bootstraps. Strings are quoted when YAML would read them as something else.
 */
type Value = string | number | boolean | null | undefined | Value[] | { [k: string]: Value };

const PLAIN = /^[A-Za-z_/.][\w./:@-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|~|y|n)$/i;

function scalar(v: string | number | boolean | null): string {
  if (typeof v !== 'string') return String(v);
  return PLAIN.test(v) && !RESERVED.test(v) ? v : JSON.stringify(v);
}

function isBlock(v: Value): v is Value[] | { [k: string]: Value } {
  return typeof v === 'object' && v !== null && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
}

function emit(v: Value, indent: string): string {
  if (Array.isArray(v)) {
    return v.map((item) => {
      if (!isBlock(item)) return `${indent}- ${leaf(item)}\n`;
      // The first line of a block item goes after the dash.
      const body = emit(item, indent + '  ');
      return `${indent}- ${body.slice(indent.length + 2)}`;
    }).join('');
  }
  let out = '';
  for (const [k, item] of Object.entries(v as Record<string, Value>)) {
    if (item === undefined) continue;
    const key = scalar(k);
    out += isBlock(item) ? `${indent}${key}:\n${emit(item, Array.isArray(item) ? indent : indent + '  ')}` : `${indent}${key}: ${leaf(item)}\n`;
  }
  return out;
}

function leaf(v: Value): string {
  if (Array.isArray(v)) return '[]';
  if (typeof v === 'object' && v !== null) return '{}';
  return scalar(v ?? null);
}

export function toYaml(doc: Record<string, Value>): string {
  return emit(doc, '');
}

export type { Value as YamlValue };
