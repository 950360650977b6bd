/**
 * Outbound HTTP routing as istiod writes it: one RouteConfiguration per port (named `<port>`),
 * one virtual host per service on that port (`<host>:<port>`), routes from the mesh file's
 * rules (VirtualService-like) or istiod's default route with its default retry policy.
 */
import { clusterName, T, type Json } from './names.ts';
import { retryPolicy } from './pieces.ts';
import { ruleRoutes } from './route-rules.ts';
import type { Mesh, MeshRoute, MeshService, MeshWorkload } from './types.ts';

/** Kubernetes services are `<name>.<namespace>.svc.<domain>`; ServiceEntry hosts are used as written. */
function isKube(s: MeshService): boolean {
  return s.hostname.startsWith(`${s.name}.${s.namespace}.svc.`);
}

/** The names a client in `fromNamespace` may use for a service: FQDN, short forms, the VIP; each with and without `:port`. */
export function serviceDomains(s: MeshService, port: number, fromNamespace: string): string[] {
  const names = isKube(s) ? [s.hostname, `${s.name}.${s.namespace}.svc`, `${s.name}.${s.namespace}`] : [s.hostname];
  if (isKube(s) && fromNamespace === s.namespace) names.push(s.name);
  if (!s.passthrough) names.push(s.vip);
  return names.flatMap((n) => [n, `${n}:${port}`]);
}

function defaultRoute(s: MeshService, port: number): Json {
  return {
    name: 'default', match: { prefix: '/' },
    route: { cluster: clusterName('outbound', port, '', s.hostname), timeout: '0s', retry_policy: retryPolicy(), max_grpc_timeout: '0s' },
    decorator: { operation: `${s.hostname}:${port}/*` },
  };
}

/** The route a sidecar uses for a service: the first one bound to the mesh for its host. */
export function meshRouteFor(mesh: Mesh, host: string): MeshRoute | undefined {
  return mesh.routes.find((r) => r.host === host && (r.gateways ?? ['mesh']).includes('mesh') && r.rules.length > 0);
}

/** RouteConfiguration `<port>` for the sidecar of `w`. */
export function outboundRouteConfig(mesh: Mesh, port: number, services: readonly MeshService[], w: MeshWorkload, allowAny: boolean): Json {
  const byHost = new Map(mesh.services.map((s) => [s.hostname, s] as const));
  const vhosts: Json[] = services.map((s) => {
    const r = meshRouteFor(mesh, s.hostname);
    const routes = r ? ruleRoutes(r, { port, gateway: 'mesh', source: w, services: byHost }, s.hostname) : [];
    return {
      name: `${s.hostname}:${port}`, domains: serviceDomains(s, port, w.namespace),
      routes: routes.length ? routes : [defaultRoute(s, port)], include_request_attempt_count: true,
    };
  });
  // Unknown hosts go where the app meant them to (mesh outboundTrafficPolicy ALLOW_ANY) when capture knows where that is.
  if (allowAny) {
    vhosts.push({
      name: 'allow_any', domains: ['*'], include_request_attempt_count: true,
      routes: [{ name: 'allow_any', match: { prefix: '/' }, route: { cluster: 'PassthroughCluster', timeout: '0s', max_grpc_timeout: '0s' } }],
    });
  }
  return { '@type': T.route, name: String(port), virtual_hosts: vhosts, validate_clusters: false };
}
