/**
 * Istio security resources → ztunnel's istio.security.Authorization (WDS), as istiod's ambient
 * index converts them: only L4 attributes; an ALLOW rule with an HTTP attribute is dropped, a DENY
 * rule loses it. A workload PeerAuthentication with port-level mTLS becomes a DENY policy
 * `converted_peer_authentication_<name>`; mesh/namespace STRICT is istiod's static
 * `istio_converted_static_strict`. Rules are written in the wire's rules/clauses/matches form.
 */
import { isIP } from 'node:net';
import { ipBytes } from '../../mesh/names.ts';
import type { AuthorizationPolicy, AuthzRule, MtlsMode, PeerAuthentication } from '../types.ts';

type Json = Record<string, unknown>;

export const AUTHORIZATION = 'type.googleapis.com/istio.security.Authorization';
export const STATIC_STRICT = 'istio_converted_static_strict';

function stringMatch(values: readonly string[]): Json[] {
  return values.map((v) => (v === '*' ? { presence: {} } : v.startsWith('*') ? { suffix: v.slice(1) } : v.endsWith('*') ? { prefix: v.slice(0, -1) } : { exact: v }));
}

function ports(values: readonly string[]): number[] {
  return values.filter((v) => /^\d+$/.test(v) && Number(v) <= 65535).map(Number);
}

function addresses(values: readonly string[]): Json[] {
  const out: Json[] = [];
  for (const v of values) {
    const [ip, len] = v.split('/');
    if (!isIP(ip)) continue;
    out.push({ address: ipBytes(ip), length: len === undefined ? (isIP(ip) === 4 ? 32 : 128) : Number(len) });
  }
  return out;
}

/** Drops empty lists, as proto-JSON does. */
function match(fields: Record<string, unknown[]>): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(fields)) if (v.length) out[k] = v;
  return out;
}

const L4_WHEN = new Set(['source.ip', 'source.namespace', 'source.principal', 'destination.ip', 'destination.port']);

function clauses(rule: AuthzRule, allow: boolean, namespace: string): Json[] | undefined {
  let l7 = false;
  const to = rule.to.map((o) => {
    if (o.hosts.length || o.notHosts.length || o.methods.length || o.notMethods.length || o.paths.length || o.notPaths.length) l7 = true;
    return match({ destination_ports: ports(o.ports), not_destination_ports: ports(o.notPorts) });
  });
  const sa = (list: readonly string[]): Json[] => list.map((v) => (v.includes('/') ? { namespace: v.slice(0, v.indexOf('/')), serviceAccount: v.slice(v.indexOf('/') + 1) } : { namespace, serviceAccount: v }));
  const from = rule.from.map((s) => {
    if (s.remoteIpBlocks.length || s.notRemoteIpBlocks.length || s.requestPrincipals.length || s.notRequestPrincipals.length) l7 = true;
    return match({
      source_ips: addresses(s.ipBlocks), not_source_ips: addresses(s.notIpBlocks), namespaces: stringMatch(s.namespaces), not_namespaces: stringMatch(s.notNamespaces),
      service_accounts: sa(s.serviceAccounts), not_service_accounts: sa(s.notServiceAccounts), principals: stringMatch(s.principals), not_principals: stringMatch(s.notPrincipals),
    });
  });
  const out: Json[] = [];
  if (to.length) out.push({ matches: to });
  if (from.length) out.push({ matches: from });
  for (const w of rule.when) {
    if (!L4_WHEN.has(w.key)) l7 = true;
    const pick = <T>(key: string, values: readonly string[], f: (v: readonly string[]) => T[]): T[] => (w.key === key ? f(values) : []);
    out.push({
      matches: [match({
        namespaces: pick('source.namespace', w.values, stringMatch), principals: pick('source.principal', w.values, stringMatch),
        source_ips: pick('source.ip', w.values, addresses), destination_ports: pick('destination.port', w.values, ports), destination_ips: pick('destination.ip', w.values, addresses),
        not_namespaces: pick('source.namespace', w.notValues, stringMatch), not_principals: pick('source.principal', w.notValues, stringMatch),
        not_source_ips: pick('source.ip', w.notValues, addresses), not_destination_ports: pick('destination.port', w.notValues, ports), not_destination_ips: pick('destination.ip', w.notValues, addresses),
      })],
    });
  }
  return allow && l7 ? undefined : out;
}

/** An AuthorizationPolicy for ztunnel; undefined for actions ztunnel does not take. */
export function authorizationForZtunnel(p: AuthorizationPolicy, rootNamespace: string): Json | undefined {
  if (p.action !== 'ALLOW' && p.action !== 'DENY') return undefined;
  const scope = p.selector ? 'WORKLOAD_SELECTOR' : p.meta.namespace === rootNamespace ? 'GLOBAL' : 'NAMESPACE';
  const rules: Json[] = [];
  for (const r of p.rules) {
    const c = clauses(r, p.action === 'ALLOW', p.meta.namespace);
    if (c) rules.push({ clauses: c });
  }
  // proto-JSON leaves out the default action (ALLOW), as istiod's goldens show.
  const out: Json = { '@type': AUTHORIZATION, name: p.meta.name, namespace: p.meta.namespace, scope, ...(p.action === 'DENY' ? { action: 'DENY' } : {}), rules };
  if (p.dryRun) out.dry_run = true;
  return out;
}

const NO_PEER: Json = { not_principals: [{ presence: {} }] };
const strict = (m: MtlsMode | undefined): boolean => m === 'STRICT';
const unset = (m: MtlsMode | undefined): boolean => m === undefined || m === 'UNSET';

/**
 * A workload PeerAuthentication with port-level modes → its DENY Authorization (istiod's
 * convertPeerAuthentication); `ns`/`root` are the namespace and mesh-wide policies in effect.
 */
export function peerAuthenticationForZtunnel(pa: PeerAuthentication, ns: PeerAuthentication | undefined, root: PeerAuthentication | undefined, rootNamespace: string): Json | undefined {
  if (pa.meta.namespace === rootNamespace || !pa.selector || pa.portLevel.size === 0) return undefined;
  const mode = pa.mode;
  const rules: Json[] = [];
  const groups: Json[] = [];
  if (strict(mode)) rules.push({ matches: [NO_PEER] });
  let nonStrictPort = false;
  for (const [port, m] of [...pa.portLevel].sort((a, b) => a[0] - b[0])) {
    if (strict(m)) {
      if (strict(mode) || (unset(mode) && ns !== undefined && strict(ns.mode)) || ((ns === undefined || unset(ns.mode)) && root !== undefined && strict(root.mode))) continue;
      groups.push({ clauses: [{ matches: [{ ...NO_PEER, destination_ports: [port] }] }] });
    } else if (m === 'PERMISSIVE' || m === 'DISABLE') {
      if (mode === 'PERMISSIVE' || mode === 'DISABLE') continue;
      if (unset(mode) && ((ns !== undefined && !strict(ns.mode)) || (ns === undefined && root !== undefined && !strict(root.mode)) || (ns === undefined && root === undefined))) continue;
      nonStrictPort = true;
      rules.push({ matches: [{ not_destination_ports: [port] }] });
    }
  }
  if (strict(mode) && !nonStrictPort) return undefined;
  if (rules.length === 0 && groups.length === 0) return undefined;
  const mergeStrict = (root !== undefined && strict(root.mode) && (ns === undefined || unset(ns.mode) || strict(ns.mode))) || (ns !== undefined && strict(ns.mode));
  if (mergeStrict && nonStrictPort) rules.push({ matches: [NO_PEER] });
  if (rules.length) groups.push({ clauses: rules });
  return { '@type': AUTHORIZATION, name: `converted_peer_authentication_${pa.meta.name}`, namespace: pa.meta.namespace, scope: 'WORKLOAD_SELECTOR', action: 'DENY', rules: groups };
}

/** istiod's global DENY of connections without a peer identity (mesh or namespace STRICT). */
export function staticStrict(rootNamespace: string): Json {
  return { '@type': AUTHORIZATION, name: STATIC_STRICT, namespace: rootNamespace, scope: 'GLOBAL', action: 'DENY', rules: [{ clauses: [{ matches: [NO_PEER] }] }] };
}
