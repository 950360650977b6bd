import type { ConnInfo } from '../../listener/conn-info.ts';
import type { ClusterManager } from '../../upstream/manager.ts';
import type { ClusterConfig } from '../../upstream/cluster-config.ts';
import type { PeerInfo } from './peer.ts';

/** A filter-state value: the request's own first (HTTP), then the connection's (TCP metadata exchange, authn). */
export function stateOf(key: string, req: Map<string, unknown> | undefined, conn: ConnInfo): unknown {
  return req?.get(key) ?? conn.filterState?.get(key);
}

export function peerOf(key: string, req: Map<string, unknown> | undefined, conn: ConnInfo): PeerInfo | null {
  const v = stateOf(key, req, conn);
  return v !== null && typeof v === 'object' && 'workloadName' in v ? v as PeerInfo : null;
}

/** Istio's authn filter publishes these; without it the TLS certificates' URI SANs are used. */
export const PEER_PRINCIPAL = 'io.istio.peer_principal';
export const LOCAL_PRINCIPAL = 'io.istio.local_principal';

export function principals(conn: ConnInfo): { peerSan: string; localSan: string } {
  const peer = conn.filterState?.get(PEER_PRINCIPAL);
  const local = conn.filterState?.get(LOCAL_PRINCIPAL);
  // Strings, or filter state objects (core/filter-state.ts) whose string form is the principal.
  if (peer !== undefined || local !== undefined) {
    return { peerSan: peer === undefined ? '' : String(peer), localSan: local === undefined ? '' : String(local) };
  }
  return { peerSan: conn.peerUriSans[0] ?? '', localSan: conn.localUriSans?.[0] ?? '' };
}

const PASSTHROUGH = new Set(['BlackHoleCluster', 'PassthroughCluster', 'InboundPassthroughCluster', 'InboundPassthroughClusterIpv4', 'InboundPassthroughClusterIpv6']);

interface IstioService { readonly host: string; readonly name: string }
const services = new WeakMap<object, IstioService | null>();

/** The cluster's `metadata.filter_metadata.istio.services[0]` (istiod puts the Kubernetes service there). */
function istioService(config: ClusterConfig): IstioService | null {
  const hit = services.get(config);
  if (hit !== undefined) return hit;
  let out: IstioService | null = null;
  const istio = config.metadata?.istio as Record<string, unknown> | undefined;
  const list = istio?.services;
  if (Array.isArray(list) && list.length > 0 && list[0] !== null && typeof list[0] === 'object') {
    const s = list[0] as Record<string, unknown>;
    const host = typeof s.host === 'string' ? s.host : '';
    const name = typeof s.name === 'string' ? s.name : host.split('.')[0];
    out = { host, name };
  }
  services.set(config, out);
  return out;
}

/**
 * destination_service and destination_service_name as istio-proxy derives them: the Host header
 * (unless disabled), overridden by Istio's routes and clusters: block_all / allow_any routes,
 * passthrough and blackhole clusters, and the cluster's istio service metadata.
 */
export function serviceOf(clusters: ClusterManager | undefined, clusterName: string, routeName: string, host: string, hostFallback: boolean): { host: string; name: string } {
  let serviceHost = hostFallback ? host : '';
  let serviceName = serviceHost;
  if (routeName === 'block_all') serviceName = 'BlackHoleCluster';
  else if (routeName === 'allow_any') serviceName = 'PassthroughCluster';
  else if (clusterName) {
    if (PASSTHROUGH.has(clusterName)) serviceName = clusterName;
    else {
      const c = clusters?.get(clusterName);
      const s = c ? istioService(c.config) : null;
      if (s) { serviceHost = s.host; serviceName = s.name; }
    }
  }
  return { host: serviceHost, name: serviceName };
}
