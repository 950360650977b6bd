/**
 * istiod-shaped xDS resources for N services, as a sidecar sees them: per service an
 * outbound EDS cluster (`outbound|9080||svc-i.bench.svc.cluster.local`) with Istio's
 * circuit breakers and metadata, its ClusterLoadAssignment (2 endpoints with locality),
 * a virtual host in the shared `9080` RouteConfiguration (Istio's domain list), and for
 * every tenth service a TCP `<vip>_9000` listener (bind_to_port false); plus the
 * `0.0.0.0_9080`-style HTTP listener (bound on `port` so traffic can check the result).
 */
type Json = Record<string, unknown>;

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const TCP = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

export const svcHost = (i: number): string => `svc-${i}.bench.svc.cluster.local`;
export const clusterName = (i: number): string => `outbound|9080||${svcHost(i)}`;

export function claFor(i: number, ports: readonly number[]): Json {
  return {
    '@type': 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment', cluster_name: clusterName(i),
    endpoints: [{ locality: { region: 'us-east1', zone: 'us-east1-b' }, lb_endpoints: ports.map((p) => ({
      endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: p } } },
      health_status: 'HEALTHY', load_balancing_weight: 1,
      metadata: { filter_metadata: { istio: { workload: `svc-${i}-v1;bench;svc-${i};v1;Kubernetes` } } },
    })), load_balancing_weight: ports.length }],
  };
}

/**
 * Istio's ISTIO_MUTUAL transport socket matches of an outbound cluster (SDS `default` / `ROOTCA`,
 * here over ADS): endpoints labelled tlsMode=istio get mTLS, the others (all of this mesh's) plaintext.
 */
export function istioMutualMatches(i: number): Json[] {
  const sds = (name: string): Json => ({ name, sds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' } });
  return [{
    name: 'tlsMode-istio', match: { tlsMode: 'istio' },
    transport_socket: { name: 'envoy.transport_sockets.tls', typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      common_tls_context: {
        tls_params: { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3' },
        alpn_protocols: ['istio-peer-exchange', 'istio'],
        tls_certificate_sds_secret_configs: [sds('default')],
        combined_validation_context: {
          default_validation_context: { match_subject_alt_names: [{ exact: `spiffe://cluster.local/ns/bench/sa/svc-${i}` }] },
          validation_context_sds_secret_config: sds('ROOTCA'),
        },
      },
      sni: `outbound_.9080_._.${svcHost(i)}`,
    } },
  }, {
    name: 'tlsMode-disabled', match: {},
    transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' } },
  }];
}

/** `mtls`: every cluster with istioMutualMatches (the `xds` scenario leaves them out). */
export function meshResources(n: number, port: number, backendPort: number, opts: { mtls?: boolean } = {}): { clusters: Json[]; endpoints: Json[]; routes: Json[]; listeners: Json[] } {
  const clusters: Json[] = [], endpoints: Json[] = [], vhosts: Json[] = [], listeners: Json[] = [];
  for (let i = 0; i < n; i++) {
    const name = clusterName(i);
    clusters.push({
      '@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', name, type: 'EDS', connect_timeout: '10s', lb_policy: 'LEAST_REQUEST',
      eds_cluster_config: { eds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' }, service_name: name },
      circuit_breakers: { thresholds: [{ max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295, max_retries: 4294967295, track_remaining: true }] },
      common_lb_config: { locality_weighted_lb_config: {} },
      metadata: { filter_metadata: { istio: { services: [{ host: svcHost(i), name: `svc-${i}`, namespace: 'bench' }] } } },
      ...(opts.mtls ? { transport_socket_matches: istioMutualMatches(i) } : {}),
    });
    endpoints.push(claFor(i, [backendPort, backendPort]));
    const h = svcHost(i);
    vhosts.push({
      name: `${h}:9080`, domains: [h, `${h}:9080`, `svc-${i}`, `svc-${i}:9080`, `svc-${i}.bench`, `svc-${i}.bench:9080`, `svc-${i}.bench.svc`, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`],
      routes: [{ name: 'default', match: { prefix: '/' }, decorator: { operation: `${h}:9080/*` },
        route: { cluster: name, timeout: '0s', retry_policy: { retry_on: 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes', num_retries: 2, retry_host_predicate: [], host_selection_retry_max_attempts: '5', retriable_status_codes: [503] }, max_grpc_timeout: '0s' } }],
      include_request_attempt_count: true,
    });
    if (i % 10 === 0) {
      const vip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      listeners.push({
        '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener', name: `${vip}_9000`, bind_to_port: false, traffic_direction: 'OUTBOUND',
        address: { socket_address: { address: vip, port_value: 9000 } },
        filter_chains: [{ filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP, stat_prefix: name, cluster: name } }] }],
      });
    }
  }
  vhosts.push({ name: 'block_all', domains: ['*'], routes: [{ name: 'block_all', match: { prefix: '/' }, direct_response: { status: 502 } }] });
  listeners.push({
    '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener', name: '0.0.0.0_9080', traffic_direction: 'OUTBOUND',
    address: { socket_address: { address: '127.0.0.1', port_value: port } },
    filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: {
      '@type': HCM, stat_prefix: 'outbound_0.0.0.0_9080', normalize_path: true,
      rds: { config_source: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' }, route_config_name: '9080' },
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } }],
    } }] }],
  });
  const routes = [{ '@type': 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration', name: '9080', virtual_hosts: vhosts, validate_clusters: false }];
  return { clusters, endpoints, routes, listeners };
}
