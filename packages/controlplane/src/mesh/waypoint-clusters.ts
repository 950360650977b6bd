/**
 * A waypoint's clusters, istiod-shaped: `main_internal` (connect_terminate's CONNECT lands on the
 * internal listener), `connect_originate` (HBONE to the endpoint's ztunnel on 15008: ORIGINAL_DST,
 * mutual TLS 1.3 with the waypoint's own certificate, HTTP/2 CONNECT), and per service port
 * `inbound-vip|<port>|http|<host>` (`tcp` for TCP ports, `http/<subset>` per DestinationRule
 * subset) whose EDS endpoints are the internal listener connect_originate, one per pod, carrying
 * the pod's address as the original destination to restore there.
 */
import { protoDuration } from '../istio/reader.ts';
import { circuitBreakers, effectivePolicy, backends, outlierDetection } from './clusters.ts';
import { clusterName, serviceRef, workloadMetadata, T, type Json } from './names.ts';
import { ADS_SOURCE, sdsSecret, socketAddress, UNLIMITED } from './pieces.ts';
import type { Mesh, MeshService, MeshWaypoint, ServicePort } from './types.ts';

export const MAIN_INTERNAL = 'main_internal';
export const CONNECT_ORIGINATE = 'connect_originate';
const ORIGINAL_DST_NS = 'envoy.filters.listener.original_dst';
/** istiod's HBONE HTTP/2 windows (ztunnel's too): 4 MiB per stream, 16 MiB per connection. */
const HBONE_STREAM_WINDOW = 4 * 1024 * 1024;
const HBONE_CONNECTION_WINDOW = 16 * 1024 * 1024;
const RAW_BUFFER: Json = { name: 'raw_buffer', typed_config: { '@type': T.rawBuffer } };

/** The services a waypoint serves: those bound to it (istio.io/use-waypoint). */
export function servedBy(mesh: Mesh, wp: MeshWaypoint): MeshService[] {
  return mesh.services.filter((s) => s.waypoint === wp.key);
}

/** Ambient's subset naming: `http` / `tcp` by the port's protocol, `/<subset>` for a DestinationRule subset. */
export function vipSubset(p: ServicePort | undefined, subset: string): string {
  const base = p?.protocol === 'tcp' ? 'tcp' : 'http';
  return subset ? `${base}/${subset}` : base;
}

/** HBONE's TLS: 1.3 only, ALPN h2, the workload certificate (`default`) and root (`ROOTCA`), peers of the trust domain. */
export function hboneTlsContext(trustDomain: string): Json {
  return {
    tls_params: { tls_minimum_protocol_version: 'TLSv1_3', tls_maximum_protocol_version: 'TLSv1_3' },
    alpn_protocols: ['h2'],
    tls_certificate_sds_secret_configs: [sdsSecret('default')],
    combined_validation_context: {
      default_validation_context: { match_typed_subject_alt_names: [{ san_type: 'URI', matcher: { prefix: `spiffe://${trustDomain}/` } }] },
      validation_context_sds_secret_config: sdsSecret('ROOTCA'),
    },
  };
}

function internalUpstream(passthrough: readonly string[]): Json {
  return {
    name: 'internal_upstream',
    typed_config: {
      '@type': T.internalUpstream,
      passthrough_metadata: passthrough.map((name) => ({ kind: { host: {} }, name })),
      transport_socket: RAW_BUFFER,
    },
  };
}

/** connect_terminate's CONNECT target: the main_internal listener, in the downstream's protocol. */
function mainInternalCluster(): Json {
  return {
    '@type': T.cluster, name: MAIN_INTERNAL, alt_stat_name: `${MAIN_INTERNAL};`, type: 'STATIC', connect_timeout: '10s', circuit_breakers: UNLIMITED,
    load_assignment: { cluster_name: MAIN_INTERNAL, endpoints: [{ lb_endpoints: [{ endpoint: { address: { envoy_internal_address: { server_listener_name: MAIN_INTERNAL } } } }] }] },
    transport_socket: internalUpstream(['tunnel', 'istio']),
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': T.httpOptions, use_downstream_protocol_config: { http_protocol_options: {}, http2_protocol_options: {} },
      },
    },
  };
}

/** HBONE to where the tunnel was restored to (the pod's ip:port), on the HBONE port, verifying the peer's trust domain. */
function connectOriginateCluster(mesh: Mesh, hbonePort: number): Json {
  return {
    '@type': T.cluster, name: CONNECT_ORIGINATE, alt_stat_name: `${CONNECT_ORIGINATE};`, type: 'ORIGINAL_DST', connect_timeout: '10s',
    lb_policy: 'CLUSTER_PROVIDED', cleanup_interval: '60s', circuit_breakers: UNLIMITED,
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': T.httpOptions, common_http_protocol_options: { idle_timeout: '3600s' },
        explicit_http_config: { http2_protocol_options: { allow_connect: true, initial_stream_window_size: HBONE_STREAM_WINDOW, initial_connection_window_size: HBONE_CONNECTION_WINDOW } },
      },
    },
    original_dst_lb_config: { upstream_port_override: hbonePort },
    transport_socket: { name: 'tls', typed_config: { '@type': T.upstreamTls, common_tls_context: hboneTlsContext(mesh.trustDomain) } },
  };
}

function vipCluster(s: MeshService, p: ServicePort, subset: string, name: string): Json {
  const pol = effectivePolicy(s, p.port, subset);
  const istio: Json = { services: [serviceRef(s)] };
  if (s.destinationRule) istio.config = `/apis/networking.istio.io/v1alpha3/namespaces/${s.destinationRule.namespace}/destination-rule/${s.destinationRule.name}`;
  if (subset) istio.subset = subset;
  const c: Json = {
    '@type': T.cluster, name, type: 'EDS', eds_cluster_config: { eds_config: ADS_SOURCE, service_name: name },
    connect_timeout: protoDuration(pol.pool?.connectTimeoutMs ?? 10_000), lb_policy: pol.hash ? 'RING_HASH' : pol.lb ?? 'LEAST_REQUEST',
    circuit_breakers: circuitBreakers(pol.pool),
  };
  if (pol.outlier) c.outlier_detection = outlierDetection(pol.outlier);
  // The endpoint's own address rides to connect_originate as the original destination (host metadata).
  Object.assign(c, { transport_socket: internalUpstream([ORIGINAL_DST_NS]), metadata: { filter_metadata: { istio } }, common_lb_config: {} });
  if (p.protocol === 'http2' || p.protocol === 'grpc') {
    c.typed_extension_protocol_options = { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': T.httpOptions, explicit_http_config: { http2_protocol_options: {} } } };
  }
  return c;
}

/** The endpoints of one inbound-vip cluster: ambient pods through connect_originate, others directly. */
function vipEndpoints(mesh: Mesh, s: MeshService, p: ServicePort, name: string, labels: Readonly<Record<string, string>> | undefined): Json {
  const lb = backends(mesh, s, labels).filter((w) => !w.terminating).map((w) => {
    const target = `${w.ip}:${p.targetPort}`;
    const md: Json = { istio: { workload: workloadMetadata(mesh, w) } };
    let address: Json;
    if (w.ambient) {
      address = { envoy_internal_address: { server_listener_name: CONNECT_ORIGINATE, endpoint_id: target } };
      md[ORIGINAL_DST_NS] = { local: target };
    } else address = socketAddress(w.ip, p.targetPort);
    return { endpoint: { address, health_check_config: {} }, health_status: 'HEALTHY', metadata: { filter_metadata: md }, load_balancing_weight: w.weight || 1 };
  });
  const out: Json = { '@type': T.cla, cluster_name: name };
  if (lb.length) out.endpoints = [{ locality: {}, lb_endpoints: lb, load_balancing_weight: lb.reduce((a, e) => a + e.load_balancing_weight, 0) }];
  out.policy = { overprovisioning_factor: 140 };
  return out;
}

/** Every cluster (and its endpoints) the waypoint needs. */
export function waypointClusters(mesh: Mesh, wp: MeshWaypoint): Json[] {
  const out: Json[] = [mainInternalCluster(), connectOriginateCluster(mesh, wp.port)];
  for (const s of servedBy(mesh, wp)) {
    for (const p of s.ports) {
      const subsets: Array<[string, Readonly<Record<string, string>> | undefined]> = [['', undefined], ...s.subsets];
      for (const [subset, labels] of subsets) {
        const name = clusterName('inbound-vip', p.port, vipSubset(p, subset), s.hostname);
        out.push(vipCluster(s, p, subset, name), vipEndpoints(mesh, s, p, name, labels));
      }
    }
  }
  return out;
}
