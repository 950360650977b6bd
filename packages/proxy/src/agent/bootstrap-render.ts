/**
 * The Envoy bootstrap pilot-agent would write for this proxy (Istio's envoy_bootstrap.json
 * template), limited to what skua-proxy's bootstrap compiler accepts. One difference by design:
 * agent and proxy are one process here, so `xds-grpc` points straight at the discovery address
 * (TLS with istiod's root certificate and SAN, or plaintext) instead of the agent's UDS.
 *
 * bootstrap_extensions as Istio's: envoy.bootstrap.internal_listener (64 KiB), and
 * metadata_discovery (istio.workload.BootstrapExtension over ADS) for waypoints and with
 * METADATA_DISCOVERY on — what waypoints need for main_internal / connect_originate and peer telemetry.
 *
 * Left out of Istio's template (not supported by the compiler yet, or no effect here):
 * the `sds-grpc` cluster (a unix pipe to the agent's SDS server),
 * the compressor filters of the 15090 listener, stats_config's stats_tags (skua tags its stats itself),
 * layered_runtime, overload_manager, admin access_log / profile_path, cluster_manager's outlier
 * event log, application_log_config and deferred_stat_options.
 */
import { isIP } from 'node:net';
import type { AgentSettings } from './agent-settings.ts';
import { ipMode } from './identity.ts';

type Json = Record<string, unknown>;

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } };
const H2_OPTIONS = {
  'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
    '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
    explicit_http_config: { http2_protocol_options: {} },
  },
};

function endpoint(cluster: string, address: string, port: number): Json {
  return {
    cluster_name: cluster,
    endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { protocol: 'TCP', address, port_value: port } } } }] }],
  };
}

function staticCluster(name: string, address: string, port: number): Json {
  return { name, alt_stat_name: `${name};`, type: 'STATIC', connect_timeout: '0.250s', lb_policy: 'ROUND_ROBIN', load_assignment: endpoint(name, address, port) };
}

/** A static listener with one HTTP route to a local cluster (15090 → admin, 15021 → agent). */
function localRouteListener(wildcard: string, port: number, statPrefix: string, prefix: string, cluster: string): Json {
  return {
    name: `${wildcard}_${port}`,
    address: { socket_address: { protocol: 'TCP', address: wildcard, port_value: port } },
    ignore_global_conn_limit: true,
    bypass_overload_manager: true,
    filter_chains: [{
      filters: [{
        name: 'envoy.filters.network.http_connection_manager',
        typed_config: {
          '@type': HCM, codec_type: 'AUTO', stat_prefix: statPrefix,
          route_config: { virtual_hosts: [{ name: 'backend', domains: ['*'], routes: [{ match: { prefix }, route: { cluster } }] }] },
          http_filters: [ROUTER],
        },
      }],
    }],
  };
}

function xdsCluster(s: AgentSettings, loopback: string): Json {
  const { host, port, tls } = s.xds;
  const literal = isIP(host) !== 0;
  const cluster: Json = {
    name: 'xds-grpc', alt_stat_name: 'xds-grpc;', type: literal ? 'STATIC' : 'STRICT_DNS', connect_timeout: '1s', lb_policy: 'ROUND_ROBIN',
    load_assignment: endpoint('xds-grpc', host, port),
    circuit_breakers: {
      thresholds: ['DEFAULT', 'HIGH'].map((priority) => ({ priority, max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 })),
    },
    upstream_connection_options: { tcp_keepalive: { keepalive_time: 300 } },
    max_requests_per_connection: 1,
    typed_extension_protocol_options: H2_OPTIONS,
  };
  if (!literal) cluster.dns_lookup_family = loopback === '::1' ? 'V6_ONLY' : 'V4_ONLY';
  if (tls) {
    cluster.transport_socket = {
      name: 'envoy.transport_sockets.tls',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
        sni: tls.san,
        common_tls_context: {
          alpn_protocols: ['h2'],
          validation_context: {
            ...(tls.rootCert ? { trusted_ca: { filename: tls.rootCert } } : {}),
            match_subject_alt_names: [{ exact: tls.san }],
          },
        },
      },
    };
  }
  return cluster;
}

const INTERNAL_LISTENER: Json = {
  name: 'envoy.bootstrap.internal_listener',
  typed_config: {
    '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct',
    type_url: 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener', value: { buffer_size_kb: 64 },
  },
};
const METADATA_DISCOVERY: Json = {
  name: 'metadata_discovery',
  typed_config: { '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct', type_url: 'type.googleapis.com/istio.workload.BootstrapExtension', value: { config_source: { ads: {} } } },
};

/** pilot-agent turns workload metadata discovery on for waypoints, else as the node's METADATA_DISCOVERY says. */
function metadataDiscovery(s: AgentSettings): boolean {
  const v = s.node.metadata.METADATA_DISCOVERY;
  return s.identity.type === 'waypoint' || v === true || v === 'true';
}

export function renderBootstrap(s: AgentSettings): Json {
  const mode = ipMode(s.identity.ipAddresses);
  const loopback = mode === 'ipv6' ? '::1' : '127.0.0.1';
  const wildcard = mode === 'ipv6' ? '::' : '0.0.0.0';
  const node = s.node;
  return {
    node: { id: node.id, cluster: node.cluster, locality: node.locality, metadata: node.metadata },
    // Istio's inclusion list: the stats Istio reads, nothing per cluster or per listener (issue 13).
    stats_config: { use_all_default_tags: false, stats_matcher: s.statsMatcher },
    bootstrap_extensions: metadataDiscovery(s) ? [METADATA_DISCOVERY, INTERNAL_LISTENER] : [INTERNAL_LISTENER],
    admin: { address: { socket_address: { address: loopback, port_value: s.adminPort } } },
    dynamic_resources: {
      lds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' },
      cds_config: { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' },
      ads_config: {
        api_type: 'DELTA_GRPC', set_node_on_first_message_only: true, transport_api_version: 'V3',
        grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }],
      },
    },
    static_resources: {
      clusters: [
        staticCluster('prometheus_stats', loopback, s.adminPort),
        staticCluster('agent', loopback, s.statusPort),
        xdsCluster(s, loopback),
      ],
      listeners: [
        localRouteListener(wildcard, s.envoyPrometheusPort, 'stats', '/stats/prometheus', 'prometheus_stats'),
        localRouteListener(wildcard, s.envoyStatusPort, 'agent', '/healthz/ready', 'agent'),
      ],
    },
  };
}
