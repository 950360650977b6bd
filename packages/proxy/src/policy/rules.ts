import type { Msg } from '../config/fields.ts';
import { contains, parseCidrRange, type CidrRange } from '../core/cidr.ts';
import type { AuthzFacts } from './facts.ts';
import { compilePolicyHeaderMatcher, compilePathMatcher } from './header-matcher.ts';
import { compileStringMatcher, type StringPredicate } from '../matchers/string-matcher.ts';
import { compileMetadataMatcher } from './value-matcher.ts';
import { FilterStateObject } from '../core/filter-state.ts';

export type FactPredicate = (f: AuthzFacts) => boolean;

const ANY: FactPredicate = () => true;

function anyOf(list: readonly FactPredicate[]): FactPredicate {
  if (list.length === 1) return list[0];
  return (f) => { for (const p of list) if (p(f)) return true; return false; };
}

function allOf(list: readonly FactPredicate[]): FactPredicate {
  if (list.length === 1) return list[0];
  return (f) => { for (const p of list) if (!p(f)) return false; return true; };
}

function ipIn(range: CidrRange, pick: (f: AuthzFacts) => string): FactPredicate {
  return (f) => contains(range, pick(f));
}

/** The rule kinds a message may set: exactly one (a oneof). */
function onlyKind(m: Msg, kinds: readonly string[], what: string): string {
  const set = kinds.filter((k) => m.has(k));
  if (set.length === 1) return set[0];
  if (set.length === 0) {
    const unknown = Object.keys(m.raw).find((k) => m.has(k));
    if (unknown) throw m.error(unknown, `${what} kind is not supported`);
    throw m.error('', `one of ${kinds.join(', ')} is required`);
  }
  throw m.error(set[1], `only one ${what} kind may be set (also ${set[0]})`);
}

const PRINCIPAL_KINDS = ['any', 'authenticated', 'source_ip', 'direct_remote_ip', 'remote_ip', 'header', 'url_path', 'metadata',
  'filter_state', 'and_ids', 'or_ids', 'not_id'] as const;

/** envoy.config.rbac.v3.Principal compiled to a predicate over the facts. */
export function compilePrincipal(m: Msg): FactPredicate {
  const kind = onlyKind(m, PRINCIPAL_KINDS, 'principal');
  switch (kind) {
    case 'any':
      if (!m.bool('any')) throw m.error('any', 'must be true when set');
      return ANY;
    case 'authenticated': return compileAuthenticated(m.requiredMsg('authenticated'));
    case 'source_ip': case 'direct_remote_ip': return ipIn(parseCidrRange(m.requiredMsg(kind)), (f) => f.directRemoteIp);
    case 'remote_ip': return ipIn(parseCidrRange(m.requiredMsg(kind)), (f) => f.remoteIp);
    case 'header': { const h = compilePolicyHeaderMatcher(m.requiredMsg('header')); return (f) => h(f.request); }
    case 'url_path': { const p = compilePathMatcher(m.requiredMsg('url_path')); return (f) => p(f.request); }
    case 'metadata': { const md = compileMetadataMatcher(m.requiredMsg('metadata')); return (f) => md(f.metadata); }
    case 'filter_state': return compileFilterState(m.requiredMsg('filter_state'));
    case 'and_ids': return allOf(idList(m.requiredMsg('and_ids')));
    case 'or_ids': return anyOf(idList(m.requiredMsg('or_ids')));
    default: { const inner = compilePrincipal(m.requiredMsg('not_id')); return (f) => !inner(f); }
  }
}

function idList(m: Msg): FactPredicate[] {
  const ids = m.list('ids');
  if (ids.length === 0) throw m.error('ids', 'at least one principal is required');
  return ids.map(compilePrincipal);
}

/**
 * Authenticated: a TLS connection; with principal_name, some URI SAN, then some DNS SAN, then
 * the subject must match (Envoy's AuthenticatedMatcher order).
 */
function compileAuthenticated(m: Msg): FactPredicate {
  if (!m.has('principal_name')) return (f) => f.tls;
  const match = compileStringMatcher(m.requiredMsg('principal_name'));
  return (f) => {
    if (!f.tls) return false;
    for (const san of f.peerUriSans) if (match(san)) return true;
    for (const san of f.peerDnsSans) if (match(san)) return true;
    return match(f.peerSubject);
  };
}

/** envoy.type.matcher.v3.FilterStateMatcher: the object under `key` serialised as a string. */
function compileFilterState(m: Msg): FactPredicate {
  const key = m.requiredStr('key');
  if (m.has('address_match')) throw m.error('address_match', 'is not supported yet');
  const match: StringPredicate = compileStringMatcher(m.requiredMsg('string_match'));
  return (f) => {
    const v = f.filterState?.get(key);
    if (typeof v === 'string') return match(v);
    // Objects set by istio_authn / set_filter_state / internal_upstream (core/filter-state.ts): their string form.
    if (v instanceof FilterStateObject) return match(v.value);
    if (typeof v === 'number' || typeof v === 'boolean') return match(String(v));
    return false;
  };
}

const PERMISSION_KINDS = ['any', 'header', 'url_path', 'destination_ip', 'destination_port', 'destination_port_range', 'metadata',
  'requested_server_name', 'and_rules', 'or_rules', 'not_rule'] as const;

/** envoy.config.rbac.v3.Permission compiled to a predicate over the facts. */
export function compilePermission(m: Msg): FactPredicate {
  const kind = onlyKind(m, PERMISSION_KINDS, 'permission');
  switch (kind) {
    case 'any':
      if (!m.bool('any')) throw m.error('any', 'must be true when set');
      return ANY;
    case 'header': { const h = compilePolicyHeaderMatcher(m.requiredMsg('header')); return (f) => h(f.request); }
    case 'url_path': { const p = compilePathMatcher(m.requiredMsg('url_path')); return (f) => p(f.request); }
    case 'destination_ip': return ipIn(parseCidrRange(m.requiredMsg(kind)), (f) => f.destinationIp);
    case 'destination_port': {
      const port = m.num('destination_port');
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw m.error('destination_port', 'must be a port number in [0, 65535]');
      return (f) => f.destinationPort === port;
    }
    case 'destination_port_range': {
      const r = m.requiredMsg('destination_port_range');
      const start = r.num('start'), end = r.num('end');
      if (start > end) throw r.error('end', 'must not be below start');
      return (f) => f.destinationPort >= start && f.destinationPort < end;
    }
    case 'metadata': { const md = compileMetadataMatcher(m.requiredMsg('metadata')); return (f) => md(f.metadata); }
    case 'requested_server_name': {
      const match = compileStringMatcher(m.requiredMsg('requested_server_name'));
      return (f) => match(f.requestedServerName);
    }
    case 'and_rules': return allOf(ruleList(m.requiredMsg('and_rules')));
    case 'or_rules': return anyOf(ruleList(m.requiredMsg('or_rules')));
    default: { const inner = compilePermission(m.requiredMsg('not_rule')); return (f) => !inner(f); }
  }
}

function ruleList(m: Msg): FactPredicate[] {
  const rules = m.list('rules');
  if (rules.length === 0) throw m.error('rules', 'at least one permission is required');
  return rules.map(compilePermission);
}

/** A policy's permissions and principals: each list is any-of, and both must match. */
export function compilePolicy(m: Msg): FactPredicate {
  for (const f of ['condition', 'checked_condition', 'cel_config']) if (m.has(f)) throw m.error(f, 'CEL conditions are not supported');
  const perms = m.list('permissions');
  const ids = m.list('principals');
  if (perms.length === 0) throw m.error('permissions', 'at least one permission is required');
  if (ids.length === 0) throw m.error('principals', 'at least one principal is required');
  const p = anyOf(perms.map(compilePermission));
  const q = anyOf(ids.map(compilePrincipal));
  return (f) => p(f) && q(f);
}
