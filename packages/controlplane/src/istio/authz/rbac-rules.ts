/**
 * One AuthorizationPolicy rule → an Envoy RBAC policy (permissions and principals), following
 * istiod's authz model: each `to` is a permission and each `from` a principal (each ANDing its
 * fields, values ORed, notValues under a NOT), `when` conditions join every one of them.
 * On a TCP chain an HTTP-only field fails the rule: an ALLOW rule is dropped (narrower), a DENY
 * rule loses the field (wider) — the fail-closed choice istiod makes.
 */
import type { AuthzRule } from '../types.ts';

type Json = Record<string, unknown>;

/** Thrown by a generator for a field the chain cannot evaluate (HTTP-only on TCP, bad value). */
class Skip extends Error {}

const JWT_FILTER = 'envoy.filters.http.jwt_authn';
const ANY_REGEX: Json = { safe_regex: { regex: '.+' } };

export function quoteMeta(s: string): string {
  return s.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

/** istiod's StringMatcherWithPrefix: `*` any, `*x` suffix, `x*` prefix, else exact. */
export function stringMatcher(v: string, prefix = ''): Json {
  if (v === '*') return { safe_regex: { regex: '.+' } };
  if (v.startsWith('*')) return prefix === '' ? { suffix: v.slice(1) } : { safe_regex: { regex: `${prefix}.*${quoteMeta(v.slice(1))}` } };
  if (v.endsWith('*')) return { prefix: prefix + v.slice(0, -1) };
  return { exact: prefix + v };
}

function headerMatcher(name: string, v: string, ignoreCase = false): Json {
  if (v === '*') return { name, present_match: true };
  const ic = ignoreCase ? { ignore_case: true } : {};
  if (v.startsWith('*')) return { name, string_match: { suffix: v.slice(1), ...ic } };
  if (v.endsWith('*')) return { name, string_match: { prefix: v.slice(0, -1), ...ic } };
  return { name, string_match: { exact: v, ...ic } };
}

export function cidr(v: string): Json {
  const [address, len] = v.split('/');
  if (!address) throw new Skip(`invalid address ${v}`);
  return { address_prefix: address, prefix_len: len === undefined ? (address.includes(':') ? 128 : 32) : Number(len) };
}

function port(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) > 65535) throw new Skip(`invalid port ${v}`);
  return Number(v);
}

function orValues(values: readonly string[]): Json {
  const ms = values.map((v) => ({ string_match: stringMatcher(v) }));
  return ms.length === 1 ? ms[0] : { or_match: { value_matchers: ms } };
}

/** A JWT claim path matched as a value or a list containing it (istiod's "extended JWT" form). */
function claimMatcher(claims: readonly string[], value: Json): Json {
  return { filter: JWT_FILTER, path: ['payload', ...claims].map((key) => ({ key })), value: { or_match: { value_matchers: [{ list_match: { one_of: value } }, value] } } };
}

function bracketed(s: string): string {
  if (!s.startsWith('[') || !s.endsWith(']')) throw new Skip(`expecting format [<NAME>], but found ${s}`);
  return s.slice(1, -1);
}

/** `[a][b]` → [a, b]; `[a.b]` → [a.b]. */
function nestedBracketed(s: string): string[] {
  const m = s.match(/\[[^[\]]*\]/g);
  if (m && m.join('') === s) return m.map((x) => x.slice(1, -1));
  return [bracketed(s)];
}

interface Field {
  readonly key: string;
  readonly values: readonly string[];
  readonly notValues: readonly string[];
  /** one value → a matcher (OR-ed); or all values at once (`extended`). */
  readonly one?: (value: string, forTcp: boolean) => Json;
  readonly all?: (values: readonly string[], forTcp: boolean) => Json;
}

const httpOnly = (key: string, forTcp: boolean): void => { if (forTcp) throw new Skip(`"${key}" is HTTP only`); };

// ---- principal generators ----
/** How a principal's identity is matched: the connection's certificate (sidecars), or a waypoint's `io.istio.peer_principal` filter state. */
export type PrincipalOf = (m: Json) => Json;
export const CERTIFICATE: PrincipalOf = (m) => ({ authenticated: { principal_name: m } });
export const PEER_FILTER_STATE: PrincipalOf = (m) => ({ filter_state: { key: 'io.istio.peer_principal', string_match: m } });
const P = {
  srcIp: (v: string): Json => ({ direct_remote_ip: cidr(v) }),
  remoteIp: (v: string): Json => ({ remote_ip: cidr(v) }),
  namespace: (id: PrincipalOf) => (v: string): Json => id({ safe_regex: { regex: `.*/ns/${v.split('*').map(quoteMeta).join('.*')}/.*` } }),
  trustDomain: (id: PrincipalOf) => (v: string): Json => {
    if (v === '*') return id({ prefix: 'spiffe://' });
    if (!v.includes('*')) return id({ prefix: `spiffe://${v}/` });
    const [a, b] = [v.slice(0, v.indexOf('*')), v.slice(v.indexOf('*') + 1)];
    return id({ safe_regex: { regex: `spiffe://${quoteMeta(a)}[^/]*${quoteMeta(b)}/.*` } });
  },
  serviceAccount: (ns: string, id: PrincipalOf) => (v: string): Json => {
    const [n, sa] = v.includes('/') ? [v.slice(0, v.indexOf('/')), v.slice(v.indexOf('/') + 1)] : [ns, v];
    return id({ safe_regex: { regex: `spiffe://.+/ns/${quoteMeta(n)}/(.+/|)sa/${quoteMeta(sa)}(/.+)?` } });
  },
  principal: (id: PrincipalOf) => (v: string): Json => id(stringMatcher(v, 'spiffe://')),
  requestPrincipals: (values: readonly string[], forTcp: boolean): Json => {
    httpOnly('request.auth.principal', forTcp);
    const or = values.map((value) => {
      const idx = value.lastIndexOf('/');
      const found = idx >= 0;
      const iss = found ? value.slice(0, idx) : value, sub = found ? value.slice(idx + 1) : '';
      let mi: Json, ms: Json;
      if (value === '*') { mi = ANY_REGEX; ms = ANY_REGEX; }
      else if (value.startsWith('*')) {
        if (found) { mi = iss === '*' ? ANY_REGEX : { suffix: iss.slice(1) }; ms = { exact: sub }; }
        else { mi = ANY_REGEX; ms = { suffix: value.slice(1) }; }
      } else if (value.endsWith('*')) {
        if (found) { mi = { exact: iss }; ms = sub === '*' ? ANY_REGEX : { prefix: sub.slice(0, -1) }; }
        else { mi = { prefix: value.slice(0, -1) }; ms = ANY_REGEX; }
      } else { mi = { exact: iss }; ms = { exact: sub }; }
      const claim = (c: string, m: Json): Json => ({ metadata: { filter: JWT_FILTER, path: [{ key: 'payload' }, { key: c }], value: { string_match: m } } });
      return { and_ids: { ids: [claim('iss', mi), claim('sub', ms)] } };
    });
    return or.length === 1 ? or[0] : { or_ids: { ids: or } };
  },
  claim: (names: readonly string[]) => (values: readonly string[], forTcp: boolean): Json => { httpOnly('request.auth.claims', forTcp); return { metadata: claimMatcher(names, orValues(values)) }; },
  header: (key: string) => (v: string, forTcp: boolean): Json => { httpOnly(key, forTcp); return { header: headerMatcher(bracketed(key.slice('request.headers'.length)), v) }; },
};

// ---- permission generators ----
const Q = {
  destIp: (v: string): Json => ({ destination_ip: cidr(v) }),
  destPort: (v: string): Json => ({ destination_port: port(v) }),
  sni: (v: string): Json => ({ requested_server_name: stringMatcher(v) }),
  host: (v: string, forTcp: boolean): Json => { httpOnly('hosts', forTcp); return { header: headerMatcher(':authority', v, v !== '*') }; },
  method: (v: string, forTcp: boolean): Json => { httpOnly('methods', forTcp); return { header: headerMatcher(':method', v) }; },
  path: (v: string, forTcp: boolean): Json => {
    httpOnly('paths', forTcp);
    // istiod writes path templates as a uri_template permission, which skua-proxy does not evaluate yet:
    // like any field the chain cannot evaluate, an ALLOW rule using one is dropped and a DENY rule loses it.
    if (v.includes('{*}') || v.includes('{**}')) throw new Skip(`path template ${v} is not supported by skua-proxy yet`);
    return { url_path: { path: stringMatcher(v) } };
  },
  envoyFilter: (key: string) => (values: readonly string[]): Json => {
    const body = key.slice('experimental.'.length).replace(/\]$/, '');
    const at = body.indexOf('[');
    if (at < 0) throw new Skip(`invalid key: ${key}`);
    const ms = values.map((v) => (v.startsWith('[') && v.endsWith(']') ? { list_match: { one_of: { string_match: stringMatcher(v.slice(1, -1)) } } } : { string_match: stringMatcher(v) }));
    return { metadata: { filter: body.slice(0, at), path: [{ key: body.slice(at + 1) }], value: ms.length === 1 ? ms[0] : { or_match: { value_matchers: ms } } } };
  },
};

function whenField(key: string, values: readonly string[], notValues: readonly string[], ns: string, id: PrincipalOf): { field: Field; permission: boolean } {
  const f = (one?: Field['one'], all?: Field['all']): Field => ({ key, values, notValues, one, all });
  switch (key) {
    case 'destination.ip': return { field: f(Q.destIp), permission: true };
    case 'destination.port': return { field: f(Q.destPort), permission: true };
    case 'connection.sni': return { field: f(Q.sni), permission: true };
    case 'source.ip': return { field: f(P.srcIp), permission: false };
    case 'remote.ip': return { field: f(P.remoteIp), permission: false };
    case 'source.namespace': return { field: f(P.namespace(id)), permission: false };
    case 'source.trustDomain': return { field: f(P.trustDomain(id)), permission: false };
    case 'source.serviceAccount': return { field: f(P.serviceAccount(ns, id)), permission: false };
    case 'source.principal': return { field: f(P.principal(id)), permission: false };
    case 'request.auth.principal': return { field: f(undefined, P.requestPrincipals), permission: false };
    case 'request.auth.audiences': return { field: f(undefined, P.claim(['aud'])), permission: false };
    case 'request.auth.presenter': return { field: f(undefined, P.claim(['azp'])), permission: false };
  }
  if (key.startsWith('experimental.envoy.filters.')) return { field: f(undefined, Q.envoyFilter(key)), permission: true };
  if (key.startsWith('request.headers')) return { field: f(P.header(key)), permission: false };
  if (key.startsWith('request.auth.claims')) return { field: f(undefined, P.claim(nestedBracketed(key.slice('request.auth.claims'.length)))), permission: false };
  throw new Skip(`unknown attribute ${key}`);
}

/** One field's matchers: OR of its values, NOT(OR of its notValues); the extended ones take all values in one matcher. */
function fieldMatchers(fd: Field, forTcp: boolean, allow: boolean, or: 'or_rules' | 'or_ids', not: 'not_rule' | 'not_id', set: 'rules' | 'ids'): Json[] {
  const out: Json[] = [];
  const attempt = (fn: () => Json): Json | undefined => {
    try { return fn(); } catch (err) { if (err instanceof Skip && !allow) return undefined; throw err; }
  };
  for (const [list, negate] of [[fd.values, false], [fd.notValues, true]] as const) {
    if (list.length === 0) continue;
    let m: Json | undefined;
    if (fd.all) m = attempt(() => fd.all!(list, forTcp));
    else {
      const each = list.map((v) => attempt(() => fd.one!(v, forTcp))).filter((x) => x !== undefined);
      m = each.length ? { [or]: { [set]: each } } : undefined;
    }
    if (m) out.push(negate ? { [not]: m } : m);
  }
  return out;
}

function source(s: AuthzRule['from'][number], ns: string, id: PrincipalOf): Field[] {
  const f = (key: string, values: readonly string[], notValues: readonly string[], one?: Field['one'], all?: Field['all']): Field => ({ key, values, notValues, one, all });
  return [
    f('source.principal', s.principals, s.notPrincipals, P.principal(id)),
    f('request.auth.principal', s.requestPrincipals, s.notRequestPrincipals, undefined, P.requestPrincipals),
    f('source.serviceAccount', s.serviceAccounts, s.notServiceAccounts, P.serviceAccount(ns, id)),
    f('source.trustDomain', s.trustDomains, s.notTrustDomains, P.trustDomain(id)),
    f('source.namespace', s.namespaces, s.notNamespaces, P.namespace(id)),
    f('remote.ip', s.remoteIpBlocks, s.notRemoteIpBlocks, P.remoteIp),
    f('source.ip', s.ipBlocks, s.notIpBlocks, P.srcIp),
  ].filter((x) => x.values.length || x.notValues.length);
}

function operation(o: AuthzRule['to'][number]): Field[] {
  const f = (key: string, values: readonly string[], notValues: readonly string[], one: Field['one']): Field => ({ key, values, notValues, one });
  return [f('hosts', o.hosts, o.notHosts, Q.host), f('methods', o.methods, o.notMethods, Q.method), f('paths', o.paths, o.notPaths, Q.path), f('destination.port', o.ports, o.notPorts, Q.destPort)]
    .filter((x) => x.values.length || x.notValues.length);
}

/**
 * The RBAC policy for one rule, or undefined when the rule cannot apply on this chain (an ALLOW
 * rule with an HTTP-only field on TCP, or a value that does not parse).
 */
export function rulePolicy(rule: AuthzRule, namespace: string, forTcp: boolean, allow: boolean, id: PrincipalOf = CERTIFICATE): Json | undefined {
  try {
    const basePerm: Field[] = [], basePrinc: Field[] = [];
    for (const w of rule.when) {
      const { field, permission } = whenField(w.key, w.values, w.notValues, namespace, id);
      (permission ? basePerm : basePrinc).push(field);
    }
    const permLists = rule.to.length ? rule.to.map((o) => [...operation(o), ...basePerm]) : [basePerm];
    const princLists = rule.from.length ? rule.from.map((s) => [...source(s, namespace, id), ...basePrinc]) : [basePrinc];
    const permissions = permLists.map((fields) => {
      const and = fields.flatMap((fd) => fieldMatchers(fd, forTcp, allow, 'or_rules', 'not_rule', 'rules'));
      return { and_rules: { rules: and.length ? and : [{ any: true }] } };
    });
    const principals = princLists.map((fields) => {
      const and = fields.flatMap((fd) => fieldMatchers(fd, forTcp, allow, 'or_ids', 'not_id', 'ids'));
      return { and_ids: { ids: and.length ? and : [{ any: true }] } };
    });
    return { permissions, principals };
  } catch (err) {
    if (err instanceof Skip) return undefined;
    throw err;
  }
}
