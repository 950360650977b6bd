/** istiod's naming facts: cluster names, node ids, workload uids, SPIFFE ids, type URLs. */
import type { Json, Mesh, MeshService, MeshWorkload } from './types.ts';

export type { Json };

export const T = {
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  route: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  cla: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
  address: 'type.googleapis.com/istio.workload.Address',
  authorization: 'type.googleapis.com/istio.security.Authorization',
  hcm: 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  tcpProxy: 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
  router: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  fault: 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault',
  cors: 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors',
  corsPolicy: 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy',
  jwt: 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication',
  grpcStats: 'type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig',
  wasm: 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm',
  alpn: 'type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig',
  stats: 'type.googleapis.com/stats.PluginConfig',
  mx: 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange',
  upstreamTls: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
  downstreamTls: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
  rawBuffer: 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer',
  httpOptions: 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
  uuid: 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig',
  originalDst: 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst',
  tlsInspector: 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector',
  httpInspector: 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector',
  workload: 'type.googleapis.com/istio.workload.Workload',
  typedStruct: 'type.googleapis.com/udpa.type.v1.TypedStruct',
  internalUpstream: 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport',
  setFilterState: 'type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config',
  peerMetadata: 'type.googleapis.com/io.istio.http.peer_metadata.Config',
  networkRbac: 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC',
} as const;

/** `outbound|9080|v1|reviews.default.svc.cluster.local`, `inbound|9080||`, a waypoint's `inbound-vip|9080|http/v1|reviews...`. */
export function clusterName(direction: 'outbound' | 'inbound' | 'inbound-vip', port: number, subset: string, host: string): string {
  return `${direction}|${port}|${subset}|${host}`;
}

/** The node id a workload's proxy connects with (pilot-agent's `sidecar~ip~pod.ns~ns.svc.<domain>`; `router~` for gateways, `waypoint~` for waypoints). */
export function sidecarNodeId(mesh: Mesh, w: MeshWorkload): string {
  return `${w.waypointProxy ? 'waypoint' : w.router ? 'router' : 'sidecar'}~${w.ip}~${w.name}.${w.namespace}~${w.namespace}.svc.${mesh.domain}`;
}

/** istiod's WDS key for a pod: `<cluster>//Pod/<namespace>/<name>`. */
export function workloadUid(mesh: Mesh, w: MeshWorkload): string {
  return `${mesh.clusterId}//Pod/${w.namespace}/${w.name}`;
}

export function spiffeId(mesh: Mesh, namespace: string, serviceAccount: string): string {
  return `spiffe://${mesh.trustDomain}/ns/${namespace}/sa/${serviceAccount}`;
}

export function canonicalName(w: MeshWorkload): string {
  return w.labels['service.istio.io/canonical-name'] ?? w.labels.app ?? w.workloadName;
}

export function canonicalRevision(w: MeshWorkload): string {
  return w.labels['service.istio.io/canonical-revision'] ?? w.labels.version ?? 'latest';
}

/** The `istio.workload` endpoint metadata: `name;namespace;canonical name;revision;cluster`. */
export function workloadMetadata(mesh: Mesh, w: MeshWorkload): string {
  return `${w.workloadName};${w.namespace};${canonicalName(w)};${canonicalRevision(w)};${mesh.clusterId}`;
}

export function serviceRef(s: MeshService): Json {
  return { host: s.hostname, name: s.name, namespace: s.namespace };
}

/** Does a workload carry every label of `selector`? */
export function selects(selector: Readonly<Record<string, string>>, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(selector)) if (labels[k] !== v) return false;
  return true;
}

/** Raw IP bytes, base64 (proto-JSON `bytes`). */
export function ipBytes(ip: string): string {
  if (ip.includes(':')) {
    const [head, tail = ''] = ip.split('::');
    const parts = (s: string): number[] => (s === '' ? [] : s.split(':').map((h) => parseInt(h, 16)));
    const h = parts(head), t = ip.includes('::') ? parts(tail) : [];
    const words = [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
    return Buffer.from(words.flatMap((x) => [x >> 8, x & 0xff])).toString('base64');
  }
  return Buffer.from(ip.split('.').map(Number)).toString('base64');
}
