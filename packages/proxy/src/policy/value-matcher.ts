import type { Msg } from '../config/fields.ts';
import type { DynamicMetadata } from './facts.ts';
import { compileStringMatcher } from '../matchers/string-matcher.ts';

/** Marks a value that is not there (a google.protobuf.Value with no kind set). */
export const ABSENT: unique symbol = Symbol('absent');
export type JsonValue = unknown;
export type ValuePredicate = (v: JsonValue | typeof ABSENT) => boolean;

/** envoy.type.matcher.v3.ValueMatcher over a JSON value (a google.protobuf.Value). */
export function compileValueMatcher(m: Msg): ValuePredicate {
  if (m.has('null_match')) return (v) => v === null;
  if (m.has('double_match')) return compileDoubleMatcher(m.requiredMsg('double_match'));
  if (m.has('string_match')) {
    const test = compileStringMatcher(m.requiredMsg('string_match'));
    return (v) => typeof v === 'string' && test(v);
  }
  if (m.has('bool_match')) { const want = m.bool('bool_match'); return (v) => v === want; }
  if (m.has('present_match')) {
    // Envoy: present_match false never matches (it is not "absent_match").
    const want = m.bool('present_match');
    return want ? (v) => v !== ABSENT : () => false;
  }
  if (m.has('list_match')) {
    const lm = m.requiredMsg('list_match');
    const one = compileValueMatcher(lm.requiredMsg('one_of'));
    return (v) => {
      if (!Array.isArray(v)) return false;
      for (const e of v) if (one(e)) return true;
      return false;
    };
  }
  if (m.has('or_match')) {
    const any = m.requiredMsg('or_match').list('value_matchers').map(compileValueMatcher);
    return (v) => any.some((p) => p(v));
  }
  throw m.error('', 'one of null_match, double_match, string_match, bool_match, present_match, list_match, or_match is required');
}

function compileDoubleMatcher(m: Msg): ValuePredicate {
  if (m.has('exact')) { const x = m.num('exact'); return (v) => v === x; }
  const r = m.requiredMsg('range');
  const start = r.num('start', -Infinity), end = r.num('end', Infinity);
  return (v) => typeof v === 'number' && v >= start && v < end;
}

/** The value at `path` (keys of nested Structs) in one metadata namespace, or ABSENT. */
export function metadataValue(md: DynamicMetadata | undefined, filter: string, path: readonly string[]): JsonValue | typeof ABSENT {
  const ns = md?.get(filter);
  if (ns === undefined) return ABSENT;
  let cur: unknown = ns;
  for (const key of path) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur)) return ABSENT;
    cur = (cur as Record<string, unknown>)[key];
    if (cur === undefined) return ABSENT;
  }
  return cur;
}

export type MetadataPredicate = (md: DynamicMetadata | undefined) => boolean;

/** envoy.type.matcher.v3.MetadataMatcher: filter namespace, a path of keys, a value matcher, invert. */
export function compileMetadataMatcher(m: Msg): MetadataPredicate {
  const filter = m.requiredStr('filter');
  const path = m.list('path').map((s) => {
    if (!s.has('key')) throw s.error('key', 'is required');
    return s.str('key');
  });
  if (path.length === 0) throw m.error('path', 'at least one path segment is required');
  const value = compileValueMatcher(m.requiredMsg('value'));
  const invert = m.bool('invert');
  return (md) => value(metadataValue(md, filter, path)) !== invert;
}
