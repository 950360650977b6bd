import type { Bench } from 'tinybench';
import { RouteTable } from '../../packages/proxy/src/http/route-config.ts';
import type { RequestView } from '../../packages/proxy/src/http/route-match.ts';
import { Msg } from '../../packages/proxy/src/config/fields.ts';
import { largeRouteTable, REQUEST_HEADERS, REQUEST_PATH, serviceName } from '../lib/route-table.ts';

/**
 * RouteTable lookups (virtual host by :authority, then the first matching route), on tables
 * compiled once as the proxy compiles them. The large table is the routes scenario's: 1,000
 * istiod-style virtual hosts × 10 routes, every 10th with a `*.<name>.example.com` wildcard.
 */

function view(authority: string, path: string, headers: Record<string, string>): RequestView {
  return { method: 'GET', path, authority, scheme: 'http', headers: { host: authority, ...headers } };
}

function compile(routeConfig: Record<string, unknown>): RouteTable {
  return new RouteTable(new Msg(routeConfig, 'route_config'));
}

/** Fails the benchmark (instead of timing a miss) when a lookup does not land on the expected route. */
function expectRoute(table: RouteTable, req: RequestView, vhost: string, route: string): void {
  const m = table.route(req.authority, req, false);
  if (m?.vhost.name !== vhost || m.route.name !== route) {
    throw new Error(`lookup of ${req.authority}${req.path} matched ${m ? `${m.vhost.name}/${m.route.name}` : 'nothing'}, expected ${vhost}/${route}`);
  }
}

export default function register(bench: Bench): void {
  // Single route: the bench's default bootstrap (`*`, prefix `/`).
  const single = compile({ name: 'local_route', virtual_hosts: [{ name: 'backend', domains: ['*'], routes: [{ name: 'all', match: { prefix: '/' }, route: { cluster: 'backend' } }] }] });
  const singleReq = view('127.0.0.1:10000', REQUEST_PATH, REQUEST_HEADERS);
  expectRoute(single, singleReq, 'backend', 'all');

  const big = largeRouteTable({ vhosts: 1000, wildcardEvery: 10 });
  const table = compile(big.routeConfig);
  const targetVhost = `${big.target.fqdn}:8080`;

  // 1,000 × 10, exact domain (FQDN:port) → route 5 of 10 (prefix + header match after 5 misses).
  const exactReq = view(big.host, REQUEST_PATH, REQUEST_HEADERS);
  expectRoute(table, exactReq, targetVhost, 'products-acme');

  // Wildcard domain `*.<short>.example.com` (no exact entry) on a vhost near the middle → first route.
  const wild = serviceName(490);
  const wildReq = view(`api.${wild.short}.example.com`, '/healthz', {});
  expectRoute(table, wildReq, `${wild.fqdn}:8080`, 'healthz');

  // Header-match route: `end-user: jason` on a catch-all prefix, after 8 non-matching routes.
  const headerReq = view(big.host, '/productpage', { 'end-user': 'jason' });
  expectRoute(table, headerReq, targetVhost, 'jason');

  // Regex route (safe_regex `/api/v2/items/[0-9]+`, RE2 full match), after 4 non-matching routes.
  const regexReq = view(big.host, '/api/v2/items/12345', {});
  expectRoute(table, regexReq, targetVhost, 'items');

  // Miss: no route table entry for the host → the `*` block_all virtual host (scans every wildcard).
  const missReq = view('unknown.example.org', '/', {});
  expectRoute(table, missReq, 'block_all', 'block_all');

  bench.add('route match: single route (* , prefix /)', () => { single.route(singleReq.authority, singleReq, false); });
  bench.add('route match: 1,000 vhosts x 10, exact domain, route 5 (prefix + header)', () => { table.route(exactReq.authority, exactReq, false); });
  bench.add('route match: 1,000 vhosts x 10, wildcard domain *.x.example.com', () => { table.route(wildReq.authority, wildReq, false); });
  bench.add('route match: 1,000 vhosts x 10, header route (end-user: jason), route 8', () => { table.route(headerReq.authority, headerReq, false); });
  bench.add('route match: 1,000 vhosts x 10, safe_regex route, route 4', () => { table.route(regexReq.authority, regexReq, false); });
  bench.add('route match: 1,000 vhosts x 10, unknown host → * (all wildcards scanned)', () => { table.route(missReq.authority, missReq, false); });
}
