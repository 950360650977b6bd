import type { Msg } from '../config/fields.ts';
import { compileStringMatcher } from '../tls/context.ts';

type Headers = Record<string, string | string[] | undefined>;

/** What a route matches on, read once per request. */
export interface RequestView {
  readonly method: string;
  /** :path including the query string. */
  readonly path: string;
  readonly authority: string;
  readonly scheme: string;
  readonly headers: Headers;
}

export type HeaderPredicate = (req: RequestView) => boolean;

/** Header lookup, with the pseudo-headers (which codecs keep out of `headers`) read from the request itself. */
function headerGetter(name: string): (req: RequestView) => string | string[] | undefined {
  switch (name) {
    case ':method': return (r) => r.method;
    case ':path': return (r) => r.path;
    case ':authority': return (r) => r.authority;
    case ':scheme': return (r) => r.scheme;
    case 'host': return (r) => r.headers.host ?? r.authority;
    default: return (r) => r.headers[name];
  }
}

/** envoy.config.route.v3.RouteMatch compiled to one predicate over the path and one over headers. */
export interface CompiledMatch {
  readonly connect: boolean;
  readonly path: (path: string) => boolean;
  readonly headers: readonly HeaderPredicate[];
}

export function compileRouteMatch(m: Msg): CompiledMatch {
  for (const f of ['query_parameters', 'runtime_fraction', 'grpc', 'tls_context', 'dynamic_metadata', 'filter_state', 'path_match_policy']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const caseSensitive = m.bool('case_sensitive', true);
  const headers = m.list('headers').map(compileHeaderMatcher);
  if (m.has('connect_matcher')) return { connect: true, path: () => true, headers };
  return { connect: false, path: compilePathMatch(m, caseSensitive), headers };
}

function compilePathMatch(m: Msg, caseSensitive: boolean): (path: string) => boolean {
  const fold = (s: string): string => (caseSensitive ? s : s.toLowerCase());
  if (m.has('prefix')) {
    const prefix = fold(m.str('prefix'));
    if (prefix === '' || prefix === '/') return prefix === '' ? () => true : (p) => p.charCodeAt(0) === 47;
    return caseSensitive ? (p) => p.startsWith(prefix) : (p) => p.toLowerCase().startsWith(prefix);
  }
  if (m.has('path')) {
    const exact = fold(m.str('path'));
    return (p) => fold(stripQuery(p)) === exact;
  }
  if (m.has('path_separated_prefix')) {
    const prefix = fold(m.str('path_separated_prefix'));
    if (!prefix.startsWith('/') || prefix.endsWith('/') || /[?#]/.test(prefix)) {
      throw m.error('path_separated_prefix', 'must start with / and not end with / or contain ? or #');
    }
    return (p) => {
      const path = fold(stripQuery(p));
      return path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 47);
    };
  }
  if (m.has('safe_regex')) {
    const re = compileRegex(m.requiredMsg('safe_regex'), caseSensitive ? '' : 'i');
    return (p) => re.test(stripQuery(p));
  }
  throw m.error('', 'one of prefix, path, safe_regex, path_separated_prefix, connect_matcher is required');
}

export function stripQuery(p: string): string {
  const q = p.indexOf('?');
  return q < 0 ? p : p.slice(0, q);
}

/** RE2 syntax is close enough to JavaScript's for the patterns Envoy users write; anchored like RE2's full match. */
export function compileRegex(m: Msg, flags = ''): RegExp {
  const src = m.requiredStr('regex');
  try {
    return new RegExp(`^(?:${src})$`, flags);
  } catch (err) {
    throw m.error('regex', `invalid regular expression: ${(err as Error).message}`);
  }
}

/** envoy.config.route.v3.HeaderMatcher. Multiple values of a header are matched joined with ','. */
export function compileHeaderMatcher(m: Msg): HeaderPredicate {
  const name = m.requiredStr('name').toLowerCase();
  const get = headerGetter(name);
  const invert = m.bool('invert_match');
  const treatMissingAsEmpty = m.bool('treat_missing_header_as_empty');
  let test: (v: string) => boolean;
  let presentOnly = false;
  if (m.has('string_match')) test = compileStringMatcher(m.requiredMsg('string_match'));
  else if (m.has('exact_match')) { const v = m.str('exact_match'); test = (s) => s === v; }
  else if (m.has('prefix_match')) { const v = m.str('prefix_match'); test = (s) => s.startsWith(v); }
  else if (m.has('suffix_match')) { const v = m.str('suffix_match'); test = (s) => s.endsWith(v); }
  else if (m.has('contains_match')) { const v = m.str('contains_match'); test = (s) => s.includes(v); }
  else if (m.has('safe_regex_match')) { const re = compileRegex(m.requiredMsg('safe_regex_match')); test = (s) => re.test(s); }
  else if (m.has('range_match')) {
    const r = m.requiredMsg('range_match');
    const start = r.num('start'), end = r.num('end');
    test = (s) => /^-?\d+$/.test(s) && Number(s) >= start && Number(s) < end;
  } else if (m.has('present_match')) {
    const want = m.bool('present_match');
    return (r) => ((get(r) !== undefined) === want) !== invert;
  } else presentOnly = true;
  return (r) => {
    let v = get(r);
    if (v === undefined) {
      // Envoy: a missing header fails a value match, inverted or not (only presence matches see absence).
      if (!treatMissingAsEmpty) return false;
      v = '';
    }
    if (presentOnly) return !invert;
    const s = Array.isArray(v) ? v.join(',') : v;
    return test(s) !== invert;
  };
}
