/**
 * A gateway's config (skua-proxy in router mode), istiod-shaped: per server port a listener
 * `0.0.0.0_<port>` whose HCM reads RDS `http.<port>` (plain HTTP) or `https.<port>.<name>`
 * (TLS terminated with the server's certificate files, or Istio mTLS), and route configurations
 * with one virtual host per routed host (`<host>:<port>`), from the routes bound to the gateway.
 */
import { selects, T, type Json } from './names.ts';
import { ADS_SOURCE, hcmCommon, istioMutualDownstream, OUTBOUND_HTTP_FILTERS, socketAddress } from './pieces.ts';
import { ruleRoutes } from './route-rules.ts';
import type { Mesh, MeshGateway, MeshGatewayServer, MeshRoute, MeshWorkload } from './types.ts';

/** The gateways whose selector picks this router pod. */
export function gatewaysOf(mesh: Mesh, w: MeshWorkload): MeshGateway[] {
  return (mesh.gateways ?? []).filter((g) => Object.keys(g.selector).length > 0 && selects(g.selector, w.labels) && (!g.sameNamespace || g.namespace === w.namespace));
}

function hostCovers(serverHost: string, host: string): boolean {
  if (serverHost === '*' || serverHost === host) return true;
  if (serverHost.startsWith('*.')) return host.endsWith(serverHost.slice(1)) || (host.startsWith('*.') && host.endsWith(serverHost.slice(1)));
  return host === '*' || (host.startsWith('*.') && serverHost.endsWith(host.slice(1)));
}

/** Does a server's `namespace/host` list admit a route (its namespace and host)? */
function admits(server: MeshGatewayServer, gw: MeshGateway, route: MeshRoute): boolean {
  return server.hosts.some((h) => {
    const [ns, host] = h.includes('/') ? h.split('/', 2) : ['*', h];
    const nsOk = ns === '*' || (ns === '.' ? route.namespace === gw.namespace : ns === route.namespace);
    return nsOk && hostCovers(host, route.host);
  });
}

function virtualHost(route: MeshRoute, gw: MeshGateway, port: number, w: MeshWorkload, mesh: Mesh): Json {
  const services = new Map(mesh.services.map((s) => [s.hostname, s] as const));
  // A gateway route's decorator names the destination service, as istiod's does.
  const routes = ruleRoutes(route, { port, gateway: gw.key, source: w, services });
  return { name: `${route.host}:${port}`, domains: route.host === '*' ? ['*'] : [route.host, `${route.host}:${port}`], routes, include_request_attempt_count: true };
}

function hcm(routeName: string, port: number, w: MeshWorkload): Json {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      ...hcmCommon(`outbound_0.0.0.0_${port}`), use_remote_address: true, forward_client_cert_details: 'SANITIZE_SET',
      rds: { config_source: ADS_SOURCE, route_config_name: routeName },
      // A gateway is a client of the sidecars: istio.alpn tells their inbound chains it speaks Istio's HTTP.
      http_filters: [OUTBOUND_HTTP_FILTERS[0], ...(w.security?.httpFilters ?? []), ...OUTBOUND_HTTP_FILTERS.slice(1)],
    },
  };
}

function serverTls(mesh: Mesh, s: MeshGatewayServer): Json | undefined {
  const t = s.tls;
  if (!t || t.httpsRedirect && s.protocol === 'HTTP') return undefined;
  if (t.mode === 'ISTIO_MUTUAL') return istioMutualDownstream(mesh.trustDomain, ['h2', 'http/1.1']);
  const common: Json = { alpn_protocols: ['h2', 'http/1.1'], tls_certificates: [{ certificate_chain: { filename: t.serverCertificate }, private_key: { filename: t.privateKey } }] };
  if (t.mode === 'MUTUAL' && t.caCertificates) common.validation_context = { trusted_ca: { filename: t.caCertificates } };
  return { name: 'envoy.transport_sockets.tls', typed_config: { '@type': T.downstreamTls, common_tls_context: common, require_client_certificate: t.mode === 'MUTUAL' } };
}

/** Listeners and route configurations for one router workload. */
export function gatewayResources(mesh: Mesh, w: MeshWorkload): Json[] {
  const bindIp = mesh.capture === 'none' ? w.ip : '0.0.0.0';
  const out: Json[] = [];
  const byPort = new Map<number, Array<{ gw: MeshGateway; server: MeshGatewayServer }>>();
  for (const gw of gatewaysOf(mesh, w)) {
    for (const server of gw.servers) {
      let l = byPort.get(server.port);
      if (!l) { l = []; byPort.set(server.port, l); }
      l.push({ gw, server });
    }
  }
  for (const [port, servers] of [...byPort].sort((a, b) => a[0] - b[0])) {
    const chains: Json[] = [];
    for (const [i, { gw, server }] of servers.entries()) {
      const tls = serverTls(mesh, server);
      // istiod: `https.<port>.<port name>.<gateway>.<namespace>` per TLS server; plain servers share `http.<port>`.
      const routeName = tls ? `https.${port}.${server.portName ?? `${server.protocol.toLowerCase()}-${i}`}.${gw.key.split('/')[1]}.${gw.namespace}` : `http.${port}`;
      if (!out.some((r) => r.name === routeName && r['@type'] === T.route)) {
        const vhosts: Json[] = [];
        const seen = new Set<string>();
        for (const { gw: g, server: s } of tls ? [{ gw, server }] : servers.filter((x) => !serverTls(mesh, x.server))) {
          for (const route of mesh.routes) {
            if (!(route.gateways ?? []).includes(g.key) || !admits(s, g, route) || seen.has(route.host)) continue;
            seen.add(route.host);
            const vh = virtualHost(route, g, port, w, mesh);
            if (s.tls?.httpsRedirect) vh.routes = [{ match: { prefix: '/' }, redirect: { https_redirect: true } }];
            vhosts.push(vh);
          }
        }
        out.push({ '@type': T.route, name: routeName, virtual_hosts: vhosts, validate_clusters: false });
      }
      if (tls) chains.push({ filter_chain_match: { server_names: server.hosts.map((h) => h.split('/').pop()!).filter((h) => h !== '*') }, filters: [hcm(routeName, port, w)], transport_socket: tls });
      else if (!chains.some((c) => !c.transport_socket)) chains.push({ filters: [hcm(routeName, port, w)] });
    }
    for (const c of chains) if ((c.filter_chain_match as Json | undefined)?.server_names && ((c.filter_chain_match as Json).server_names as string[]).length === 0) delete c.filter_chain_match;
    const l: Json = { '@type': T.listener, name: `0.0.0.0_${port}`, address: socketAddress(bindIp, port), filter_chains: chains, traffic_direction: 'OUTBOUND' };
    if (chains.some((c) => c.transport_socket)) l.listener_filters = [{ name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': T.tlsInspector } }];
    out.push(l);
  }
  return out;
}
