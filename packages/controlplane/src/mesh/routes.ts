/**
 * Outbound HTTP routing as istiod writes it: one RouteConfiguration per port (named `<port>`),
 * one virtual host per service on that port (`<host>:<port>`), routes from the mesh file's
 * rules (VirtualService-like) or istiod's default route with its default retry policy.
 */
import type { HeaderMatch, HttpRule, Mesh, MeshRoute, MeshService, RouteMatch } from './model.ts';
import { clusterName, T, type Json } from './names.ts';
import { retryPolicy } from './pieces.ts';

/** The names a client in `fromNamespace` may use for a service: FQDN, short forms, the VIP; each with and without `:port`. */
export function serviceDomains(s: MeshService, port: number, fromNamespace: string): string[] {
  const names = [s.hostname, `${s.name}.${s.namespace}.svc`, `${s.name}.${s.namespace}`];
  if (fromNamespace === s.namespace) names.push(s.name);
  names.push(s.vip);
  return names.flatMap((n) => [n, `${n}:${port}`]);
}

function headerMatcher(h: HeaderMatch): Json {
  switch (h.kind) {
    case 'present': return { name: h.name, present_match: true };
    case 'regex': return { name: h.name, string_match: { safe_regex: { regex: h.value } } };
    default: return { name: h.name, string_match: { [h.kind]: h.value } };
  }
}

function routeMatch(m: RouteMatch | undefined): Json {
  const out: Json = {};
  const p = m?.path;
  if (!p) out.prefix = '/';
  else if (p.kind === 'regex') out.safe_regex = { regex: p.value };
  else out[p.kind === 'exact' ? 'path' : 'prefix'] = p.value;
  out.case_sensitive = true;
  if (m && m.headers.length) out.headers = m.headers.map(headerMatcher);
  return out;
}

/** A percentage as istiod writes it (per million). */
function fraction(percent: number): Json {
  return { numerator: Math.round(percent * 10_000), denominator: 'MILLION' };
}

function faultConfig(f: NonNullable<HttpRule['fault']>): Json {
  const out: Json = { '@type': T.fault };
  if (f.delay) out.delay = { fixed_delay: f.delay.fixed, percentage: fraction(f.delay.percent) };
  if (f.abort) out.abort = { http_status: f.abort.httpStatus, percentage: fraction(f.abort.percent) };
  return out;
}

function action(rule: HttpRule, s: MeshService, port: number): Json {
  const live = rule.destinations.filter((d) => d.weight > 0);
  const a: Json = {};
  if (live.length === 1) a.cluster = clusterName('outbound', port, live[0].subset, s.hostname);
  else a.weighted_clusters = { clusters: live.map((d) => ({ name: clusterName('outbound', port, d.subset, s.hostname), weight: d.weight })) };
  a.timeout = rule.timeout ?? '0s';
  const r = rule.retries;
  if (!r) a.retry_policy = retryPolicy();
  else if (r.attempts > 0) a.retry_policy = retryPolicy(r.attempts, r.retryOn, r.perTryTimeout);
  a.max_grpc_timeout = '0s';
  return a;
}

function rulesToRoutes(route: MeshRoute, s: MeshService, port: number): Json[] {
  const out: Json[] = [];
  for (const rule of route.rules) {
    const base: Json = {
      route: action(rule, s, port),
      metadata: { filter_metadata: { istio: { config: `/apis/networking.istio.io/v1alpha3/namespaces/${route.namespace}/virtual-service/${route.name}` } } },
      decorator: { operation: `${s.hostname}:${port}/*` },
      name: rule.name,
    };
    if (rule.fault) base.typed_per_filter_config = { 'envoy.filters.http.fault': faultConfig(rule.fault) };
    // istiod writes one Envoy route per match of a rule (matches are OR-ed).
    const matches: (RouteMatch | undefined)[] = rule.matches.length ? [...rule.matches] : [undefined];
    for (const m of matches) out.push({ match: routeMatch(m), ...base });
  }
  return out;
}

function defaultRoute(s: MeshService, port: number): Json {
  return {
    name: 'default', match: { prefix: '/' },
    route: { cluster: clusterName('outbound', port, '', s.hostname), timeout: '0s', retry_policy: retryPolicy(), max_grpc_timeout: '0s' },
    decorator: { operation: `${s.hostname}:${port}/*` },
  };
}

/** RouteConfiguration `<port>` for a sidecar in `fromNamespace`. */
export function outboundRouteConfig(mesh: Mesh, port: number, services: readonly MeshService[], fromNamespace: string, allowAny: boolean): Json {
  const byHost = new Map(mesh.routes.map((r) => [r.host, r]));
  const vhosts: Json[] = services.map((s) => {
    const r = byHost.get(s.hostname);
    return {
      name: `${s.hostname}:${port}`, domains: serviceDomains(s, port, fromNamespace),
      routes: r ? rulesToRoutes(r, s, port) : [defaultRoute(s, port)], include_request_attempt_count: true,
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
