/**
 * The one envoy.type.matcher.v3.StringMatcher, shared by routes, RBAC, ext_authz, CORS and TLS
 * SAN validation. Envoy's semantics: `ignore_case` folds exact/prefix/suffix/contains and never
 * applies to safe_regex; regexes are RE2-checked (matchers/regex.ts) and run in linear time.
 */
import type { Msg } from '../config/fields.ts';
import { compileRe2, compileRe2Text } from './regex.ts';

export type StringPredicate = (s: string) => boolean;

/** A StringMatcher given as a plain value, for compilers that do not start from Envoy JSON. */
export type StringMatchSpec = (
  | { readonly exact: string } | { readonly prefix: string } | { readonly suffix: string } | { readonly contains: string }
  | { readonly regex: string }
  /** Istio's `presence`: any non-empty value. */
  | { readonly presence: true }
) & { readonly ignoreCase?: boolean };

type Kind = 'exact' | 'prefix' | 'suffix' | 'contains';

/** envoy.type.matcher.v3.StringMatcher compiled to a predicate (throws ConfigError naming the field). */
export function compileStringMatcher(m: Msg): StringPredicate {
  const ignoreCase = m.bool('ignore_case');
  if (m.has('custom')) throw m.error('custom', 'string matcher extensions are not supported');
  for (const kind of ['exact', 'prefix', 'suffix', 'contains'] as const) {
    if (m.has(kind)) return literal(kind, m.str(kind), ignoreCase);
  }
  if (m.has('safe_regex')) {
    const re = compileRe2(m.requiredMsg('safe_regex'));
    return (s) => re.test(s);
  }
  throw m.error('', 'one of exact, prefix, suffix, contains, safe_regex is required');
}

/** The same matcher from a plain value; `path` names it in errors. */
export function stringMatcher(spec: StringMatchSpec, path = 'string_match'): StringPredicate {
  const ignoreCase = spec.ignoreCase === true;
  if ('exact' in spec) return literal('exact', spec.exact, ignoreCase);
  if ('prefix' in spec) return literal('prefix', spec.prefix, ignoreCase);
  if ('suffix' in spec) return literal('suffix', spec.suffix, ignoreCase);
  if ('contains' in spec) return literal('contains', spec.contains, ignoreCase);
  if ('presence' in spec) return (s) => s.length > 0;
  const re = compileRe2Text(spec.regex, `${path}.regex`);
  return (s) => re.test(s);
}

function literal(kind: Kind, value: string, ignoreCase: boolean): StringPredicate {
  if (!ignoreCase) {
    switch (kind) {
      case 'exact': return (s) => s === value;
      case 'prefix': return (s) => s.startsWith(value);
      case 'suffix': return (s) => s.endsWith(value);
      case 'contains': return (s) => s.includes(value);
    }
  }
  const v = value.toLowerCase();
  switch (kind) {
    case 'exact': return (s) => s.length === v.length && s.toLowerCase() === v;
    case 'prefix': return (s) => s.toLowerCase().startsWith(v);
    case 'suffix': return (s) => s.toLowerCase().endsWith(v);
    case 'contains': return (s) => s.toLowerCase().includes(v);
  }
}
