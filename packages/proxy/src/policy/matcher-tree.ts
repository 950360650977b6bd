import type { Msg } from '../config/fields.ts';
import type { AuthzFacts } from './facts.ts';
import type { Decision, RbacEngine } from './engine.ts';
import { compileStringMatcher } from '../matchers/string-matcher.ts';

/**
 * The RBAC `matcher` form: an xds.type.matcher.v3.Matcher tree whose actions are
 * envoy.config.rbac.v3.Action. Inputs are the network, TLS and (HTTP only) request-header
 * inputs Envoy's RBAC accepts; a request no matcher takes is denied, as in Envoy.
 */

const ACTION_TYPE = 'type.googleapis.com/envoy.config.rbac.v3.Action';
const NET = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.';
const SSL = 'type.googleapis.com/envoy.extensions.matching.common_inputs.ssl.v3.';
const HEADER_INPUT = 'type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput';

type Input = (f: AuthzFacts) => string | undefined;
type Predicate = (f: AuthzFacts) => boolean;
/** undefined: no match (try the next matcher / on_no_match). */
type Node = (f: AuthzFacts) => Decision | undefined;

const NO_MATCH: Decision = Object.freeze({ allowed: false, policy: '', log: false });

export function compileMatcherTree(m: Msg, network: boolean): RbacEngine {
  const root = compileMatcher(m, network);
  return { decide: (f) => root(f) ?? NO_MATCH };
}

function compileMatcher(m: Msg, network: boolean): Node {
  const onNoMatch = m.has('on_no_match') ? compileOnMatch(m.requiredMsg('on_no_match'), network) : undefined;
  let body: Node;
  if (m.has('matcher_list')) {
    const entries = m.requiredMsg('matcher_list').list('matchers').map((fm) => ({
      predicate: compilePredicate(fm.requiredMsg('predicate'), network),
      onMatch: compileOnMatch(fm.requiredMsg('on_match'), network),
    }));
    if (entries.length === 0) throw m.error('matcher_list.matchers', 'at least one matcher is required');
    body = (f) => {
      for (const e of entries) if (e.predicate(f)) return e.onMatch(f);
      return undefined;
    };
  } else if (m.has('matcher_tree')) {
    body = compileMatcherTreeMaps(m.requiredMsg('matcher_tree'), network);
  } else throw m.error('', 'one of matcher_list, matcher_tree is required');
  if (!onNoMatch) return body;
  return (f) => body(f) ?? onNoMatch(f);
}

function compileMatcherTreeMaps(t: Msg, network: boolean): Node {
  const input = compileInput(t.requiredMsg('input'), network);
  if (t.has('custom_match')) throw t.error('custom_match', 'is not supported');
  const exact = t.msg('exact_match_map');
  const prefix = t.msg('prefix_match_map');
  const source = exact ?? prefix;
  if (!source) throw t.error('', 'one of exact_match_map, prefix_match_map is required');
  const map = source.requiredMsg('map');
  const table = new Map<string, Node>();
  for (const key of Object.keys(map.raw)) table.set(key, compileOnMatch(map.requiredMsg(key), network));
  if (exact) return (f) => { const v = input(f); return v === undefined ? undefined : table.get(v)?.(f); };
  // Longest prefix first, as Envoy's prefix map does.
  const keys = [...table.keys()].sort((a, b) => b.length - a.length);
  return (f) => {
    const v = input(f);
    if (v === undefined) return undefined;
    for (const k of keys) if (v.startsWith(k)) return (table.get(k) as Node)(f);
    return undefined;
  };
}

function compileOnMatch(m: Msg, network: boolean): Node {
  if (m.bool('keep_matching')) throw m.error('keep_matching', 'is not supported');
  if (m.has('matcher')) return compileMatcher(m.requiredMsg('matcher'), network);
  const action = m.requiredMsg('action');
  const tc = action.requiredMsg('typed_config');
  if (tc.str('@type') !== ACTION_TYPE) throw tc.error('@type', `RBAC matcher actions must be ${ACTION_TYPE}`);
  const kind = tc.enumOf('action', ['ALLOW', 'DENY', 'LOG'] as const);
  const d: Decision = Object.freeze({ allowed: kind !== 'DENY', policy: tc.str('name'), log: kind === 'LOG' });
  return () => d;
}

function compilePredicate(m: Msg, network: boolean): Predicate {
  if (m.has('single_predicate')) {
    const s = m.requiredMsg('single_predicate');
    if (s.has('custom_match')) throw s.error('custom_match', 'is not supported');
    const input = compileInput(s.requiredMsg('input'), network);
    const test = compileStringMatcher(s.requiredMsg('value_match'));
    return (f) => { const v = input(f); return v !== undefined && test(v); };
  }
  if (m.has('or_matcher')) {
    const list = m.requiredMsg('or_matcher').list('predicate').map((p) => compilePredicate(p, network));
    if (list.length < 2) throw m.error('or_matcher.predicate', 'at least two predicates are required');
    return (f) => list.some((p) => p(f));
  }
  if (m.has('and_matcher')) {
    const list = m.requiredMsg('and_matcher').list('predicate').map((p) => compilePredicate(p, network));
    if (list.length < 2) throw m.error('and_matcher.predicate', 'at least two predicates are required');
    return (f) => list.every((p) => p(f));
  }
  if (m.has('not_matcher')) { const inner = compilePredicate(m.requiredMsg('not_matcher'), network); return (f) => !inner(f); }
  throw m.error('', 'one of single_predicate, or_matcher, and_matcher, not_matcher is required');
}

function compileInput(m: Msg, network: boolean): Input {
  const tc = m.requiredMsg('typed_config');
  const url = tc.str('@type');
  switch (url) {
    case HEADER_INPUT: {
      if (network) throw tc.error('@type', 'the network RBAC filter cannot match on request headers');
      const name = tc.requiredStr('header_name').toLowerCase();
      return (f) => headerOf(f, name);
    }
    case `${NET}DestinationIPInput`: return (f) => f.destinationIp;
    case `${NET}DestinationPortInput`: return (f) => String(f.destinationPort);
    case `${NET}SourceIPInput`: return (f) => f.remoteIp;
    case `${NET}DirectSourceIPInput`: return (f) => f.directRemoteIp;
    case `${NET}ServerNameInput`: return (f) => f.requestedServerName || undefined;
    case `${SSL}UriSanInput`: return (f) => (f.peerUriSans.length ? f.peerUriSans.join(',') : undefined);
    case `${SSL}DnsSanInput`: return (f) => (f.peerDnsSans.length ? f.peerDnsSans.join(',') : undefined);
    case `${SSL}SubjectInput`: return (f) => (f.tls && f.peerSubject ? f.peerSubject : undefined);
  }
  throw tc.error('@type', `RBAC cannot match on input ${url || '(none)'}`);
}

function headerOf(f: AuthzFacts, name: string): string | undefined {
  const r = f.request;
  if (!r) return undefined;
  switch (name) {
    case ':method': return r.method;
    case ':path': return r.path;
    case ':authority': case 'host': return r.authority;
    case ':scheme': return r.scheme;
  }
  const v = r.headers[name];
  return v === undefined ? undefined : typeof v === 'string' ? v : v.join(',');
}
