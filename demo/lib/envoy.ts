/**
 * Builders for Envoy v3 bootstrap pieces, written as an Envoy user writes them (typed_config with
 * @type, load_assignment): the generated file runs unchanged on real Envoy.
 */
import type { YamlValue } from './yaml.ts';

type Obj = { [k: string]: YamlValue };

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const TCP_PROXY = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
const STDOUT_LOG = 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog';

export const socketAddress = (address: string, port: number): Obj => ({ socket_address: { address, port_value: port } });

/** A cluster with one endpoint per address; `STRICT_DNS` when the addresses are names (compose). */
export function cluster(name: string, endpoints: ReadonlyArray<{ host: string; port: number }>, type: 'STATIC' | 'STRICT_DNS' = 'STATIC'): Obj {
  return {
    name,
    type,
    connect_timeout: '1s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: endpoints.map((e) => ({ endpoint: { address: socketAddress(e.host, e.port) } })) }],
    },
  };
}

/** An http_connection_manager listener with an inline route_config and Envoy's default access log. */
export function httpListener(name: string, address: string, port: number, virtualHosts: Obj[], accessLog = true): Obj {
  return {
    name,
    address: socketAddress(address, port),
    filter_chains: [{
      filters: [{
        name: 'envoy.filters.network.http_connection_manager',
        typed_config: {
          '@type': HCM,
          stat_prefix: name,
          codec_type: 'AUTO',
          access_log: accessLog ? [{ name: 'envoy.access_loggers.stdout', typed_config: { '@type': STDOUT_LOG } }] : undefined,
          route_config: { name: `${name}_routes`, virtual_hosts: virtualHosts },
          http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } }],
        },
      }],
    }],
  };
}

export function tcpListener(name: string, address: string, port: number, clusterName: string): Obj {
  return {
    name,
    address: socketAddress(address, port),
    filter_chains: [{
      filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY, stat_prefix: name, cluster: clusterName } }],
    }],
  };
}

/** A route action splitting traffic over clusters by weight (e.g. a canary). */
export const weighted = (split: Record<string, number>, extra: Obj = {}): Obj => ({
  weighted_clusters: { clusters: Object.entries(split).map(([name, weight]) => ({ name, weight })) },
  ...extra,
});

export function bootstrap(nodeId: string, admin: { address: string; port: number }, listeners: Obj[], clusters: Obj[]): Obj {
  return {
    node: { id: nodeId, cluster: 'skua-demo' },
    admin: { address: socketAddress(admin.address, admin.port) },
    static_resources: { listeners, clusters },
  };
}
