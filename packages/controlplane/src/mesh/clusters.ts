/**
 * Outbound clusters `outbound|<port>|<subset>|<host>` and their endpoints, istiod-shaped: EDS with
 * Istio metadata, auto mTLS (tlsMode-istio socket match) unless a DestinationRule says otherwise,
 * and the DestinationRule's traffic policy (load balancer, connection pool, outlier detection,
 * TLS origination) merged istiod's way: subset over service, port-level over both.
 */
import type { ClientTls, ConnectionPool, LbPolicy, OutlierDetection, TrafficPolicy } from '../istio/types.ts';
import { protoDuration } from '../istio/reader.ts';
import { clusterName, selects, serviceRef, spiffeId, T, workloadMetadata, type Json } from './names.ts';
import { ADS_SOURCE, istioMutualUpstream, RAW_BUFFER_SOCKET, socketAddress, UNLIMITED } from './pieces.ts';
import type { Mesh, MeshService, MeshWorkload, ServicePort } from './types.ts';

type Labels = Readonly<Record<string, string>>;
const MAX = 4294967295;

/** The workloads backing a service (optionally only those carrying a subset's labels). */
export function backends(mesh: Mesh, s: MeshService, subsetLabels?: Labels): MeshWorkload[] {
  return mesh.workloads.filter((w) => w.services.includes(s.hostname) && (!subsetLabels || selects(subsetLabels, w.labels)));
}

/** Where a peer reaches a workload's target port: the sidecar intercepts ip:target; a plain workload may say where its app is. */
export function endpointAddress(w: MeshWorkload, targetPort: number): { address: string; port: number } {
  if (!w.sidecar) {
    const app = w.app.get(targetPort);
    if (app) return app;
  }
  return { address: w.ip, port: targetPort };
}

interface Effective { lb?: LbPolicy; hash?: TrafficPolicy['hash']; pool?: ConnectionPool; outlier?: OutlierDetection; tls?: ClientTls }

/** The policy for one cluster: service-level, its port-level, then the subset's and its port-level. */
export function effectivePolicy(s: MeshService, port: number, subset: string): Effective {
  const sub = subset ? s.subsetPolicies?.get(subset) : undefined;
  const layers = [s.trafficPolicy, s.trafficPolicy?.portLevel.get(port), sub, sub?.portLevel.get(port)].filter((x) => x !== undefined);
  const out: Effective = {};
  for (const l of layers) {
    if (l.lb || l.hash) { out.lb = l.lb; out.hash = l.hash; }
    if (l.connectionPool) out.pool = l.connectionPool;
    if (l.outlier) out.outlier = l.outlier;
    if (l.tls) out.tls = l.tls;
  }
  return out;
}

function cla(mesh: Mesh, name: string, s: MeshService, p: ServicePort, subsetLabels?: Labels): Json {
  // istiod leaves terminating endpoints out of EDS; their sidecars keep serving what is in flight.
  const lb = backends(mesh, s, subsetLabels).filter((w) => !w.terminating).map((w) => {
    const a = endpointAddress(w, p.targetPort);
    const md: Json = { istio: { workload: workloadMetadata(mesh, w) } };
    // Sidecar'd endpoints take Istio mTLS (the cluster's tlsMode-istio transport socket match).
    if (w.sidecar) md['envoy.transport_socket_match'] = { tlsMode: 'istio' };
    return { endpoint: { address: socketAddress(a.address, a.port), health_check_config: {} }, health_status: 'HEALTHY', metadata: { filter_metadata: md }, load_balancing_weight: w.weight || 1 };
  });
  const out: Json = { '@type': T.cla, cluster_name: name };
  if (lb.length) out.endpoints = [{ locality: {}, lb_endpoints: lb, load_balancing_weight: lb.reduce((a, e) => a + e.load_balancing_weight, 0) }];
  out.policy = { overprovisioning_factor: 140 };
  return out;
}

export function circuitBreakers(pool: ConnectionPool | undefined): Json {
  if (!pool) return UNLIMITED;
  return {
    thresholds: [{
      max_connections: pool.maxConnections ?? MAX, max_pending_requests: pool.http1MaxPendingRequests ?? MAX,
      max_requests: pool.http2MaxRequests ?? MAX, max_retries: pool.maxRetries ?? MAX, track_remaining: true,
    }],
  };
}

export function outlierDetection(o: OutlierDetection): Json {
  const out: Json = { enforcing_success_rate: 0 };
  if (o.consecutive5xxErrors !== undefined) {
    out.consecutive_5xx = o.consecutive5xxErrors;
    out.enforcing_consecutive_5xx = o.consecutive5xxErrors > 0 ? 100 : 0;
  }
  if (o.consecutiveGatewayErrors !== undefined) {
    out.consecutive_gateway_failure = o.consecutiveGatewayErrors;
    out.enforcing_consecutive_gateway_failure = o.consecutiveGatewayErrors > 0 ? 100 : 0;
  }
  if (o.intervalMs !== undefined) out.interval = protoDuration(o.intervalMs);
  if (o.baseEjectionTimeMs !== undefined) out.base_ejection_time = protoDuration(o.baseEjectionTimeMs);
  if (o.maxEjectionPercent !== undefined) out.max_ejection_percent = o.maxEjectionPercent;
  return out;
}

/** TLS origination (DestinationRule SIMPLE / MUTUAL) with files from the DestinationRule. */
function originateTls(t: ClientTls, host: string): Json {
  const common: Json = {};
  const validation: Json = {};
  if (t.caCertificates) validation.trusted_ca = { filename: t.caCertificates };
  if (t.subjectAltNames.length) validation.match_subject_alt_names = t.subjectAltNames.map((x) => ({ exact: x }));
  if (Object.keys(validation).length && !t.insecureSkipVerify) common.validation_context = validation;
  if (t.mode === 'MUTUAL' && t.clientCertificate && t.privateKey) common.tls_certificates = [{ certificate_chain: { filename: t.clientCertificate }, private_key: { filename: t.privateKey } }];
  return { name: 'envoy.transport_sockets.tls', typed_config: { '@type': T.upstreamTls, common_tls_context: common, sni: t.sni ?? host } };
}

function applyTransport(c: Json, mesh: Mesh, s: MeshService, p: ServicePort, subset: string, tls: ClientTls | undefined, subsetLabels?: Labels): void {
  const sans = (): string[] => [...new Set(backends(mesh, s, subsetLabels).map((w) => spiffeId(mesh, w.namespace, w.serviceAccount)))].sort();
  const sni = `outbound_.${p.port}_.${subset}_.${s.hostname}`;
  const mx = [{ name: 'istio.metadata_exchange', typed_config: { '@type': T.mx, protocol: 'istio-peer-exchange' } }];
  if (tls?.mode === 'ISTIO_MUTUAL') { c.filters = mx; c.transport_socket = istioMutualUpstream(sans(), tls.sni ?? sni); return; }
  if (tls?.mode === 'SIMPLE' || tls?.mode === 'MUTUAL') { c.transport_socket = originateTls(tls, s.hostname); return; }
  if (tls?.mode === 'DISABLE' || mesh.mtls === 'DISABLE' || s.external) return;
  // Auto mTLS: Istio mTLS to endpoints with a sidecar, plaintext to the others.
  c.filters = mx;
  c.transport_socket_matches = [
    { name: 'tlsMode-istio', match: { tlsMode: 'istio' }, transport_socket: istioMutualUpstream(sans(), sni) },
    { name: 'tlsMode-disabled', match: {}, transport_socket: RAW_BUFFER_SOCKET },
  ];
}

function cluster(mesh: Mesh, name: string, s: MeshService, p: ServicePort, subset: string, subsetLabels?: Labels): Json {
  const istio: Json = { default_original_port: p.port, services: [serviceRef(s)] };
  const dr = s.destinationRule ?? (s.subsets.size ? { name: s.name, namespace: s.namespace } : undefined);
  if (dr) istio.config = `/apis/networking.istio.io/v1alpha3/namespaces/${dr.namespace}/destination-rule/${dr.name}`;
  if (subset) istio.subset = subset;
  const pol = effectivePolicy(s, p.port, subset);
  const c: Json = { '@type': T.cluster, name };
  if (s.passthrough || pol.lb === 'PASSTHROUGH') Object.assign(c, { type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED' });
  else if (s.dnsEndpoints) {
    const lbEndpoints = s.dnsEndpoints.map((e) => ({ endpoint: { address: socketAddress(e.host, e.ports.get(p.port) ?? p.targetPort) } }));
    Object.assign(c, { type: 'STRICT_DNS', dns_lookup_family: 'V4_ONLY', load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: lbEndpoints }] } });
  } else c.type = 'EDS';
  if (c.type === 'EDS') c.eds_cluster_config = { eds_config: ADS_SOURCE, service_name: name };
  c.connect_timeout = protoDuration(pol.pool?.connectTimeoutMs ?? 10_000);
  if (c.type !== 'ORIGINAL_DST') c.lb_policy = pol.hash ? 'RING_HASH' : pol.lb ?? 'LEAST_REQUEST';
  c.circuit_breakers = circuitBreakers(pol.pool);
  if (pol.outlier) c.outlier_detection = outlierDetection(pol.outlier);
  if (pol.outlier?.minHealthPercent !== undefined) c.common_lb_config = { healthy_panic_threshold: { value: pol.outlier.minHealthPercent } };
  c.metadata = { filter_metadata: { istio } };
  const http2 = p.protocol === 'grpc' || p.protocol === 'http2' || (p.protocol === 'http' && pol.pool?.h2Upgrade);
  const common: Json = {};
  if (pol.pool?.idleTimeoutMs !== undefined) common.idle_timeout = protoDuration(pol.pool.idleTimeoutMs);
  if (pol.pool?.maxRequestsPerConnection) common.max_requests_per_connection = pol.pool.maxRequestsPerConnection;
  if (http2 || Object.keys(common).length) {
    const opts: Json = { '@type': T.httpOptions, explicit_http_config: http2 ? { http2_protocol_options: {} } : { http_protocol_options: {} } };
    if (Object.keys(common).length) opts.common_http_protocol_options = common;
    c.typed_extension_protocol_options = { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': opts };
  }
  applyTransport(c, mesh, s, p, subset, pol.tls, subsetLabels);
  return c;
}

/** Every outbound cluster and its endpoints: the same for every sidecar. */
export function outboundClusters(mesh: Mesh): Json[] {
  const out: Json[] = [];
  for (const s of mesh.services) {
    for (const p of s.ports) {
      const all = clusterName('outbound', p.port, '', s.hostname);
      const withEndpoints = (c: Json, labels?: Labels): Json[] => (c.type === 'EDS' ? [c, cla(mesh, String(c.name), s, p, labels)] : [c]);
      out.push(...withEndpoints(cluster(mesh, all, s, p, '')));
      for (const [subset, labels] of s.subsets) {
        out.push(...withEndpoints(cluster(mesh, clusterName('outbound', p.port, subset, s.hostname), s, p, subset, labels), labels));
      }
    }
  }
  if (mesh.capture === 'iptables') {
    out.push(
      { '@type': T.cluster, name: 'PassthroughCluster', type: 'ORIGINAL_DST', connect_timeout: '10s', lb_policy: 'CLUSTER_PROVIDED', circuit_breakers: UNLIMITED },
      { '@type': T.cluster, name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '10s' },
    );
  }
  return out;
}
