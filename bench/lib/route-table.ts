/**
 * A large, realistic Envoy RouteConfiguration for the route-table benchmarks
 * (scenarios/routes.ts, micro/route-match.bench.ts): N virtual hosts shaped
 * like istiod's sidecar virtual hosts (FQDN, short names and VIP, each with and
 * without the port) with 10 routes each mixing path, prefix, regex,
 * path_separated_prefix and header matches. The request the benchmarks send
 * hits the virtual host in the middle of the table and, inside it, route 5 of
 * 10 (routes 0–4 are evaluated and fail first).
 */

type Json = Record<string, unknown>;

export const SERVICE_PORT = 8080;
export const ROUTES_PER_VHOST = 10;
/** Index of the route the benchmark request matches inside its virtual host. */
export const TARGET_ROUTE = 5;
/** Response header the matched route adds, so a check can prove which route answered. */
export const ROUTE_HEADER = 'x-bench-route';

const WORDS = ['cart', 'catalog', 'checkout', 'payments', 'orders', 'users', 'search', 'inventory', 'shipping', 'reviews',
  'ratings', 'details', 'accounts', 'billing', 'auth', 'notifications', 'recommendations', 'pricing', 'media', 'ledger'];

export interface ServiceName { readonly short: string; readonly namespace: string; readonly fqdn: string; readonly vip: string }

export function serviceName(i: number): ServiceName {
  const short = `${WORDS[i % WORDS.length]}-${String(Math.floor(i / WORDS.length)).padStart(2, '0')}`;
  const namespace = `team-${String(i % 37).padStart(2, '0')}`;
  return { short, namespace, fqdn: `${short}.${namespace}.svc.cluster.local`, vip: `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}` };
}

/** istiod's domain list for one service port. */
export function domainsOf(s: ServiceName): string[] {
  const names = [s.fqdn, s.short, `${s.short}.${s.namespace}.svc`, `${s.short}.${s.namespace}`, s.vip];
  return names.flatMap((n) => [n, `${n}:${SERVICE_PORT}`]);
}

export function clusterOf(s: ServiceName, subset = ''): string {
  return `outbound|${SERVICE_PORT}|${subset}|${s.fqdn}`;
}

/** The request every benchmark sends: path, and headers besides Host. */
export const REQUEST_PATH = '/api/v1/products/42';
export const REQUEST_HEADERS: Readonly<Record<string, string>> = { 'x-tenant': 'acme', 'user-agent': 'wrk' };

function routes(s: ServiceName, cluster: (s: ServiceName, subset: string) => string, markTarget: boolean): Json[] {
  const to = (subset: string): Json => ({ cluster: cluster(s, subset), timeout: '0s' });
  const exact = (name: string, value: string): Json => ({ name, string_match: { exact: value } });
  const rs: Json[] = [
    { name: 'healthz', match: { path: '/healthz' }, route: to('v1') },
    { name: 'ready', match: { path: '/ready', case_sensitive: false }, route: to('v1') },
    { name: 'users', match: { prefix: '/api/v1/users' }, route: to('v1') },
    { name: 'orders-canary', match: { prefix: '/api/v1/orders', headers: [exact('x-canary', 'true')] }, route: to('v2') },
    { name: 'items', match: { safe_regex: { regex: '/api/v2/items/[0-9]+' } }, route: to('v1') },
    // TARGET_ROUTE: the benchmark request (prefix + header match) lands here.
    { name: 'products-acme', match: { prefix: '/api/v1/products', headers: [exact('x-tenant', 'acme')] }, route: to('v2') },
    { name: 'products', match: { prefix: '/api/v1/products' }, route: to('v1') },
    { name: 'static', match: { path_separated_prefix: '/static' }, route: to('v1') },
    { name: 'jason', match: { prefix: '/', headers: [exact('end-user', 'jason')] }, route: to('v2') },
    { name: 'default', match: { prefix: '/' }, route: to('v1') },
  ];
  if (markTarget) rs[TARGET_ROUTE].response_headers_to_add = [{ header: { key: ROUTE_HEADER, value: `${s.short}/${String(rs[TARGET_ROUTE].name)}` } }];
  return rs;
}

export interface RouteTableSpec {
  readonly vhosts: number;
  /** Cluster name for a service subset; the bench maps every one to the same backend. */
  readonly cluster?: (s: ServiceName, subset: string) => string;
  /** Every `wildcardEvery`-th virtual host also answers `*.<short>.example.com` (gateway-style). */
  readonly wildcardEvery?: number;
}

export interface RouteTableConfig {
  readonly routeConfig: Json;
  /** The service whose virtual host sits in the middle of the table. */
  readonly target: ServiceName;
  /** The Host header that selects it (FQDN with port, as a mesh client sends it). */
  readonly host: string;
  /** The response header value the matched route adds. */
  readonly expectRoute: string;
}

export function largeRouteTable(spec: RouteTableSpec): RouteTableConfig {
  const cluster = spec.cluster ?? clusterOf;
  const mid = Math.floor(spec.vhosts / 2);
  const virtualHosts: Json[] = [];
  for (let i = 0; i < spec.vhosts; i++) {
    const s = serviceName(i);
    const domains = domainsOf(s);
    if (spec.wildcardEvery && i % spec.wildcardEvery === 0) domains.push(`*.${s.short}.example.com`);
    virtualHosts.push({ name: `${s.fqdn}:${SERVICE_PORT}`, domains, routes: routes(s, cluster, i === mid), include_request_attempt_count: true });
  }
  virtualHosts.push({ name: 'block_all', domains: ['*'], routes: [{ name: 'block_all', match: { prefix: '/' }, direct_response: { status: 502 } }] });
  const target = serviceName(mid);
  return {
    routeConfig: { name: String(SERVICE_PORT), virtual_hosts: virtualHosts, validate_clusters: false },
    target,
    host: `${target.fqdn}:${SERVICE_PORT}`,
    expectRoute: `${target.short}/${'products-acme'}`,
  };
}
