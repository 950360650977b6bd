/**
 * A waypoint's listeners, as istiod builds them (three, two of them internal):
 * - `connect_terminate` on the HBONE port: mutual TLS 1.3, HTTP/2 CONNECT terminated into the
 *   `main_internal` cluster; the caller's workload (WDS) and identity (certificate) and the
 *   CONNECT authority (the original VIP:port) ride along as filter state;
 * - `main_internal`: the restored original destination picks a chain (filter_chain_matcher on
 *   VIP, then port): per service port an HCM `inbound-vip|<port>|http|<host>` with the service's
 *   routes, its AuthorizationPolicies (peer principal from filter state), istio.stats as reporter
 *   "waypoint", or a TCP chain;
 * - `connect_originate`: tcp_proxy tunnelling to the endpoint (HBONE, see waypoint-clusters.ts).
 */
import { CONNECT_ORIGINATE, hboneTlsContext, MAIN_INTERNAL, servedBy, vipSubset, waypointClusters } from './waypoint-clusters.ts';
import { clusterName, T, type Json } from './names.ts';
import { hcmCommon, LISTENER_FILTER, socketAddress, tcpProxy } from './pieces.ts';
import { meshRouteFor } from './routes.ts';
import { ruleRoutes, type RouteContext } from './route-rules.ts';
import type { Mesh, MeshService, MeshWaypoint, MeshWorkload, ServicePort, WaypointSecurity } from './types.ts';

const NET_INPUT = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.';
const HCM_NAME = 'envoy.filters.network.http_connection_manager';
const ROUTER: Json = { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } };
const GRPC_STATS: Json = { name: 'envoy.filters.http.grpc_stats', typed_config: { '@type': T.grpcStats, emit_filter_state: true, stats_for_all_methods: false } };
const FAULT: Json = { name: 'envoy.filters.http.fault', typed_config: { '@type': T.fault } };
const CORS: Json = { name: 'envoy.filters.http.cors', typed_config: { '@type': T.cors } };
const STATS: Json = { name: 'istio.stats', typed_config: { '@type': T.typedStruct, type_url: T.stats, value: { reporter: 'SERVER_GATEWAY' } } };
const UPSTREAM_PEER: Json = {
  name: 'waypoint_upstream_peer_metadata',
  typed_config: { '@type': T.typedStruct, type_url: T.peerMetadata, value: { upstream_discovery: [{ workload_discovery: {} }] } },
};
const DOWNSTREAM_PEER: Json = {
  name: 'waypoint_downstream_peer_metadata',
  typed_config: { '@type': T.typedStruct, type_url: T.peerMetadata, value: { downstream_discovery: [{ workload_discovery: {} }], shared_with_upstream: true } },
};
const NO_SECURITY: WaypointSecurity = { httpFilters: [], tcpFilters: [] };

/** set_filter_state: what the inner connection needs to know about the tunnel it came through. */
function stateEntry(key: string, format: string, factory?: string): Json {
  const e: Json = { object_key: key, format_string: { text_format_source: { inline_string: format } }, shared_with_upstream: 'ONCE' };
  if (factory) e.factory_key = factory;
  return e;
}
const CONNECT_AUTHORITY: Json = {
  name: 'connect_authority',
  typed_config: {
    '@type': T.setFilterState,
    on_request_headers: [
      stateEntry('envoy.filters.listener.original_dst.local_ip', '%REQ(:AUTHORITY)%'),
      stateEntry('envoy.filters.listener.original_dst.remote_ip', '%DOWNSTREAM_REMOTE_ADDRESS%'),
      stateEntry('io.istio.peer_principal', '%DOWNSTREAM_PEER_URI_SAN%', 'envoy.string'),
      stateEntry('io.istio.local_principal', '%DOWNSTREAM_LOCAL_URI_SAN%', 'envoy.string'),
    ],
  },
};

function connectTerminate(mesh: Mesh, wp: MeshWaypoint, w: MeshWorkload): Json {
  const hcm: Json = {
    '@type': T.hcm, stat_prefix: 'connect_terminate',
    route_config: {
      name: 'default',
      virtual_hosts: [{
        name: 'default', domains: ['*'],
        routes: [{ match: { connect_matcher: {} }, route: { cluster: MAIN_INTERNAL, upgrade_configs: [{ upgrade_type: 'CONNECT', connect_config: {} }] } }],
      }],
    },
    http_filters: [DOWNSTREAM_PEER, CONNECT_AUTHORITY, ROUTER],
    http2_protocol_options: { max_concurrent_streams: 100, allow_connect: true },
    server_name: 'istio-envoy', use_remote_address: false, forward_client_cert_details: 'APPEND_FORWARD',
    set_current_client_cert_details: { subject: true, dns: true, uri: true }, upgrade_configs: [{ upgrade_type: 'CONNECT' }], stream_idle_timeout: '0s',
  };
  return {
    '@type': T.listener, name: 'connect_terminate', address: socketAddress(mesh.capture === 'none' ? w.ip : '0.0.0.0', wp.port),
    filter_chains: [{
      name: 'default', filters: [{ name: HCM_NAME, typed_config: hcm }],
      transport_socket: { name: 'tls', typed_config: { '@type': T.downstreamTls, common_tls_context: hboneTlsContext(mesh.trustDomain), require_client_certificate: true } },
    }],
  };
}

function defaultRoute(cluster: string, port: number): Json {
  return {
    match: { prefix: '/' },
    route: { cluster, timeout: '0s', max_stream_duration: { max_stream_duration: '0s', grpc_timeout_header_max: '0s' } },
    decorator: { operation: `:${port}/*` }, name: 'default',
  };
}

/** The HTTP routes for one service port: its VirtualService / HTTPRoute (the service's or the waypoint's namespace), else the default route. */
function routeConfig(mesh: Mesh, wp: MeshWaypoint, w: MeshWorkload, s: MeshService, p: ServicePort, name: string): Json {
  const byHost = new Map(mesh.services.map((x) => [x.hostname, x] as const));
  const ctx: RouteContext = {
    port: p.port, gateway: 'mesh', source: w, services: byHost,
    // Destinations this waypoint serves go to its inbound-vip clusters; others leave through outbound ones.
    cluster: (host, port, subset) => {
      const d = byHost.get(host);
      return d?.waypoint === wp.key ? clusterName('inbound-vip', port, vipSubset(d.ports.find((x) => x.port === port), subset), host) : clusterName('outbound', port, subset, host);
    },
  };
  const r = meshRouteFor(mesh, s.hostname);
  const routes = r && (r.namespace === s.namespace || r.namespace === wp.namespace) ? ruleRoutes(r, ctx, s.hostname) : [];
  return {
    name, validate_clusters: false,
    virtual_hosts: [{ name: `inbound|http|${p.port}`, domains: ['*'], routes: routes.length ? routes : [defaultRoute(name, p.port)] }],
  };
}

function httpChain(mesh: Mesh, wp: MeshWaypoint, w: MeshWorkload, s: MeshService, p: ServicePort): Json {
  const name = clusterName('inbound-vip', p.port, vipSubset(p, ''), s.hostname);
  const sec = wp.security.get(s.hostname) ?? NO_SECURITY;
  const hcm: Json = {
    ...hcmCommon(`inbound_0.0.0.0_${p.port}`), route_config: routeConfig(mesh, wp, w, s, p, name),
    http_filters: [...sec.httpFilters, GRPC_STATS, FAULT, CORS, UPSTREAM_PEER, STATS, ROUTER], server_name: 'istio-envoy',
  };
  if (p.protocol === 'http2' || p.protocol === 'grpc') hcm.http2_protocol_options = {};
  return { name, filters: [{ name: HCM_NAME, typed_config: hcm }] };
}

function tcpChain(wp: MeshWaypoint, s: MeshService, p: ServicePort): Json {
  const name = clusterName('inbound-vip', p.port, 'tcp', s.hostname);
  const sec = wp.security.get(s.hostname) ?? NO_SECURITY;
  return { name, filters: [...sec.tcpFilters, STATS, tcpProxy(name)] };
}

const chainAction = (name: string): Json => ({ action: { name, typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: name } } });

/** Envoy's listener filter predicate "destination port is one of". */
function portsPredicate(ports: readonly number[]): Json {
  const rules = ports.map((p) => ({ destination_port_range: { start: p, end: p + 1 } }));
  return rules.length === 1 ? rules[0] : { or_match: { rules } };
}

function mainInternal(mesh: Mesh, wp: MeshWaypoint, w: MeshWorkload): Json {
  const chains: Json[] = [];
  const ranges: Json[] = [];
  const knownPorts = new Set<number>();
  for (const s of servedBy(mesh, wp)) {
    const map: Record<string, Json> = {};
    for (const p of s.ports) {
      const chain = p.protocol === 'tcp' ? tcpChain(wp, s, p) : httpChain(mesh, wp, w, s, p);
      chains.push(chain);
      map[String(p.port)] = chainAction(String(chain.name));
      knownPorts.add(p.port);
    }
    ranges.push({
      ranges: [{ address_prefix: s.vip, prefix_len: s.vip.includes(':') ? 128 : 32 }],
      on_match: { matcher: { matcher_tree: { input: { name: 'port', typed_config: { '@type': `${NET_INPUT}DestinationPortInput` } }, exact_match_map: { map } } } },
    });
  }
  // Every port's protocol is declared, so the HTTP inspector has nothing to sniff on them (istiod disables it there).
  const inspector: Json = knownPorts.size ? { ...LISTENER_FILTER.httpInspector, filter_disabled: portsPredicate([...knownPorts].sort((a, b) => a - b)) } : LISTENER_FILTER.httpInspector;
  const l: Json = {
    '@type': T.listener, name: MAIN_INTERNAL, filter_chains: chains, listener_filters: [LISTENER_FILTER.originalDst, inspector],
    traffic_direction: 'INBOUND', internal_listener: {},
  };
  if (ranges.length) {
    l.filter_chain_matcher = {
      matcher_tree: {
        input: { name: 'ip', typed_config: { '@type': `${NET_INPUT}DestinationIPInput` } },
        custom_match: { name: 'ip', typed_config: { '@type': 'type.googleapis.com/xds.type.matcher.v3.IPMatcher', range_matchers: ranges } },
      },
    };
  }
  return l;
}

function connectOriginate(): Json {
  return {
    '@type': T.listener, name: CONNECT_ORIGINATE, use_original_dst: false, internal_listener: {}, listener_filters: [LISTENER_FILTER.originalDst],
    filter_chains: [{
      filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': T.tcpProxy, stat_prefix: CONNECT_ORIGINATE, cluster: CONNECT_ORIGINATE, tunneling_config: { hostname: '%DOWNSTREAM_LOCAL_ADDRESS%' } } }],
    }],
  };
}

/** Everything a waypoint pod's proxy gets (besides the shared outbound clusters). */
export function waypointResources(mesh: Mesh, w: MeshWorkload): Json[] {
  const wp = mesh.waypoints?.find((x) => x.key === w.waypointProxy);
  if (!wp) return [];
  return [connectTerminate(mesh, wp, w), mainInternal(mesh, wp, w), connectOriginate(), ...waypointClusters(mesh, wp)];
}
