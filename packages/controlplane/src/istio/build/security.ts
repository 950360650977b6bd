/**
 * PeerAuthentication, AuthorizationPolicy and RequestAuthentication → what each workload's inbound
 * side enforces (mTLS mode per port, jwt_authn and RBAC filters) and what ztunnels get (WDS
 * Authorizations). Selection as istiod does it: root-namespace policies apply mesh-wide,
 * namespace policies to their namespace, selectors narrow either to matching workloads; for
 * PeerAuthentication the most specific one wins (workload > namespace > mesh, the oldest of a kind).
 */
import type { Json, MeshWorkload, MtlsMode as MeshMtls, WorkloadSecurity } from '../../mesh/types.ts';
import type { AuthorizationPolicy, JwtRule, MtlsMode, PeerAuthentication, RequestAuthentication } from '../types.ts';
import type { MeshConfig } from '../types-k8s.ts';
import { rbacFilters } from '../authz/rbac.ts';
import { authorizationForZtunnel, peerAuthenticationForZtunnel, STATIC_STRICT, staticStrict } from '../authz/wds.ts';
import { selects, type Registry } from './registry.ts';
import type { Report } from './report.ts';

const JWT = 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication';

function applies(meta: { namespace: string }, selector: Readonly<Record<string, string>> | undefined, w: MeshWorkload, root: string): boolean {
  if (meta.namespace !== root && meta.namespace !== w.namespace) return false;
  return !selector || selects(selector, w.labels);
}

interface PeerChoice { readonly mesh?: PeerAuthentication; readonly ns?: PeerAuthentication; readonly workload?: PeerAuthentication }

function peerChoice(list: readonly PeerAuthentication[], w: MeshWorkload, root: string): PeerChoice {
  const noSelector = (p: PeerAuthentication): boolean => !p.selector || Object.keys(p.selector).length === 0;
  return {
    mesh: list.find((p) => p.meta.namespace === root && noSelector(p)),
    ns: w.namespace === root ? undefined : list.find((p) => p.meta.namespace === w.namespace && noSelector(p)),
    workload: w.namespace === root ? undefined : list.find((p) => p.meta.namespace === w.namespace && !noSelector(p) && selects(p.selector!, w.labels)),
  };
}

const set = (m: MtlsMode | undefined): m is Exclude<MtlsMode, 'UNSET'> => m !== undefined && m !== 'UNSET';

function effectiveMode(c: PeerChoice): MeshMtls {
  for (const p of [c.workload, c.ns, c.mesh]) if (p && set(p.mode)) return p.mode;
  return 'PERMISSIVE';
}

function jwtProvider(r: JwtRule, registry: Registry, ra: RequestAuthentication, i: number, report: Report): Json | undefined {
  const p: Json = {
    issuer: r.issuer, payload_in_metadata: 'payload', normalize_payload_in_metadata: { space_delimited_claims: ['permission', 'scope'] },
  };
  if (r.audiences.length) p.audiences = [...r.audiences];
  if (r.forwardOriginalToken) p.forward = true;
  if (r.outputPayloadToHeader) p.forward_payload_header = r.outputPayloadToHeader;
  if (r.outputClaimToHeaders.length) p.claim_to_headers = r.outputClaimToHeaders.map((c) => ({ header_name: c.header, claim_name: c.claim }));
  if (r.fromHeaders.length) p.from_headers = r.fromHeaders.map((h) => (h.prefix ? { name: h.name, value_prefix: h.prefix } : { name: h.name }));
  if (r.fromParams.length) p.from_params = [...r.fromParams];
  if (r.jwks !== undefined) p.local_jwks = { inline_string: r.jwks };
  else if (r.jwksUri) {
    const u = new URL(r.jwksUri);
    const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
    const host = registry.byHost.get(u.hostname);
    if (!host || !host.ports.some((x) => x.port === port)) {
      report.error(ra.meta, `spec.jwtRules[${i}].jwksUri`, `the JWKS host ${u.hostname}:${port} is not a service in the mesh: declare it with a ServiceEntry, or give the keys inline in jwks`);
      return undefined;
    }
    p.remote_jwks = { http_uri: { uri: r.jwksUri, cluster: `outbound|${port}||${u.hostname}`, timeout: `${(r.timeoutMs ?? 5000) / 1000}s` }, cache_duration: '300s' };
  }
  return p;
}

/** istiod's jwt_authn: each provider optional-but-valid (`origins-<i>` OR allow_missing), ANDed; or any provider alone. */
function jwtFilter(policies: readonly RequestAuthentication[], registry: Registry, report: Report): Json | undefined {
  const providers: Record<string, Json> = {};
  const inner: Json[] = [], outer: Json[] = [];
  let i = 0;
  for (const ra of policies) {
    for (const [j, r] of ra.jwtRules.entries()) {
      const p = jwtProvider(r, registry, ra, j, report);
      if (!p) continue;
      const name = `origins-${i++}`;
      providers[name] = p;
      inner.push({ requires_any: { requirements: [{ provider_name: name }, { allow_missing: {} }] } });
      outer.push({ provider_name: name });
    }
  }
  if (inner.length === 0) return undefined;
  const requires = inner.length === 1 ? inner[0] : { requires_any: { requirements: [...outer, { requires_all: { requirements: inner } }] } };
  return { name: 'envoy.filters.http.jwt_authn', typed_config: { '@type': JWT, providers, rules: [{ match: { prefix: '/' }, requires }], bypass_cors_preflight: true } };
}

/**
 * The WDS policy keys a workload's PeerAuthentications give it (istiod's
 * convertedSelectorPeerAuthentications): the static STRICT policy and/or its converted port-level one.
 */
function peerKeys(c: PeerChoice, root: string): { keys: string[]; strict: boolean; converted?: Json } {
  let strict = c.mesh?.mode === 'STRICT';
  if (c.ns && set(c.ns.mode)) strict = c.ns.mode === 'STRICT';
  const w = c.workload;
  if (!w) return { keys: strict ? [`${root}/${STATIC_STRICT}`] : [], strict };
  if (w.mode === 'STRICT') strict = true;
  if (w.mode === 'PERMISSIVE' || w.mode === 'DISABLE') strict = false;
  let converted: Json | undefined;
  const modes = [...w.portLevel.values()];
  if (w.portLevel.size) {
    const convert = (): void => { converted = peerAuthenticationForZtunnel(w, c.ns, c.mesh, root); };
    if (w.mode === 'STRICT') { if (modes.some((m) => m === 'PERMISSIVE' || m === 'DISABLE')) { convert(); strict = false; } }
    else if (w.mode === 'PERMISSIVE' || w.mode === 'DISABLE') { if (modes.includes('STRICT')) convert(); }
    else if (strict) { if (modes.includes('PERMISSIVE')) { convert(); strict = false; } }
    else { strict = false; if (modes.includes('STRICT')) convert(); }
  }
  const keys = strict ? [`${root}/${STATIC_STRICT}`] : [];
  if (converted) keys.push(`${w.meta.namespace}/${String(converted.name)}`);
  return { keys, strict, converted };
}

export interface SecurityResult {
  readonly workloads: MeshWorkload[];
  readonly wds: Json[];
  /** The mesh-wide mode (root namespace PeerAuthentication). */
  readonly meshMode: MeshMtls;
}

export function applySecurity(workloads: readonly MeshWorkload[], cfg: { peerAuthentications: readonly PeerAuthentication[]; authorizationPolicies: readonly AuthorizationPolicy[]; requestAuthentications: readonly RequestAuthentication[]; meshConfig: MeshConfig }, registry: Registry, report: Report): SecurityResult {
  const root = cfg.meshConfig.rootNamespace;
  const pas = cfg.peerAuthentications;
  const wds: Json[] = [];
  // Policies attached by targetRef belong to waypoints (waypoints.ts), not to sidecars or ztunnels.
  const selected = cfg.authorizationPolicies.filter((p) => p.targetRefs.length === 0);
  for (const p of selected) { const a = authorizationForZtunnel(p, root); if (a) wds.push(a); }
  let anyStrict = false;
  const out = workloads.map((w): MeshWorkload => {
    const choice = peerChoice(pas, w, root);
    const mtls = effectiveMode(choice);
    const portMtls = new Map<number, MeshMtls>();
    for (const [port, m] of choice.workload?.portLevel ?? []) portMtls.set(port, set(m) ? m : mtls);
    const aps = selected.filter((p) => (p.action === 'ALLOW' || p.action === 'DENY') && applies(p.meta, p.selector, w, root));
    const ras = cfg.requestAuthentications.filter((r) => applies(r.meta, r.selector, w, root));
    const jwt = jwtFilter(ras, registry, report);
    // ztunnel: selector policies are listed on the workload; namespace/global ones it finds by scope.
    const wdsPolicies = aps.filter((p) => p.selector).map((p) => `${p.meta.namespace}/${p.meta.name}`);
    const peer = peerKeys(choice, root);
    wdsPolicies.push(...peer.keys);
    if (peer.strict) anyStrict = true;
    if (peer.converted && !wds.some((x) => x.name === peer.converted!.name && x.namespace === peer.converted!.namespace)) wds.push(peer.converted);
    const security: WorkloadSecurity = {
      mtls, portMtls, httpFilters: [...(jwt ? [jwt] : []), ...rbacFilters(aps, false)], tcpFilters: rbacFilters(aps, true), wdsPolicies: [...new Set(wdsPolicies)].sort(),
    };
    return { ...w, security };
  });
  if (anyStrict) wds.push(staticStrict(root));
  const meshPa = pas.find((p) => p.meta.namespace === root && (!p.selector || Object.keys(p.selector).length === 0));
  return { workloads: out, wds, meshMode: meshPa && set(meshPa.mode) ? meshPa.mode : 'PERMISSIVE' };
}
