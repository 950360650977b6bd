import type { Msg } from '../config/fields.ts';
import type { RequestFacts } from './facts.ts';
import { compileStringMatcher, type StringPredicate } from '../matchers/string-matcher.ts';
import { compileRe2 } from '../matchers/regex.ts';

export type RequestPredicate = (req: RequestFacts | undefined) => boolean;

/** A header's value as Envoy's matchers see it: pseudo-headers from the request line, several values joined by ','. */
function headerValue(req: RequestFacts | undefined, name: string): string | undefined {
  if (!req) return undefined;
  switch (name) {
    case ':method': return req.method;
    case ':path': return req.path;
    case ':authority': case 'host': return req.authority;
    case ':scheme': return req.scheme;
  }
  const v = req.headers[name];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.join(',');
}

/**
 * envoy.config.route.v3.HeaderMatcher as RBAC uses it. A network (L4) decision has no request:
 * every header is then missing, as with Envoy's empty header map.
 */
export function compilePolicyHeaderMatcher(m: Msg): RequestPredicate {
  const name = m.requiredStr('name').toLowerCase();
  const invert = m.bool('invert_match');
  const missingAsEmpty = m.bool('treat_missing_header_as_empty');
  let test: StringPredicate | undefined;
  // No value matcher at all means "present" (Envoy's HeaderMatchType::Present with present = true).
  let present = true;
  if (m.has('string_match')) test = compileStringMatcher(m.requiredMsg('string_match'));
  else if (m.has('exact_match')) { const v = m.str('exact_match'); test = (s) => s === v; }
  else if (m.has('prefix_match')) { const v = m.str('prefix_match'); test = (s) => s.startsWith(v); }
  else if (m.has('suffix_match')) { const v = m.str('suffix_match'); test = (s) => s.endsWith(v); }
  else if (m.has('contains_match')) { const v = m.str('contains_match'); test = (s) => s.includes(v); }
  else if (m.has('safe_regex_match')) { const re = compileRe2(m.requiredMsg('safe_regex_match')); test = (s) => re.test(s); }
  else if (m.has('range_match')) {
    const r = m.requiredMsg('range_match');
    const start = r.num('start'), end = r.num('end');
    test = (s) => /^-?\d+$/.test(s) && Number(s) >= start && Number(s) < end;
  } else if (m.has('present_match')) present = m.bool('present_match');
  if (!test) {
    return (req) => (headerValue(req, name) !== undefined) === present ? !invert : invert;
  }
  const t = test;
  return (req) => {
    let v = headerValue(req, name);
    if (v === undefined) {
      // Envoy: a missing header fails every value match, inverted or not.
      if (!missingAsEmpty) return false;
      v = '';
    }
    return t(v) !== invert;
  };
}

/** envoy.type.matcher.v3.PathMatcher: the path without query and fragment. */
export function compilePathMatcher(m: Msg): RequestPredicate {
  const test = compileStringMatcher(m.requiredMsg('path'));
  return (req) => {
    if (!req) return false;
    const p = req.path;
    let end = p.length;
    for (let i = 0; i < p.length; i++) { const c = p.charCodeAt(i); if (c === 63 || c === 35) { end = i; break; } }
    return test(end === p.length ? p : p.slice(0, end));
  };
}
