import type { Msg } from '../config/fields.ts';
import { readFractionalPercent } from '../config/percent.ts';
import { compileStringMatcher } from '../matchers/string-matcher.ts';
import { compileRe2 } from '../matchers/regex.ts';
import { compilePolicyHeaderMatcher } from '../policy/header-matcher.ts';
import { EMPTY_LIST } from '../core/shared-values.ts';

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

/** envoy.config.route.v3.RouteMatch compiled to one predicate over the path and one over headers. */
export interface CompiledMatch {
  readonly connect: boolean;
  readonly path: (path: string) => boolean;
  readonly headers: readonly HeaderPredicate[];
}

/**
 * RouteMatch beyond the path: runtime_fraction, grpc, headers, query_parameters — in Envoy's order
 * (RouteEntryImplBase::matchRoute), all folded into `headers` as request predicates.
 */
export function compileRouteMatch(m: Msg): CompiledMatch {
  for (const f of ['tls_context', 'dynamic_metadata', 'filter_state', 'path_match_policy']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const caseSensitive = m.bool('case_sensitive', true);
  const headers: HeaderPredicate[] = [];
  const runtime = m.msg('runtime_fraction');
  if (runtime) headers.push(compileRuntimeFraction(runtime));
  if (m.has('grpc')) headers.push(isGrpcRequest);
  for (const h of m.list('headers')) headers.push(compileHeaderMatcher(h));
  for (const q of m.list('query_parameters')) headers.push(compileQueryParameterMatcher(q));
  // Most routes have none: one shared empty list (a mesh's 5,000 routes held 5,000).
  const predicates = headers.length ? headers : EMPTY_LIST;
  if (m.has('connect_matcher')) return { connect: true, path: anyPath, headers: predicates };
  return { connect: false, path: compilePathMatch(m, caseSensitive), headers: predicates };
}

/** Prefix '' and '/' (nearly every mesh route): shared predicates, not a closure (and its context) per route. */
const anyPath = (): boolean => true;
const slashPath = (p: string): boolean => p.charCodeAt(0) === 47;

// ------------------------------------------------------------------ runtime_fraction


/**
 * Envoy draws one random number per stream (the HCM's stream id) and every runtime_fraction
 * route of that request tests it: `random % denominator < numerator`. So routes with 10% and
 * then 30% split traffic 10/20/70, not 10/27/63. Kept for the last request seen: route lookup
 * for one request is synchronous, and a new request object draws anew.
 */
let randomFor: RequestView | undefined;
let randomValue = 0;

export function requestRandom(req: RequestView): number {
  if (req !== randomFor) {
    randomFor = req;
    randomValue = (Math.random() * 4294967296) >>> 0;
  }
  return randomValue;
}

/** RuntimeFractionalPercent: default_value only (Skua has no runtime layer; runtime_key is ignored). */
function compileRuntimeFraction(m: Msg): HeaderPredicate {
  const { numerator, denominator } = readFractionalPercent(m.requiredMsg('default_value'));
  if (numerator >= denominator) return () => true;
  if (numerator <= 0) return () => false;
  return (req) => requestRandom(req) % denominator < numerator;
}

// ------------------------------------------------------------------ grpc

/** Envoy's Grpc::Common::isGrpcRequestHeaders: content-type exactly application/grpc or application/grpc+<subtype>. */
function isGrpcRequest(req: RequestView): boolean {
  const ct = req.headers['content-type'];
  if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) return false;
  return ct.length === 16 || ct.charCodeAt(16) === 43 /* + */;
}

// ------------------------------------------------------------------ query_parameters

/**
 * The query string split as Envoy's route matcher does (QueryParamsMulti::parseQueryString: on
 * '&', the name up to the first '=', no percent-decoding; the first value of a name counts).
 * Parsed once per path into a reused offset table — no strings are made until a matcher needs
 * a value — so consecutive query matchers of one request share one pass over the query.
 */
let parsedPath: string | undefined;
let paramCount = 0;
/** Per parameter: name start, name end (the '=' or the end), parameter end. */
let offsets = new Int32Array(3 * 16);
let parses = 0;

function parseQuery(path: string): void {
  parsedPath = path;
  paramCount = 0;
  parses++;
  let start = path.indexOf('?');
  if (start < 0) return;
  start++;
  while (start < path.length) {
    let end = path.indexOf('&', start);
    if (end < 0) end = path.length;
    let eq = path.indexOf('=', start);
    if (eq < 0 || eq > end) eq = end;
    if (3 * paramCount + 3 > offsets.length) { const grown = new Int32Array(offsets.length * 2); grown.set(offsets); offsets = grown; }
    const o = 3 * paramCount++;
    offsets[o] = start; offsets[o + 1] = eq; offsets[o + 2] = end;
    start = end + 1;
  }
}

/** Index of the first parameter called `name` in `path`'s query, or -1. */
function findParam(path: string, name: string): number {
  if (path !== parsedPath) parseQuery(path);
  for (let i = 0; i < paramCount; i++) {
    const o = 3 * i;
    if (offsets[o + 1] - offsets[o] === name.length && path.startsWith(name, offsets[o])) return i;
  }
  return -1;
}

/** The first value of query parameter `name` ('' when it has no '='), undefined when absent. */
export function queryParameter(path: string, name: string): string | undefined {
  const i = findParam(path, name);
  if (i < 0) return undefined;
  const o = 3 * i;
  return offsets[o + 1] === offsets[o + 2] ? '' : path.slice(offsets[o + 1] + 1, offsets[o + 2]);
}

/** How many query strings have been parsed (tests: one per request, however many matchers). */
export function queryParseCount(): number {
  return parses;
}

/**
 * envoy.config.route.v3.QueryParameterMatcher: the first value of `name` against string_match;
 * present_match compares presence with its value; neither set means "present".
 */
export function compileQueryParameterMatcher(m: Msg): HeaderPredicate {
  const name = m.requiredStr('name');
  if (name.length > 1024) throw m.error('name', 'must be at most 1024 bytes');
  if (m.has('present_match')) {
    const want = m.bool('present_match');
    return (req) => (findParam(req.path, name) >= 0) === want;
  }
  if (m.has('string_match')) {
    const test = compileStringMatcher(m.requiredMsg('string_match'));
    return (req) => {
      const v = queryParameter(req.path, name);
      return v !== undefined && test(v);
    };
  }
  return (req) => findParam(req.path, name) >= 0;
}

function compilePathMatch(m: Msg, caseSensitive: boolean): (path: string) => boolean {
  const fold = (s: string): string => (caseSensitive ? s : s.toLowerCase());
  if (m.has('prefix')) {
    const prefix = fold(m.str('prefix'));
    if (prefix === '' || prefix === '/') return prefix === '' ? anyPath : slashPath;
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
    // Envoy: case_sensitive is ignored for safe_regex (a pattern can fold case itself).
    const re = compileRe2(m.requiredMsg('safe_regex'));
    return (p) => re.test(stripQuery(p));
  }
  throw m.error('', 'one of prefix, path, safe_regex, path_separated_prefix, connect_matcher is required');
}

export function stripQuery(p: string): string {
  const q = p.indexOf('?');
  return q < 0 ? p : p.slice(0, q);
}

/**
 * envoy.config.route.v3.HeaderMatcher: one implementation for routes, faults, retries, local replies and
 * RBAC (policy/header-matcher.ts). Multiple values of a header are matched joined with ','.
 */
export function compileHeaderMatcher(m: Msg): HeaderPredicate {
  return compilePolicyHeaderMatcher(m);
}
