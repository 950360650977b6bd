// xDS resources (with their @type, as an ADS server sends them) for agent tests: a STATIC
// cluster to a local backend and HTTP listeners with a traffic direction (istiod marks the
// sidecar's listeners INBOUND or OUTBOUND; pilot-agent's drain only touches INBOUND ones).
import type { Json } from './proxy.ts';

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } };

export function xdsCluster(name: string, port: number, extra: Json = {}): Json {
  return {
    '@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', name, type: 'STATIC', connect_timeout: '1s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
    ...extra,
  };
}

/** An HTTP listener to `cluster`, with an inline route table or one named for RDS. */
export function xdsHttpListener(name: string, port: number, cluster: string, o: { direction?: 'INBOUND' | 'OUTBOUND'; rds?: string } = {}): Json {
  const routes = o.rds
    ? { rds: { route_config_name: o.rds, config_source: { ads: {}, resource_api_version: 'V3' } } }
    : { route_config: routeTable(name, cluster) };
  return {
    '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener', name,
    address: { socket_address: { address: '127.0.0.1', port_value: port } },
    ...(o.direction ? { traffic_direction: o.direction } : {}),
    filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: { '@type': HCM, stat_prefix: name, ...routes, http_filters: [ROUTER] } }] }],
  };
}

function routeTable(name: string, cluster: string): Json {
  return { name, virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster } }] }] };
}

/** A RouteConfiguration resource for RDS. */
export function xdsRoute(name: string, cluster: string): Json {
  return { '@type': 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration', ...routeTable(name, cluster) };
}
