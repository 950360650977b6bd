/**
 * ztunnel's /config_dump in the shape istioctl's `ztunnel-config` reads: workloads keyed by
 * `network/ip`, services keyed by `network/vip` with their endpoints, policies with rules as nested
 * lists and string matches as `{Exact: …}`, certificates per identity, and the in-pod workload
 * state (connections per pod). Defaults are left out as ztunnel's serde does.
 */
import type { ConnectionManager } from '../connections.ts';
import type { Authorization, AuthorizationMatch, GatewayAddress, Service, Workload } from '../state/model.ts';
import { hostKey } from '../state/model.ts';
import type { ProxyState } from '../state/store.ts';

type Json = Record<string, unknown>;

export interface CertificateDump {
  readonly identity: string;
  /** Available, Initializing, Unavailable: <error>. */
  readonly state: string;
  readonly certChain: ReadonlyArray<{ readonly pem: string; readonly serialNumber: string; readonly validFrom: string; readonly expirationTime: string }>;
}

export interface LocalWorkloadState {
  readonly uid: string;
  readonly name: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  /** Up, or Pending while its netns is being set up. */
  readonly state: string;
}

function gateway(g: GatewayAddress): Json {
  const d = g.destination;
  return { destination: d.kind === 'address' ? `${d.address.network}/${d.address.address}` : `${d.host.namespace}/${d.host.hostname}`, port: g.hboneMtlsPort };
}

export function workloadJson(w: Workload): Json {
  const out: Json = { workloadIps: [...w.workloadIps] };
  if (w.waypoint) out.waypoint = gateway(w.waypoint);
  if (w.networkGateway) out.networkGateway = gateway(w.networkGateway);
  Object.assign(out, {
    protocol: w.protocol, uid: w.uid, name: w.name, namespace: w.namespace, trustDomain: w.trustDomain, serviceAccount: w.serviceAccount,
    workloadName: w.workloadName, workloadType: w.workloadType, canonicalName: w.canonicalName, canonicalRevision: w.canonicalRevision,
  });
  if (w.network) out.network = w.network;
  out.node = w.node;
  if (w.nativeTunnel) out.nativeTunnel = true;
  if (w.hostname) out.hostname = w.hostname;
  if (w.applicationTunnel) out.applicationTunnel = { protocol: w.applicationTunnel.protocol, ...(w.applicationTunnel.port ? { port: w.applicationTunnel.port } : {}) };
  if (w.authorizationPolicies.length) out.authorizationPolicies = [...w.authorizationPolicies];
  if (w.networkMode !== 'Standard') out.networkMode = w.networkMode;
  if (w.locality.region || w.locality.zone || w.locality.subzone) out.locality = { ...w.locality };
  out.status = w.status;
  out.clusterId = w.clusterId;
  if (w.capacity !== 1) out.capacity = w.capacity;
  return out;
}

function portsJson(ports: ReadonlyMap<number, number>): Json {
  const out: Json = {};
  for (const [sp, tp] of ports) out[String(sp)] = tp;
  return out;
}

export function serviceJson(state: ProxyState, s: Service): Json {
  const endpoints: Json = {};
  // Endpoint addresses are printed in the service's network (the fixture's old ztunnel did so).
  const network = s.vips[0]?.network ?? '';
  for (const ep of state.rawEndpoints(hostKey(s.namespace, s.hostname))?.values() ?? []) {
    const w = state.workloadsByUid.get(ep.workloadUid);
    const addr = w?.workloadIps[0] !== undefined ? `${network}/${w.workloadIps[0]}` : '';
    endpoints[`${ep.workloadUid}:${addr}`] = { workloadUid: ep.workloadUid, service: ep.service, address: addr, port: portsJson(ep.port) };
  }
  const out: Json = {
    name: s.name, namespace: s.namespace, hostname: s.hostname, vips: s.vips.map((v) => `${v.network}/${v.address}`),
    ports: portsJson(s.ports), endpoints, subjectAltNames: [...s.subjectAltNames],
  };
  if (s.cidrVips.length) out.cidrVips = s.cidrVips.map((c) => `${c.network}/${c.address}/${c.length}`);
  if (s.waypoint) out.waypoint = gateway(s.waypoint);
  if (s.loadBalancer) out.loadBalancer = { ...s.loadBalancer, routingPreferences: [...s.loadBalancer.routingPreferences] };
  if (s.ipFamilies) out.ipFamilies = s.ipFamilies;
  if (s.canonical) out.canonical = true;
  return out;
}

function matchJson(m: AuthorizationMatch): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(m) as Array<[string, unknown[]]>) {
    if (v.length === 0) continue;
    out[k] = k.endsWith('amespaces') || k.endsWith('rincipals')
      ? v.map((x) => {
        const sm = x as Record<string, unknown>;
        if ('exact' in sm) return { Exact: sm.exact };
        if ('prefix' in sm) return { Prefix: sm.prefix };
        if ('suffix' in sm) return { Suffix: sm.suffix };
        return { Presence: [] };
      })
      : v;
  }
  return out;
}

export function policyJson(p: Authorization): Json {
  const out: Json = { action: p.action, name: p.name, namespace: p.namespace, rules: p.rules.map((r) => r.map((c) => c.map(matchJson))), scope: p.scope };
  if (p.dryRun) out.dryRun = true;
  return out;
}

export function workloadStateJson(connections: ConnectionManager, locals: readonly LocalWorkloadState[]): Json {
  const out: Json = {};
  for (const l of locals) {
    out[l.uid] = { connections: connections.connectionsOf(l.uid), info: { name: l.name, namespace: l.namespace, serviceAccount: l.serviceAccount }, state: l.state };
  }
  return out;
}

/**
 * The connections dump (admin /connections) in the shape `istioctl ztunnel-config connections -o json`
 * prints (its testdata connectionsdump.json): a list of workload states sorted by namespace then name,
 * `{ state, connections: { inbound, outbound }, info: { name, namespace, trustDomain, serviceAccount } }`,
 * with Go's string zero value — '' — where the config dump has null (no original destination).
 */
export function connectionsDump(connections: ConnectionManager, locals: readonly LocalWorkloadState[]): Json[] {
  const sorted = [...locals].sort((a, b) => (a.namespace === b.namespace ? (a.name < b.name ? -1 : 1) : a.namespace < b.namespace ? -1 : 1));
  return sorted.map((l) => {
    const c = connections.connectionsOf(l.uid);
    const entries = (list: typeof c.inbound): Json[] => list.map((e) => ({ src: e.src, originalDst: e.originalDst ?? '', actualDst: e.actualDst, protocol: e.protocol }));
    return {
      state: l.state, connections: { inbound: entries(c.inbound), outbound: entries(c.outbound) },
      info: { name: l.name, namespace: l.namespace, trustDomain: '', serviceAccount: l.serviceAccount },
    };
  });
}

export function configDump(state: ProxyState, connections: ConnectionManager, certificates: readonly CertificateDump[], locals: readonly LocalWorkloadState[]): Json {
  const workloads: Json = {};
  for (const w of [...state.workloadsByUid.values()].sort((a, b) => (a.uid < b.uid ? -1 : 1))) {
    workloads[w.workloadIps.length ? `${w.network}/${w.workloadIps[0]}` : w.uid] = workloadJson(w);
  }
  const services: Json = {};
  for (const s of [...state.servicesByKey.values()].sort((a, b) => (a.hostname < b.hostname ? -1 : 1))) {
    services[s.vips.length ? `${s.vips[0].network}/${s.vips[0].address}` : `${s.namespace}/${s.hostname}`] = serviceJson(state, s);
  }
  const policies = state.allPolicies().sort((a, b) => (`${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1)).map(policyJson);
  return { workloads, services, certificates, policies, workloadState: workloadStateJson(connections, locals) };
}
