/**
 * A sidecar's outbound side, istiod-shaped: EDS clusters `outbound|<port>|<subset>|<host>` with
 * Istio metadata and their ClusterLoadAssignments, `0.0.0.0_<port>` HTTP listeners (RDS `<port>`),
 * `<vip>_<port>` TCP listeners, and (under iptables capture) virtualOutbound with the
 * Passthrough/BlackHole clusters.
 */
import { ConfigError } from '@skua/proxy/core/errors.ts';
import type { Mesh, MeshService, MeshWorkload, ServicePort } from './model.ts';
import { clusterName, selects, serviceRef, spiffeId, T, workloadMetadata, type Json } from './names.ts';
import {
  ADS_SOURCE, hcmCommon, istioMutualUpstream, LISTENER_FILTER, OUTBOUND_HTTP_FILTERS, RAW_BUFFER_SOCKET, socketAddress, STATS, tcpProxy, UNLIMITED,
} from './pieces.ts';
import { outboundRouteConfig } from './routes.ts';

/** The workloads backing a service (optionally only those carrying a subset's labels). */
export function backends(mesh: Mesh, s: MeshService, subsetLabels?: Readonly<Record<string, string>>): MeshWorkload[] {
  return mesh.workloads.filter((w) => w.services.includes(s.hostname) && (!subsetLabels || selects(subsetLabels, w.labels)));
}

/** Where a peer reaches a workload's target port: the sidecar intercepts ip:target; a plain workload may say where its app is. */
export function endpointAddress(w: MeshWorkload, targetPort: number): { address: string; port: number } {
  if (!w.sidecar) {
    const app = w.app.get(targetPort);
    if (app) return app;
  }
  return { address: w.ip, port: targetPort };
}

function cla(mesh: Mesh, name: string, s: MeshService, p: ServicePort, subsetLabels?: Readonly<Record<string, string>>): Json {
  const lb = backends(mesh, s, subsetLabels).map((w) => {
    const a = endpointAddress(w, p.targetPort);
    const md: Json = { istio: { workload: workloadMetadata(mesh, w) } };
    // Sidecar'd endpoints take Istio mTLS (the cluster's tlsMode-istio transport socket match).
    if (w.sidecar) md['envoy.transport_socket_match'] = { tlsMode: 'istio' };
    return { endpoint: { address: socketAddress(a.address, a.port), health_check_config: {} }, health_status: 'HEALTHY', metadata: { filter_metadata: md }, load_balancing_weight: 1 };
  });
  const out: Json = { '@type': T.cla, cluster_name: name };
  if (lb.length) out.endpoints = [{ locality: {}, lb_endpoints: lb, load_balancing_weight: lb.length }];
  out.policy = { overprovisioning_factor: 140 };
  return out;
}

function cluster(mesh: Mesh, name: string, s: MeshService, p: ServicePort, subset: string, subsetLabels?: Readonly<Record<string, string>>): Json {
  const istio: Json = { default_original_port: p.port, services: [serviceRef(s)] };
  // Subsets are the mesh file's DestinationRule: name it as istiod does.
  if (s.subsets.size) istio.config = `/apis/networking.istio.io/v1alpha3/namespaces/${s.namespace}/destination-rule/${s.name}`;
  if (subset) istio.subset = subset;
  const c: Json = {
    '@type': T.cluster, name, type: 'EDS', eds_cluster_config: { eds_config: ADS_SOURCE, service_name: name },
    connect_timeout: '10s', lb_policy: 'LEAST_REQUEST', circuit_breakers: UNLIMITED, metadata: { filter_metadata: { istio } },
  };
  if (p.protocol === 'grpc' || p.protocol === 'http2') {
    c.typed_extension_protocol_options = { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': T.httpOptions, explicit_http_config: { http2_protocol_options: {} } } };
  }
  if (mesh.mtls !== 'DISABLE') {
    const sans = [...new Set(backends(mesh, s, subsetLabels).map((w) => spiffeId(mesh, w.namespace, w.serviceAccount)))].sort();
    c.filters = [{ name: 'istio.metadata_exchange', typed_config: { '@type': T.mx, protocol: 'istio-peer-exchange' } }];
    c.transport_socket_matches = [
      { name: 'tlsMode-istio', match: { tlsMode: 'istio' }, transport_socket: istioMutualUpstream(sans, `outbound_.${p.port}_.${subset}_.${s.hostname}`) },
      { name: 'tlsMode-disabled', match: {}, transport_socket: RAW_BUFFER_SOCKET },
    ];
  }
  return c;
}

/** Every outbound cluster and its endpoints: the same for every sidecar. */
export function outboundClusters(mesh: Mesh): Json[] {
  const out: Json[] = [];
  for (const s of mesh.services) {
    for (const p of s.ports) {
      const all = clusterName('outbound', p.port, '', s.hostname);
      out.push(cluster(mesh, all, s, p, ''), cla(mesh, all, s, p));
      for (const [subset, labels] of s.subsets) {
        const name = clusterName('outbound', p.port, subset, s.hostname);
        out.push(cluster(mesh, name, s, p, subset, labels), cla(mesh, name, s, p, labels));
      }
    }
  }
  if (mesh.capture === 'iptables') {
    out.push(
      { '@type': T.cluster, name: 'PassthroughCluster', type: 'ORIGINAL_DST', connect_timeout: '10s', lb_policy: 'CLUSTER_PROVIDED', circuit_breakers: UNLIMITED },
      { '@type': T.cluster, name: 'BlackHoleCluster', type: 'STATIC', connect_timeout: '10s' },
    );
  }
  return out;
}

function isHttp(p: ServicePort): boolean {
  return p.protocol !== 'tcp';
}

/** Outbound listeners and route configs for one sidecar. */
export function outboundListeners(mesh: Mesh, w: MeshWorkload): Json[] {
  const captured = mesh.capture === 'iptables';
  const bind = (address: string, port: number): Json => (captured ? { address: socketAddress(address, port), bind_to_port: false } : { address: socketAddress(w.outboundIp, port) });
  const httpPorts = new Map<number, MeshService[]>();
  const out: Json[] = [];
  const bound = new Map<number, string>();
  const claim = (port: number, what: string): void => {
    // Without capture every listener binds the sidecar's outbound address: one listener per port.
    const prev = bound.get(port);
    if (!captured && prev !== undefined && prev !== what) throw new ConfigError('services', `${prev} and ${what} both use port ${port}: with mesh.capture none a sidecar can listen once per port`);
    bound.set(port, what);
  };
  for (const s of mesh.services) {
    for (const p of s.ports) {
      if (isHttp(p)) {
        claim(p.port, 'HTTP');
        let list = httpPorts.get(p.port);
        if (!list) { list = []; httpPorts.set(p.port, list); }
        list.push(s);
        continue;
      }
      claim(p.port, `${s.name} (tcp)`);
      const c = clusterName('outbound', p.port, '', s.hostname);
      out.push({ '@type': T.listener, name: `${s.vip}_${p.port}`, ...bind(s.vip, p.port), filter_chains: [{ filters: [STATS, tcpProxy(c)] }], traffic_direction: 'OUTBOUND' });
    }
  }
  for (const [port, services] of httpPorts) {
    const hcm = { ...hcmCommon(`outbound_0.0.0.0_${port}`), rds: { config_source: ADS_SOURCE, route_config_name: String(port) }, http_filters: OUTBOUND_HTTP_FILTERS };
    const l: Json = {
      '@type': T.listener, name: `0.0.0.0_${port}`, ...bind('0.0.0.0', port),
      filter_chains: [{
        filter_chain_match: { transport_protocol: 'raw_buffer', application_protocols: ['http/1.1', 'h2c'] },
        filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: hcm }],
      }],
      listener_filters: [LISTENER_FILTER.tlsInspector, LISTENER_FILTER.httpInspector],
      listener_filters_timeout: '0s', continue_on_listener_filters_timeout: true, traffic_direction: 'OUTBOUND',
    };
    // Non-HTTP bytes on an HTTP port pass through to where they were going (only capture knows where).
    if (captured) l.default_filter_chain = { filter_chain_match: {}, filters: [STATS, tcpProxy('PassthroughCluster')], name: 'PassthroughFilterChain' };
    out.push(l, outboundRouteConfig(mesh, port, services, w.namespace, captured));
  }
  if (captured) {
    out.push({
      '@type': T.listener, name: 'virtualOutbound', address: socketAddress('0.0.0.0', 15001), use_original_dst: true,
      filter_chains: [{ name: 'virtualOutbound-catchall-tcp', filters: [STATS, tcpProxy('PassthroughCluster')] }],
      listener_filters: [LISTENER_FILTER.originalDst], traffic_direction: 'OUTBOUND',
    });
  }
  return out;
}
