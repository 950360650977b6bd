/**
 * A sidecar's outbound side, istiod-shaped: `0.0.0.0_<port>` HTTP listeners (RDS `<port>`),
 * `<vip>_<port>` TCP listeners (VirtualService tcp routes as weighted tcp_proxy clusters), and
 * under iptables capture virtualOutbound. A sidecar sees the services exported to its namespace
 * and, with a Sidecar resource, only the hosts its egress lists.
 */
import { ConfigError } from '@skua/proxy/core';
import { clusterName, T, type Json } from './names.ts';
import { ADS_SOURCE, hcmCommon, LISTENER_FILTER, OUTBOUND_HTTP_FILTERS, socketAddress, STATS, tcpProxy } from './pieces.ts';
import { meshRouteFor, outboundRouteConfig } from './routes.ts';
import { selects } from './names.ts';
import type { Mesh, MeshService, MeshWorkload, ServicePort } from './types.ts';

export { backends, endpointAddress, outboundClusters } from './clusters.ts';

function hostMatches(pattern: string, host: string): boolean {
  return pattern === '*' || pattern === host || (pattern.startsWith('*.') && host.endsWith(pattern.slice(1)));
}

/** Can `w`'s sidecar see `s` (exportTo, Sidecar egress hosts)? */
export function visibleTo(s: MeshService, w: MeshWorkload): boolean {
  const ex = s.exportTo;
  if (ex && !ex.includes('*') && !ex.includes(w.namespace) && !(ex.includes('.') && s.namespace === w.namespace)) return false;
  if (!w.egress) return true;
  return w.egress.some((e) => {
    const [ns, host] = e.split('/', 2);
    return (ns === '*' || ns === s.namespace) && hostMatches(host, s.hostname);
  });
}

/** tcp_proxy for a TCP service port: the VirtualService tcp route for this port and source, else the service. */
function tcpFilter(mesh: Mesh, s: MeshService, p: ServicePort, w: MeshWorkload): Json {
  const rule = meshRouteFor(mesh, s.hostname)?.tcp?.find((t) => (t.port === undefined || t.port === p.port) && (!t.sourceLabels || selects(t.sourceLabels, w.labels)));
  const dests = rule?.destinations.filter((d) => d.weight > 0) ?? [];
  const name = (d: { host?: string; subset: string; port?: number }): string => clusterName('outbound', d.port ?? p.port, d.subset, d.host ?? s.hostname);
  if (dests.length === 0) return tcpProxy(clusterName('outbound', p.port, '', s.hostname));
  if (dests.length === 1) return tcpProxy(name(dests[0]));
  const first = name(dests[0]);
  return { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': T.tcpProxy, stat_prefix: first, weighted_clusters: { clusters: dests.map((d) => ({ name: name(d), weight: d.weight })) } } };
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
    if (!visibleTo(s, w)) continue;
    for (const p of s.ports) {
      if (isHttp(p)) {
        claim(p.port, 'HTTP');
        let list = httpPorts.get(p.port);
        if (!list) { list = []; httpPorts.set(p.port, list); }
        list.push(s);
        continue;
      }
      claim(p.port, `${s.name} (tcp)`);
      out.push({ '@type': T.listener, name: `${s.vip}_${p.port}`, ...bind(s.vip, p.port), filter_chains: [{ filters: [STATS, tcpFilter(mesh, s, p, w)] }], traffic_direction: 'OUTBOUND' });
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
    out.push(l, outboundRouteConfig(mesh, port, services, w, captured && mesh.outboundAllowAny !== false));
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
