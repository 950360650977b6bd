/** The building blocks istiod repeats in every sidecar config: filters, TLS contexts, limits. */
import { T, type Json } from './names.ts';

export const ADS_SOURCE: Json = { ads: {}, initial_fetch_timeout: '0s', resource_api_version: 'V3' };

/** Envoy's "no limit" circuit breakers, as istiod writes them. */
export const UNLIMITED: Json = {
  thresholds: [{ max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295, max_retries: 4294967295, track_remaining: true }],
};

export const DEFAULT_RETRY_ON = 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes';

/** istiod's retry policy when a route says nothing (2 retries on connect failures and 503). */
export function retryPolicy(attempts = 2, retryOn = DEFAULT_RETRY_ON, perTryTimeout?: string): Json {
  const p: Json = {
    retry_on: retryOn, num_retries: attempts,
    retry_host_predicate: [{ name: 'envoy.retry_host_predicates.previous_hosts' }],
    host_selection_retry_max_attempts: '5', retriable_status_codes: [503],
  };
  if (perTryTimeout) p.per_try_timeout = perTryTimeout;
  return p;
}

const MX_WASM: Json = {
  name: 'istio.metadata_exchange',
  typed_config: {
    '@type': T.wasm,
    config: { vm_config: { runtime: 'envoy.wasm.runtime.null', code: { local: { inline_string: 'envoy.wasm.metadata_exchange' } } }, configuration: { '@type': T.mx } },
  },
};
const GRPC_STATS: Json = { name: 'envoy.filters.http.grpc_stats', typed_config: { '@type': T.grpcStats, emit_filter_state: true, stats_for_all_methods: false } };
const ALPN: Json = {
  name: 'istio.alpn',
  typed_config: {
    '@type': T.alpn,
    alpn_override: [
      { alpn_override: ['istio-http/1.0', 'istio', 'http/1.0'] },
      { upstream_protocol: 'HTTP11', alpn_override: ['istio-http/1.1', 'istio', 'http/1.1'] },
      { upstream_protocol: 'HTTP2', alpn_override: ['istio-h2', 'istio', 'h2'] },
    ],
  },
};
const FAULT: Json = { name: 'envoy.filters.http.fault', typed_config: { '@type': T.fault } };
const CORS: Json = { name: 'envoy.filters.http.cors', typed_config: { '@type': T.cors } };
export const STATS: Json = { name: 'istio.stats', typed_config: { '@type': T.stats } };
const ROUTER: Json = { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } };

/** The sidecar HTTP filter chains, in istiod's order (no authorization policies: no RBAC filters). */
export const OUTBOUND_HTTP_FILTERS: readonly Json[] = [MX_WASM, GRPC_STATS, ALPN, FAULT, CORS, STATS, ROUTER];
export const INBOUND_HTTP_FILTERS: readonly Json[] = [MX_WASM, GRPC_STATS, FAULT, CORS, STATS, ROUTER];

/** The HCM fields istiod sets on every sidecar listener. */
export function hcmCommon(statPrefix: string): Json {
  return {
    '@type': T.hcm, stat_prefix: statPrefix, use_remote_address: false,
    upgrade_configs: [{ upgrade_type: 'websocket' }], stream_idle_timeout: '0s', normalize_path: true,
    request_id_extension: { typed_config: { '@type': T.uuid, use_request_id_for_trace_sampling: true } },
    path_with_escaped_slashes_action: 'KEEP_UNCHANGED',
  };
}

export function tcpProxy(cluster: string): Json {
  return { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': T.tcpProxy, stat_prefix: cluster, cluster } };
}

export function socketAddress(address: string, port: number): Json {
  return { socket_address: { address, port_value: port } };
}

/** The workload certificate and root from the node's SDS server (pilot-agent's `sds-grpc`). */
export function sdsSecret(name: string): Json {
  return {
    name,
    sds_config: {
      api_config_source: { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'sds-grpc' } }], set_node_on_first_message_only: true, transport_api_version: 'V3' },
      initial_fetch_timeout: '0s', resource_api_version: 'V3',
    },
  };
}

const TLS_PARAMS: Json = { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3' };

/** Istio mutual TLS to a sidecar'd endpoint: `default` cert, `ROOTCA` trust, the SANs of the backing service accounts. */
export function istioMutualUpstream(sans: readonly string[], sni: string): Json {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': T.upstreamTls,
      common_tls_context: {
        tls_params: TLS_PARAMS, alpn_protocols: ['istio-peer-exchange', 'istio'],
        tls_certificate_sds_secret_configs: [sdsSecret('default')],
        combined_validation_context: {
          default_validation_context: { match_subject_alt_names: sans.map((s) => ({ exact: s })) },
          validation_context_sds_secret_config: sdsSecret('ROOTCA'),
        },
      },
      sni,
    },
  };
}

/** istiod's inbound cipher list (ECDHE and AES-GCM only). */
const INBOUND_CIPHERS = [
  'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256', 'AES256-GCM-SHA384', 'AES128-GCM-SHA256',
];

export function istioMutualDownstream(trustDomain: string, alpn: readonly string[]): Json {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': T.downstreamTls,
      common_tls_context: {
        tls_params: { ...TLS_PARAMS, cipher_suites: INBOUND_CIPHERS }, alpn_protocols: [...alpn],
        tls_certificate_sds_secret_configs: [sdsSecret('default')],
        combined_validation_context: {
          default_validation_context: { match_subject_alt_names: [{ prefix: `spiffe://${trustDomain}/` }] },
          validation_context_sds_secret_config: sdsSecret('ROOTCA'),
        },
      },
      require_client_certificate: true,
    },
  };
}

export const RAW_BUFFER_SOCKET: Json = { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': T.rawBuffer } };

export const LISTENER_FILTER = {
  originalDst: { name: 'envoy.filters.listener.original_dst', typed_config: { '@type': T.originalDst } },
  tlsInspector: { name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': T.tlsInspector } },
  httpInspector: { name: 'envoy.filters.listener.http_inspector', typed_config: { '@type': T.httpInspector } },
} as const;
