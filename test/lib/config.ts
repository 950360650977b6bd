// Small builders for Envoy v3 bootstrap fragments (plain JSON objects, as a user would write them).
import type { Json } from './proxy.ts';

export const T = {
  hcm: 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  tcpProxy: 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
  router: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  stdoutLog: 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
  downstreamTls: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
  upstreamTls: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
  tlsInspector: 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector',
  httpProtocolOptions: 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
} as const;

export function socketAddress(port: number, address = '127.0.0.1'): Json {
  return { socket_address: { address, port_value: port } };
}

export interface ListenerOptions {
  readonly name?: string;
  readonly listenerFilters?: Json[];
}

/** A listener with one or more filter chains. */
export function listener(port: number, chains: Json[], opts: ListenerOptions = {}): Json {
  return {
    name: opts.name ?? `listener_${port}`,
    address: socketAddress(port),
    ...(opts.listenerFilters ? { listener_filters: opts.listenerFilters } : {}),
    filter_chains: chains,
  };
}

export function chain(filter: Json, extra: Json = {}): Json {
  return { filters: [filter], ...extra };
}

export interface HcmOptions {
  readonly statPrefix?: string;
  readonly accessLog?: boolean;
  readonly codec?: 'AUTO' | 'HTTP1' | 'HTTP2';
  /** Extra HttpConnectionManager fields (upgrade_configs, http2_protocol_options, ...). */
  readonly extra?: Json;
}

export function hcm(virtualHosts: Json[], opts: HcmOptions = {}): Json {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': T.hcm,
      stat_prefix: opts.statPrefix ?? 'ingress_http',
      codec_type: opts.codec ?? 'AUTO',
      ...(opts.accessLog ? { access_log: [{ name: 'envoy.access_loggers.stdout', typed_config: { '@type': T.stdoutLog } }] } : {}),
      route_config: { name: 'local_route', virtual_hosts: virtualHosts },
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
      ...(opts.extra ?? {}),
    },
  };
}

export function vhost(routes: Json[], domains: string[] = ['*'], name = 'vh'): Json {
  return { name, domains, routes };
}

/** A prefix route to `cluster`; `route` adds RouteAction fields (timeout, prefix_rewrite, ...). */
export function routeTo(cluster: string, prefix = '/', route: Json = {}, extra: Json = {}): Json {
  return { match: { prefix }, route: { cluster, ...route }, ...extra };
}

export function tcpProxy(cluster: string, extra: Json = {}): Json {
  return { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': T.tcpProxy, stat_prefix: 'tcp', cluster, ...extra } };
}

export interface ClusterOptions {
  readonly type?: 'STATIC' | 'STRICT_DNS' | 'LOGICAL_DNS';
  readonly http2?: boolean;
  readonly connectTimeout?: string;
  /** health_status per endpoint (same order as ports). */
  readonly health?: readonly string[];
  readonly host?: string;
  readonly extra?: Json;
}

export function cluster(name: string, ports: readonly number[], opts: ClusterOptions = {}): Json {
  return {
    name,
    type: opts.type ?? 'STATIC',
    connect_timeout: opts.connectTimeout ?? '1s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: {
      cluster_name: name,
      endpoints: [{
        lb_endpoints: ports.map((p, i) => ({
          endpoint: { address: socketAddress(p, opts.host ?? '127.0.0.1') },
          ...(opts.health?.[i] ? { health_status: opts.health[i] } : {}),
        })),
      }],
    },
    ...(opts.http2 ? {
      typed_extension_protocol_options: {
        'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
          '@type': T.httpProtocolOptions,
          explicit_http_config: { http2_protocol_options: {} },
        },
      },
    } : {}),
    ...(opts.extra ?? {}),
  };
}

export function bootstrap(listeners: Json[], clusters: Json[]): Json {
  return { static_resources: { listeners, clusters } };
}

/** One HTTP listener on `port` routing everything to cluster `backend` at `backendPort`. */
export function simpleHttp(port: number, backendPort: number, opts: HcmOptions & { routeExtra?: Json; cluster?: ClusterOptions } = {}): Json {
  return bootstrap(
    [listener(port, [chain(hcm([vhost([routeTo('backend', '/', opts.routeExtra ?? {})])], opts))])],
    [cluster('backend', [backendPort], opts.cluster)],
  );
}

export function tlsCertificate(certPath: string, keyPath: string): Json {
  return { certificate_chain: { filename: certPath }, private_key: { filename: keyPath } };
}

export function downstreamTls(certPath: string, keyPath: string, alpn?: readonly string[]): Json {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': T.downstreamTls,
      common_tls_context: { tls_certificates: [tlsCertificate(certPath, keyPath)], ...(alpn ? { alpn_protocols: alpn } : {}) },
    },
  };
}

export function directResponse(status: number, body: string, prefix = '/'): Json {
  return { match: { prefix }, direct_response: { status, body: { inline_string: body } } };
}
