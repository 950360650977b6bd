/**
 * Ambient waypoints, as istiod reads them: a Gateway API Gateway of class `istio-waypoint` (its
 * HBONE listener, `istio.io/waypoint-for`), the pods that run it (labelled
 * `gateway.networking.k8s.io/gateway-name`), its Service (created as Istio's gateway controller
 * does when none is declared), the services bound to it (`istio.io/use-waypoint` on the Service or
 * its Namespace, `istio.io/use-waypoint-namespace` for another namespace's waypoint) and the
 * AuthorizationPolicies attached to it or to its services by targetRefs.
 */
import type { MeshService, MeshWaypoint, MeshWorkload, WaypointSecurity } from '../../mesh/types.ts';
import { rbacFilters } from '../authz/rbac.ts';
import { PEER_FILTER_STATE } from '../authz/rbac-rules.ts';
import type { AuthorizationPolicy, Labels, Meta } from '../types.ts';
import type { IstioConfig, K8sGateway, KubeService } from '../types-k8s.ts';
import { DOMAIN } from './registry.ts';
import type { Report } from './report.ts';

const USE = 'istio.io/use-waypoint';
const USE_NS = 'istio.io/use-waypoint-namespace';
const FOR = 'istio.io/waypoint-for';
const GATEWAY_NAME = ['gateway.networking.k8s.io/gateway-name', 'istio.io/gateway-name'];
const TRAFFIC_TYPES = ['service', 'workload', 'all', 'none'];

interface WaypointGateway {
  readonly key: string;
  readonly gateway: K8sGateway;
  readonly port: number;
  readonly trafficType: string;
}

export interface WaypointPlan {
  readonly gateways: ReadonlyMap<string, WaypointGateway>;
  /** `namespace/pod` → the waypoint key it runs. */
  readonly pods: ReadonlyMap<string, string>;
}

const hostOf = (name: string, namespace: string): string => `${name}.${namespace}.svc.${DOMAIN}`;

/** The waypoints, their pods (no longer routers or sidecars) and Services (made when none is declared). */
export function planWaypoints(cfg: IstioConfig, report: Report): { cfg: IstioConfig; plan: WaypointPlan } {
  const gateways = new Map<string, WaypointGateway>();
  for (const g of cfg.k8sGateways) {
    if (g.gatewayClassName !== 'istio-waypoint') continue;
    const trafficType = g.meta.labels[FOR] ?? 'service';
    if (!TRAFFIC_TYPES.includes(trafficType)) report.error(g.meta, `metadata.labels[${FOR}]`, `unknown waypoint traffic type ${JSON.stringify(trafficType)}: service, workload, all or none`);
    if (trafficType === 'workload' || trafficType === 'all') {
      report.add(g.meta, 'Warning', 'SKUA0001', `metadata.labels[${FOR}]`, 'workload-addressed traffic through a waypoint is not applied yet: only services bound to it go through it');
    }
    const hbone = g.listeners.find((l) => l.protocol === 'HBONE');
    gateways.set(`${g.meta.namespace}/${g.meta.name}`, { key: `${g.meta.namespace}/${g.meta.name}`, gateway: g, port: hbone?.port ?? 15008, trafficType });
  }
  const pods = new Map<string, string>();
  if (gateways.size === 0) return { cfg, plan: { gateways, pods } };
  const podList = cfg.pods.map((p) => {
    const name = GATEWAY_NAME.map((k) => p.meta.labels[k]).find((v) => v !== undefined);
    const key = `${p.meta.namespace}/${name}`;
    if (name === undefined || !gateways.has(key)) return p;
    pods.set(`${p.meta.namespace}/${p.meta.name}`, key);
    return { ...p, router: false, sidecar: false };
  });
  for (const wg of gateways.values()) {
    if (![...pods.values()].includes(wg.key)) report.add(wg.gateway.meta, 'Warning', 'IST0101', 'metadata.name', `Referenced waypoint pod not found: no Pod labelled ${GATEWAY_NAME[0]}=${wg.gateway.meta.name} runs this waypoint`);
  }
  const services: KubeService[] = [...cfg.services];
  for (const wg of gateways.values()) {
    const { name, namespace } = wg.gateway.meta;
    if (services.some((s) => s.meta.name === name && s.meta.namespace === namespace)) continue;
    // Istio's gateway controller makes this Service for every waypoint: status port and the HBONE port.
    const meta: Meta = { ...wg.gateway.meta, kind: 'Service', apiVersion: 'v1', labels: {}, annotations: {} };
    services.push({
      meta, selector: { [GATEWAY_NAME[0]]: name },
      ports: [{ name: 'status-port', port: 15021, targetPort: 15021, protocol: 'TCP', appProtocol: 'tcp' }, { name: 'mesh', port: wg.port, targetPort: wg.port, protocol: 'TCP', appProtocol: 'tcp' }],
    });
  }
  return { cfg: { ...cfg, pods: podList, services }, plan: { gateways, pods } };
}

/** The waypoint a service's (or its namespace's) labels bind it to; undefined for none. */
function bindingOf(labels: Labels, nsLabels: Labels, namespace: string): string | undefined {
  const own = labels[USE];
  const label = own ?? nsLabels[USE];
  if (!label || label === 'none') return undefined;
  const ns = (own !== undefined ? labels[USE_NS] : nsLabels[USE_NS]) ?? namespace;
  return `${ns}/${label}`;
}

interface Attachments {
  readonly toWaypoint: Map<string, AuthorizationPolicy[]>;
  readonly toHost: Map<string, AuthorizationPolicy[]>;
}

function push<K>(m: Map<K, AuthorizationPolicy[]>, k: K, p: AuthorizationPolicy): void {
  let l = m.get(k);
  if (!l) { l = []; m.set(k, l); }
  if (!l.includes(p)) l.push(p);
}

/** Which waypoints and service hosts each targetRef policy is attached to. */
function attachments(cfg: IstioConfig, plan: WaypointPlan, report: Report): Attachments {
  const out: Attachments = { toWaypoint: new Map(), toHost: new Map() };
  for (const p of cfg.authorizationPolicies) {
    for (const [i, ref] of p.targetRefs.entries()) {
      const field = `spec.targetRefs[${i}]`;
      const ns = p.meta.namespace;
      if (ref.kind === 'Gateway') {
        const key = `${ns}/${ref.name}`;
        if (plan.gateways.has(key)) push(out.toWaypoint, key, p);
        else if (cfg.k8sGateways.some((g) => g.meta.namespace === ns && g.meta.name === ref.name)) report.add(p.meta, 'Warning', 'SKUA0001', field, `policies attached to the ingress gateway ${key} are not applied yet (waypoints' are)`);
        else report.notFound(p.meta, field, 'waypoint', key);
      } else if (ref.kind === 'GatewayClass') {
        if (ref.name !== 'istio-waypoint' || ns !== cfg.meshConfig.rootNamespace) report.add(p.meta, 'Warning', 'SKUA0001', field, 'only the istio-waypoint GatewayClass, from the root namespace, is applied');
        else for (const key of plan.gateways.keys()) push(out.toWaypoint, key, p);
      } else if (ref.kind === 'Service') {
        const host = hostOf(ref.name, ns);
        if (!cfg.services.some((s) => s.meta.namespace === ns && s.meta.name === ref.name)) report.notFound(p.meta, field, 'Service', `${ns}/${ref.name}`);
        else push(out.toHost, host, p);
      } else if (ref.kind === 'ServiceEntry') {
        const se = cfg.serviceEntries.find((s) => s.meta.namespace === ns && s.meta.name === ref.name);
        if (!se) report.notFound(p.meta, field, 'ServiceEntry', `${ns}/${ref.name}`);
        else for (const h of se.hosts) push(out.toHost, h, p);
      }
    }
  }
  return out;
}

function security(policies: readonly AuthorizationPolicy[]): WaypointSecurity {
  const enforced = policies.filter((p) => p.action === 'ALLOW' || p.action === 'DENY');
  return { httpFilters: rbacFilters(enforced, false, PEER_FILTER_STATE), tcpFilters: rbacFilters(enforced, true, PEER_FILTER_STATE) };
}

export interface BoundWaypoints {
  readonly services: MeshService[];
  readonly workloads: MeshWorkload[];
  readonly waypoints: MeshWaypoint[];
}

/** Binds services to their waypoints, marks the waypoints' pods, and builds what each waypoint enforces per service. */
export function bindWaypoints(plan: WaypointPlan, cfg: IstioConfig, services: readonly MeshService[], workloads: readonly MeshWorkload[], report: Report): BoundWaypoints {
  if (plan.gateways.size === 0) return { services: [...services], workloads: [...workloads], waypoints: [] };
  const nsLabels = new Map(cfg.namespaces.map((n) => [n.meta.name, n.meta.labels] as const));
  const labelled = new Map<string, { meta: Meta }>();
  for (const s of cfg.services) labelled.set(hostOf(s.meta.name, s.meta.namespace), s);
  for (const se of cfg.serviceEntries) for (const h of se.hosts) labelled.set(h, se);
  const outServices = services.map((s) => {
    const src = labelled.get(s.hostname);
    const key = bindingOf(src?.meta.labels ?? {}, nsLabels.get(s.namespace) ?? {}, s.namespace);
    if (!key) return s;
    const wg = plan.gateways.get(key);
    // A waypoint does not route its own Service; a namespace label binds the rest of the namespace.
    if (wg && wg.gateway.meta.name === s.name && wg.gateway.meta.namespace === s.namespace) return s;
    const meta = src?.meta;
    if (!wg) { if (meta) report.notFound(meta, `metadata.labels[${USE}]`, 'waypoint', key); return s; }
    if (wg.trafficType === 'workload' || wg.trafficType === 'none') {
      if (meta) report.add(meta, 'Warning', 'IST0101', `metadata.labels[${USE}]`, `the waypoint ${key} does not take service traffic (${FOR}: ${wg.trafficType})`);
      return s;
    }
    return { ...s, waypoint: key };
  });
  for (const p of cfg.pods) {
    if (p.meta.labels[USE] !== undefined && p.meta.labels[USE] !== 'none') {
      report.add(p.meta, 'Warning', 'SKUA0001', `metadata.labels[${USE}]`, 'workload-addressed traffic through a waypoint is not applied yet: bind the pod\'s Services instead');
    }
  }
  const outWorkloads = workloads.map((w) => {
    const key = plan.pods.get(`${w.namespace}/${w.name}`);
    return key ? { ...w, waypointProxy: key } : w;
  });
  const att = attachments(cfg, plan, report);
  const waypoints: MeshWaypoint[] = [...plan.gateways.values()].map((wg) => {
    const perHost = new Map<string, WaypointSecurity>();
    for (const s of outServices) {
      if (s.waypoint !== wg.key) continue;
      perHost.set(s.hostname, security([...(att.toWaypoint.get(wg.key) ?? []), ...(att.toHost.get(s.hostname) ?? [])]));
    }
    const { name, namespace } = wg.gateway.meta;
    return { key: wg.key, name, namespace, hostname: hostOf(name, namespace), port: wg.port, security: perHost };
  });
  return { services: outServices, workloads: outWorkloads, waypoints };
}

