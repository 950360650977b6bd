/**
 * Validated Istio resources → the mesh model (src/mesh/types.ts) the translation turns into xDS and
 * WDS, plus istioctl-analyze style problems (broken references, conflicts). Decided without I/O.
 */
import type { Capture, Mesh, MeshWorkload } from '../../mesh/types.ts';
import type { LoadedDoc, Problem } from '../documents.ts';
import type { Meta } from '../types.ts';
import type { IstioConfig, IstioResource, MeshConfig } from '../types-k8s.ts';
import { DEFAULT_MESH } from '../validate/kube.ts';
import { analyze } from './analyze.ts';
import { httpRouteRoutes, istioGateway, k8sGateway } from './gateways.ts';
import { applyDestinationRules, virtualServiceRoutes } from './networking.ts';
import { buildRegistry, DOMAIN, selects } from './registry.ts';
import { Report } from './report.ts';
import { applySecurity } from './security.ts';
import { bindWaypoints, planWaypoints } from './waypoints.ts';

/** The resources of the documents that have no errors, by kind. */
export function collect(resources: readonly IstioResource[]): IstioConfig {
  const by = new Map<string, unknown[]>();
  for (const r of resources) { let l = by.get(r.kind); if (!l) { l = []; by.set(r.kind, l); } l.push(r.value); }
  const of = <T>(k: IstioResource['kind']): T[] => (by.get(k) ?? []) as T[];
  const meshes = of<MeshConfig>('MeshConfig');
  return {
    services: of('Service'), pods: of('Pod'), serviceEntries: of('ServiceEntry'), workloadEntries: of('WorkloadEntry'),
    virtualServices: of('VirtualService'), destinationRules: of('DestinationRule'), gateways: of('Gateway'), sidecars: of('Sidecar'),
    peerAuthentications: of('PeerAuthentication'), authorizationPolicies: of('AuthorizationPolicy'), requestAuthentications: of('RequestAuthentication'),
    k8sGateways: of('K8sGateway'), httpRoutes: of('HTTPRoute'), namespaces: of('Namespace'), meshConfig: meshes.find((m) => m.meta?.namespace === m.rootNamespace) ?? meshes[0] ?? DEFAULT_MESH,
  };
}

export function resourcesOf(docs: readonly LoadedDoc[]): IstioResource[] {
  return docs.filter((d) => d.resource && !d.problems.some((p) => p.level === 'Error')).map((d) => d.resource!);
}

/** Sidecar resources: a workload's own (selector) first, then its namespace's, then the root namespace's. */
function egressOf(w: MeshWorkload, cfg: IstioConfig, mesh: MeshConfig): readonly string[] | undefined {
  const own = cfg.sidecars.find((s) => s.meta.namespace === w.namespace && s.workloadSelector && selects(s.workloadSelector, w.labels));
  const ns = cfg.sidecars.find((s) => s.meta.namespace === w.namespace && !s.workloadSelector);
  const root = cfg.sidecars.find((s) => s.meta.namespace === mesh.rootNamespace && !s.workloadSelector);
  const sc = own ?? ns ?? root;
  if (!sc || sc.egressHosts.length === 0) return undefined;
  // `./host` means the Sidecar's own namespace.
  return sc.egressHosts.map((h) => (h.startsWith('./') ? `${sc.meta.namespace}/${h.slice(2)}` : h));
}

function captureOf(cfg: IstioConfig, report: Report): Capture {
  const sidecars = cfg.pods.filter((p) => p.sidecar || p.router);
  const none = sidecars.filter((p) => p.interception === 'NONE');
  if (none.length === 0) return 'iptables';
  for (const p of sidecars) {
    if (p.interception !== 'NONE') report.error(p.meta, 'metadata.annotations[sidecar.istio.io/interceptionMode]', 'every pod of the mesh takes the same interception mode here; others use NONE');
  }
  return 'none';
}

export interface BuildResult {
  readonly mesh: Mesh;
  readonly problems: readonly Problem[];
}

/** Two documents for one resource (kind, namespace, name): the first file's wins, as `kubectl apply` of both would keep one. */
function dedupe(cfg: IstioConfig, report: Report): IstioConfig {
  const seen = new Map<string, string>();
  const keep = <T extends { readonly meta: Meta }>(list: readonly T[]): T[] => list.filter((x) => {
    const m = x.meta;
    const id = `${m.kind} ${m.namespace}/${m.name}`;
    const prev = seen.get(id);
    if (prev === undefined) { seen.set(id, m.file); return true; }
    report.error(m, 'metadata.name', `${id} is also declared in ${prev}; this one is ignored`, 'SKUA0004');
    return false;
  });
  return {
    ...cfg, services: keep(cfg.services), pods: keep(cfg.pods), serviceEntries: keep(cfg.serviceEntries), workloadEntries: keep(cfg.workloadEntries),
    virtualServices: keep(cfg.virtualServices), destinationRules: keep(cfg.destinationRules), gateways: keep(cfg.gateways), sidecars: keep(cfg.sidecars),
    peerAuthentications: keep(cfg.peerAuthentications), authorizationPolicies: keep(cfg.authorizationPolicies), requestAuthentications: keep(cfg.requestAuthentications),
    k8sGateways: keep(cfg.k8sGateways), httpRoutes: keep(cfg.httpRoutes),
  };
}

export function buildMesh(input: IstioConfig): BuildResult {
  const report = new Report();
  // Waypoint pods are not routers; a waypoint without a declared Service gets the one Istio makes.
  const { cfg, plan } = planWaypoints(dedupe(input, report), report);
  const registry = buildRegistry(cfg, report);
  const withRules = applyDestinationRules(registry.services, cfg.destinationRules, cfg.meshConfig);
  const gateways = [...cfg.gateways.map(istioGateway), ...cfg.k8sGateways.map(k8sGateway).filter((g) => g !== undefined)];
  const routes = [...virtualServiceRoutes(cfg.virtualServices, registry, report), ...httpRouteRoutes(cfg.httpRoutes, gateways, registry, report)];
  const security = applySecurity(registry.workloads, cfg, registry, report);
  const withEgress = security.workloads.map((w) => {
    const egress = w.sidecar ? egressOf(w, cfg, cfg.meshConfig) : undefined;
    return egress ? { ...w, egress } : w;
  });
  const { services, workloads, waypoints } = bindWaypoints(plan, cfg, withRules, withEgress, report);
  analyze(cfg, services, workloads, gateways, registry, report);
  const mesh: Mesh = {
    trustDomain: cfg.meshConfig.trustDomain, domain: DOMAIN, clusterId: cfg.meshConfig.clusterId, mtls: security.meshMode, capture: captureOf(cfg, report),
    services, workloads, routes, policies: [], gateways, waypoints, wdsAuthorizations: security.wds, outboundAllowAny: cfg.meshConfig.outboundAllowAny,
  };
  return { mesh, problems: report.problems };
}
