/**
 * A sidecar's inbound side: `inbound|<port>||` clusters to the app and a simplified
 * virtualInbound (one filter chain per target port; plaintext and/or Istio mTLS by the
 * PeerAuthentication mode of that port, with the workload's jwt_authn / RBAC filters in
 * istiod's places). Under capture `none` each port gets its own listener on the workload's address.
 */
import type { Mesh, MeshService, MeshWorkload, MtlsMode, ServicePort } from './types.ts';
import { clusterName, serviceRef, T, type Json } from './names.ts';
import { hcmCommon, INBOUND_HTTP_FILTERS, istioMutualDownstream, LISTENER_FILTER, socketAddress, STATS, tcpProxy, UNLIMITED } from './pieces.ts';

interface InboundPort {
  readonly target: number;
  readonly port: ServicePort;
  readonly services: MeshService[];
}

/** The workload's target ports and the services (and service ports) that reach them. */
export function inboundPorts(mesh: Mesh, w: MeshWorkload): InboundPort[] {
  const byTarget = new Map<number, InboundPort>();
  for (const s of mesh.services) {
    if (!w.services.includes(s.hostname)) continue;
    for (const p of s.ports) {
      const known = byTarget.get(p.targetPort);
      if (known) { if (!known.services.includes(s)) known.services.push(s); continue; }
      byTarget.set(p.targetPort, { target: p.targetPort, port: p, services: [s] });
    }
  }
  return [...byTarget.values()].sort((a, b) => a.target - b.target);
}

function inboundCluster(mesh: Mesh, w: MeshWorkload, ip: InboundPort): Json {
  const name = clusterName('inbound', ip.target, '', '');
  const metadata = { filter_metadata: { istio: { services: ip.services.map(serviceRef) } } };
  if (mesh.capture === 'iptables') {
    // The app listens on the pod IP; connect to where the peer was going, from 127.0.0.6 (iptables lets that through).
    return {
      '@type': T.cluster, name, type: 'ORIGINAL_DST', connect_timeout: '10s', lb_policy: 'CLUSTER_PROVIDED', cleanup_interval: '60s',
      circuit_breakers: UNLIMITED, upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } }, metadata,
    };
  }
  const app = w.app.get(ip.target) ?? { address: '127.0.0.1', port: ip.target };
  return {
    '@type': T.cluster, name, type: 'STATIC', connect_timeout: '10s', circuit_breakers: UNLIMITED, metadata,
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: socketAddress(app.address, app.port) } }] }] },
  };
}

/** The mTLS mode of one inbound port: the workload's PeerAuthentication (port level first), else the mesh's. */
function modeOf(mesh: Mesh, w: MeshWorkload, target: number): MtlsMode {
  return w.security ? w.security.portMtls.get(target) ?? w.security.mtls : mesh.mtls;
}

function httpChainFilters(ip: InboundPort, w: MeshWorkload): Json[] {
  const cluster = clusterName('inbound', ip.target, '', '');
  const s = ip.services[0];
  const hcm = {
    ...hcmCommon(`inbound_0.0.0.0_${ip.target}`),
    route_config: {
      name: cluster, validate_clusters: false,
      virtual_hosts: [{
        name: `inbound|http|${ip.port.port}`, domains: ['*'],
        routes: [{
          name: 'default', match: { prefix: '/' },
          route: { cluster, timeout: '0s', max_stream_duration: { max_stream_duration: '0s', grpc_timeout_header_max: '0s' } },
          decorator: { operation: `${s.hostname}:${ip.port.port}/*` },
        }],
      }],
    },
    // istiod: metadata exchange, then authentication and authorization, then the rest.
    http_filters: [INBOUND_HTTP_FILTERS[0], ...(w.security?.httpFilters ?? []), ...INBOUND_HTTP_FILTERS.slice(1)], server_name: 'istio-envoy',
    forward_client_cert_details: 'APPEND_FORWARD', set_current_client_cert_details: { subject: true, dns: true, uri: true },
  };
  return [{ name: 'envoy.filters.network.http_connection_manager', typed_config: hcm }];
}

/** The filter chains for one target port (`match` adds destination_port under capture). */
function chains(mesh: Mesh, w: MeshWorkload, ip: InboundPort, match: Json): Json[] {
  const http = ip.port.protocol !== 'tcp';
  const filters = http ? httpChainFilters(ip, w) : [...(w.security?.tcpFilters ?? []), STATS, tcpProxy(clusterName('inbound', ip.target, '', ''))];
  const mode = modeOf(mesh, w, ip.target);
  const name = `0.0.0.0_${ip.target}`;
  const out: Json[] = [];
  if (mode !== 'DISABLE') {
    const mx = { name: 'istio.metadata_exchange', typed_config: { '@type': T.mx, protocol: 'istio-peer-exchange' } };
    const alpn = http ? ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'] : ['istio-peer-exchange', 'istio'];
    out.push({
      filter_chain_match: { ...match, transport_protocol: 'tls', application_protocols: alpn },
      filters: [mx, ...filters], transport_socket: istioMutualDownstream(mesh.trustDomain, http ? ['h2', 'http/1.1'] : ['istio-peer-exchange', 'h2', 'http/1.1']), name,
    });
  }
  if (mode !== 'STRICT') out.push({ filter_chain_match: { ...match, transport_protocol: 'raw_buffer' }, filters, name });
  return out;
}

/** Inbound clusters and listener(s) for one sidecar. */
export function inboundResources(mesh: Mesh, w: MeshWorkload): Json[] {
  const ports = inboundPorts(mesh, w);
  if (ports.length === 0 || w.router) return [];
  const out: Json[] = ports.map((ip) => inboundCluster(mesh, w, ip));
  const inspectors = ports.every((ip) => modeOf(mesh, w, ip.target) === 'DISABLE') ? [] : [LISTENER_FILTER.tlsInspector];
  if (mesh.capture === 'iptables') {
    out.push({
      '@type': T.listener, name: 'virtualInbound', address: socketAddress('0.0.0.0', 15006),
      filter_chains: ports.flatMap((ip) => chains(mesh, w, ip, { destination_port: ip.target })),
      listener_filters: [LISTENER_FILTER.originalDst, ...inspectors],
      listener_filters_timeout: '0s', continue_on_listener_filters_timeout: true, traffic_direction: 'INBOUND',
    });
    return out;
  }
  for (const ip of ports) {
    const l: Json = {
      '@type': T.listener, name: `virtualInbound_${w.ip}_${ip.target}`, address: socketAddress(w.ip, ip.target),
      filter_chains: chains(mesh, w, ip, {}), traffic_direction: 'INBOUND',
    };
    if (inspectors.length) Object.assign(l, { listener_filters: inspectors, listener_filters_timeout: '0s', continue_on_listener_filters_timeout: true });
    out.push(l);
  }
  return out;
}
