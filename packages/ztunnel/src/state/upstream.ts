/**
 * From an address to a concrete upstream, as ztunnel resolves it: a service VIP load-balances
 * over the service's healthy endpoints (weighted by capacity, ranked by the service's routing
 * preferences in STRICT / FAILOVER mode), a workload address is that workload, and waypoints and
 * gateways are resolved by address or hostname. Pure functions over the state; no I/O.
 */
import type { GatewayAddress, Service, Workload } from './model.ts';
import type { ProxyState } from './store.ts';

export type Rng = () => number;

/** A chosen next hop: the workload, the IP picked for it, the port, and who it should be. */
export interface Upstream {
  readonly workload: Workload;
  /** undefined when the workload has no usable IP (then it can only be reached through a gateway). */
  readonly selectedIp: string | undefined;
  readonly port: number;
  /** The service's subject alt names (expected in addition to the workload's identity). */
  readonly serviceSans: readonly string[];
  readonly service: Service | undefined;
}

export class RoutingError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'RoutingError';
    this.code = code;
  }
}

export type Resolution = 'standard' | 'waypoint';

export type AddressLookup = { readonly kind: 'workload'; readonly workload: Workload } | { readonly kind: 'service'; readonly service: Service };

/** ztunnel's find_address: a workload with that IP first, then a service VIP (best for the namespace). */
export function findAddress(state: ProxyState, network: string, ip: string, ns: string | undefined): AddressLookup | undefined {
  const w = state.workloadByAddress(network, ip);
  if (w) return { kind: 'workload', workload: w };
  const s = state.bestServiceByVip(network, ip, ns);
  return s ? { kind: 'service', service: s } : undefined;
}

/** A gateway's destination: a service by hostname first, then a workload with that hostname; or by address. */
export function findGateway(state: ProxyState, gw: GatewayAddress): AddressLookup | undefined {
  const d = gw.destination;
  if (d.kind === 'address') return findAddress(state, d.address.network, d.address.address, undefined);
  const s = state.serviceByHost(d.host.namespace, d.host.hostname);
  if (s) return { kind: 'service', service: s };
  for (const w of state.workloadsByUid.values()) {
    if (w.hostname === d.host.hostname && w.namespace === d.host.namespace) return { kind: 'workload', workload: w };
  }
  return undefined;
}

const SCOPE_MATCH: Record<string, (a: Workload, b: Workload) => boolean> = {
  Region: (a, b) => a.locality.region === b.locality.region,
  Zone: (a, b) => a.locality.zone === b.locality.zone,
  Subzone: (a, b) => a.locality.subzone === b.locality.subzone,
  Node: (a, b) => a.node === b.node,
  Cluster: (a, b) => a.clusterId === b.clusterId,
  Network: (a, b) => a.network === b.network,
};

interface Candidate { readonly port: ReadonlyMap<number, number>; readonly workload: Workload }

/** Picks one endpoint of `svc` for `svcPort`, or undefined when none qualifies. */
function loadBalance(state: ProxyState, src: Workload, svc: Service, svcPort: number, mode: Resolution, rng: Rng): Candidate | undefined {
  const targetPort = svc.ports.get(svcPort);
  if (mode === 'standard' && targetPort === undefined) return undefined;
  const candidates: Candidate[] = [];
  for (const ep of state.endpointsOf(svc)) {
    const wl = state.workloadsByUid.get(ep.workloadUid);
    if (!wl) continue;
    const inNetwork = wl.network === src.network;
    const hasAddress = wl.workloadIps.length > 0 || wl.hostname !== '';
    if (!hasAddress && (inNetwork || !wl.networkGateway)) continue;
    if (mode === 'standard' && !targetPort && !ep.port.has(svcPort)) continue;
    if (mode === 'waypoint' && targetPort === undefined && !wl.applicationTunnel) continue;
    candidates.push({ port: ep.port, workload: wl });
  }
  let options = candidates;
  const lb = svc.loadBalancer;
  if (lb && lb.mode !== 'Standard' && lb.mode !== 'Passthrough') {
    const prefs = lb.routingPreferences;
    const networkFirst = prefs[0] === 'Network';
    const ranked: Array<{ rank: number; c: Candidate }> = [];
    for (const c of candidates) {
      let rank = 0, adjust = 0;
      for (const scope of prefs) {
        const hit = SCOPE_MATCH[scope](src, c.workload);
        if (scope === 'Network' && networkFirst) {
          // A network match is worth all the other scopes; a mismatch lets the others rank.
          if (hit) adjust = prefs.length - 1; else continue;
        }
        if (!hit) break;
        rank++;
      }
      if (lb.mode === 'Strict' && rank !== prefs.length) continue;
      ranked.push({ rank: rank + adjust, c });
    }
    if (ranked.length === 0) return undefined;
    const best = Math.max(...ranked.map((r) => r.rank));
    options = ranked.filter((r) => r.rank === best).map((r) => r.c);
  }
  return weightedPick(options, (c) => c.workload.capacity, rng);
}

export function weightedPick<T>(list: readonly T[], weight: (t: T) => number, rng: Rng): T | undefined {
  let total = 0;
  for (const t of list) total += weight(t);
  if (total <= 0) return undefined;
  let x = rng() * total;
  for (const t of list) {
    x -= weight(t);
    if (x < 0) return t;
  }
  return list[list.length - 1];
}

/** ztunnel's find_upstream_from_service: endpoint, then the target port (endpoint's, else the service's). */
export function upstreamFromService(state: ProxyState, src: Workload, svc: Service, svcPort: number, mode: Resolution, rng: Rng):
  { workload: Workload; port: number; service: Service } | undefined {
  const pick = loadBalance(state, src, svc, svcPort, mode, rng);
  if (!pick) return undefined;
  const epPort = pick.port.get(svcPort);
  const svcTarget = svc.ports.get(svcPort) ?? 0;
  let port: number;
  if (epPort !== undefined) port = epPort;
  else if (svcTarget > 0) port = svcTarget;
  else if (pick.workload.applicationTunnel?.port !== undefined) port = svcPort;
  else return undefined;
  return { workload: pick.workload, port, service: svc };
}

/** The IP to dial for a workload: the one asked for if it is the workload's, else one of the family asked for. */
export function pickWorkloadIp(wl: Workload, targetIp: string, family: Service['ipFamilies']): string | undefined {
  if (wl.workloadIps.includes(targetIp)) return targetIp;
  const v6 = targetIp.includes(':');
  const ok = wl.workloadIps.filter((ip) => family === undefined || family === 'Dual' || (family === 'IPv6') === ip.includes(':'));
  const ip = ok.find((x) => x.includes(':') === v6) ?? ok[0];
  if (ip !== undefined) return ip;
  if (wl.hostname !== '') throw new RoutingError('no_resolved_addresses', `no ip addresses were resolved for workload: ${wl.uid} (DNS resolution of workload hostnames is not supported)`);
  if (!wl.networkGateway) throw new RoutingError('no_valid_destination', `no valid routing destination for workload: ${wl.uid}`);
  return undefined;
}

export function finalize(parts: { workload: Workload; port: number; service: Service | undefined }, targetIp: string): Upstream {
  return {
    workload: parts.workload, port: parts.port, service: parts.service,
    selectedIp: pickWorkloadIp(parts.workload, targetIp, parts.service?.ipFamilies),
    serviceSans: parts.service?.subjectAltNames ?? [],
  };
}

/** The waypoint (or network gateway) behind a gateway address, as an upstream on its HBONE port. */
export function resolveGateway(state: ProxyState, gw: GatewayAddress, src: Workload, targetIp: string, rng: Rng): Upstream {
  const found = findGateway(state, gw);
  const where = gw.destination.kind === 'address' ? `${gw.destination.address.network}/${gw.destination.address.address}` : `${gw.destination.host.namespace}/${gw.destination.host.hostname}`;
  if (!found) throw new RoutingError('unknown_waypoint', `unknown waypoint: ${where}`);
  // By address, dial the address given; by hostname, keep the caller's IP family.
  const dialIp = gw.destination.kind === 'address' ? gw.destination.address.address : targetIp;
  if (found.kind === 'workload') return finalize({ workload: found.workload, port: gw.hboneMtlsPort, service: undefined }, dialIp);
  const parts = upstreamFromService(state, src, found.service, gw.hboneMtlsPort, 'waypoint', rng);
  if (!parts) throw new RoutingError('unknown_waypoint', `unknown waypoint: ${where} has no usable endpoint`);
  return finalize(parts, dialIp);
}

/** Whether the caller is the destination's own waypoint (then it is not sent through the waypoint again). */
export function fromWaypoint(state: ProxyState, upstream: Workload, srcIdentity: string, srcIp: string): boolean {
  if (!upstream.waypoint) return false;
  const is = (w: Workload): boolean => w.identity === srcIdentity && w.workloadIps.includes(srcIp);
  const found = findGateway(state, upstream.waypoint);
  if (!found) return false;
  if (found.kind === 'workload') return is(found.workload);
  for (const ep of state.endpointsOf(found.service)) {
    const w = state.workloadsByUid.get(ep.workloadUid);
    if (w && is(w)) return true;
  }
  return false;
}
