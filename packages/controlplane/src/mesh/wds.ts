/**
 * The mesh as ztunnel sees it (WDS): an istio.workload.Address per service and workload, and
 * istio.security.Authorization per L4 policy, plus istiod's static DENY for mesh-wide STRICT mTLS.
 */
import type { Mesh, MeshPolicy, MeshService, MeshWaypoint, MeshWorkload, PortProtocol } from './types.ts';
import { canonicalName, canonicalRevision, ipBytes, selects, T, workloadUid, type Json } from './names.ts';

const APP_PROTOCOL: Record<PortProtocol, string> = { http: 'HTTP11', http2: 'HTTP2', grpc: 'GRPC', tcp: 'TCP' };

/** The root namespace: policies there apply mesh-wide (scope GLOBAL). */
export const ROOT_NAMESPACE = 'istio-system';

/** Where ztunnels find a waypoint: its Service by hostname, on the HBONE port. */
function gatewayAddress(wp: MeshWaypoint): Json {
  return { hostname: { namespace: wp.namespace, hostname: wp.hostname }, hbone_mtls_port: wp.port };
}

function serviceAddress(mesh: Mesh, s: MeshService): Json {
  const service: Json = {
    name: s.name, namespace: s.namespace, hostname: s.hostname, addresses: [{ address: ipBytes(s.vip) }],
    ports: s.ports.map((p) => ({ service_port: p.port, target_port: p.targetPort, app_protocol: APP_PROTOCOL[p.protocol] })),
  };
  const wp = s.waypoint ? mesh.waypoints?.find((x) => x.key === s.waypoint) : undefined;
  if (wp) service.waypoint = gatewayAddress(wp);
  return { '@type': T.address, service };
}

function policyKey(p: MeshPolicy): string {
  return `${p.namespace}/${p.name}`;
}

function workloadFields(mesh: Mesh, w: MeshWorkload): Json {
  const services: Json = {};
  for (const s of mesh.services) {
    if (!w.services.includes(s.hostname)) continue;
    services[`${s.namespace}/${s.hostname}`] = { ports: s.ports.map((p) => ({ service_port: p.port, target_port: p.targetPort })) };
  }
  const policies = [...mesh.policies.filter((p) => p.selector && p.namespace === w.namespace && selects(p.selector, w.labels)).map(policyKey), ...(w.security?.wdsPolicies ?? [])];
  const out: Json = {
    uid: workloadUid(mesh, w), name: w.name, namespace: w.namespace, addresses: [ipBytes(w.ip)],
    trust_domain: mesh.trustDomain, service_account: w.serviceAccount, canonical_name: canonicalName(w),
    canonical_revision: canonicalRevision(w), workload_name: w.workloadName, cluster_id: mesh.clusterId, services,
  };
  // ztunnel tunnels to ambient workloads (and waypoints, which terminate HBONE) with HBONE; sidecar and plain workloads take plain TCP.
  if (w.ambient || w.waypointProxy) out.tunnel_protocol = 'HBONE';
  if (w.node) out.node = w.node;
  if (policies.length) out.authorization_policies = policies;
  return out;
}

function workloadAddress(mesh: Mesh, w: MeshWorkload): Json {
  return { '@type': T.address, workload: workloadFields(mesh, w) };
}

/**
 * Envoy-side workload discovery (istio.workload.BootstrapExtension subscribes to istio.workload.Workload):
 * waypoints look their peers up by IP for telemetry. Only meshes with waypoints get them.
 */
export function discoveryWorkloads(mesh: Mesh): Json[] {
  if (!mesh.waypoints?.length) return [];
  return mesh.workloads.map((w) => ({ '@type': T.workload, ...workloadFields(mesh, w) }));
}

function policyAuthorization(p: MeshPolicy): Json {
  const clauses: Json[] = [];
  if (p.from.length) {
    clauses.push({
      matches: p.from.map((f) => {
        const m: Json = {};
        if (f.principals.length) m.principals = f.principals.map((x) => ({ exact: x }));
        if (f.namespaces.length) m.namespaces = f.namespaces.map((x) => ({ exact: x }));
        if (f.serviceAccounts.length) m.service_accounts = f.serviceAccounts.map((x) => ({ namespace: x.split('/')[0], serviceAccount: x.split('/')[1] }));
        return m;
      }),
    });
  }
  if (p.ports.length) clauses.push({ matches: [{ destination_ports: [...p.ports] }] });
  const scope = p.selector ? 'WORKLOAD_SELECTOR' : p.namespace === ROOT_NAMESPACE ? 'GLOBAL' : 'NAMESPACE';
  // One rule; a rule with no clauses matches every connection.
  return { '@type': T.authorization, name: p.name, namespace: p.namespace, scope, action: p.action, rules: [{ clauses }] };
}

/** istiod's mesh-wide STRICT PeerAuthentication for ztunnel: deny any connection without a peer identity. */
function strictDeny(): Json {
  return {
    '@type': T.authorization, name: 'istio_converted_static_strict', namespace: ROOT_NAMESPACE, scope: 'GLOBAL', action: 'DENY',
    rules: [{ clauses: [{ matches: [{ not_principals: [{ presence: {} }] }] }] }],
  };
}

export function wdsResources(mesh: Mesh): Json[] {
  const out: Json[] = [...mesh.services.map((s) => serviceAddress(mesh, s)), ...mesh.workloads.map((w) => workloadAddress(mesh, w))];
  out.push(...mesh.policies.map(policyAuthorization));
  // Istio input brings its own (AuthorizationPolicies, converted PeerAuthentications, the static STRICT policy).
  if (mesh.wdsAuthorizations) out.push(...mesh.wdsAuthorizations);
  else if (mesh.mtls === 'STRICT') out.push(strictDeny());
  return out;
}
