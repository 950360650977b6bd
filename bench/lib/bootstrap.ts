/**
 * Envoy v3 bootstrap YAML for skua-proxy, written the way an Envoy user writes
 * one: static listener + STATIC cluster with a load_assignment. The same file
 * runs unchanged on real Envoy (`envoy -c <file>`).
 */
import { HOST } from './net.ts';

const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const TCP_PROXY_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

function admin(adminPort: number): string {
  return `admin:
  address:
    socket_address:
      address: ${HOST}
      port_value: ${adminPort}
`;
}

function staticCluster(name: string, port: number): string {
  return `  clusters:
  - name: ${name}
    type: STATIC
    connect_timeout: 5s
    load_assignment:
      cluster_name: ${name}
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address:
                address: ${HOST}
                port_value: ${port}
`;
}

function listenerHead(name: string, port: number): string {
  return `  - name: ${name}
    address:
      socket_address:
        address: ${HOST}
        port_value: ${port}
    filter_chains:
    - filters:
`;
}

/** HTTP/1.1 reverse proxy: every request on `port` → cluster `backend`. */
export function httpProxyBootstrap(adminPort: number, port: number, backendPort: number): string {
  return `${admin(adminPort)}static_resources:
  listeners:
${listenerHead('bench_http', port)}      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": ${HCM_TYPE}
          stat_prefix: bench_http
          codec_type: AUTO
          route_config:
            name: local_route
            virtual_hosts:
            - name: backend
              domains: ["*"]
              routes:
              - match:
                  prefix: "/"
                route:
                  cluster: backend
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": ${ROUTER_TYPE}
${staticCluster('backend', backendPort)}`;
}

/** Plain TCP proxy: every connection on `port` → cluster `sink`. */
export function tcpProxyBootstrap(adminPort: number, port: number, upstreamPort: number): string {
  return `${admin(adminPort)}static_resources:
  listeners:
${listenerHead('bench_tcp', port)}      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": ${TCP_PROXY_TYPE}
          stat_prefix: bench_tcp
          cluster: sink
${staticCluster('sink', upstreamPort)}`;
}
