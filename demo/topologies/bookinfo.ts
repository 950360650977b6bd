/**
 * Bookinfo, minus most of the books: productpage → reviews (v1 80% / v2 20%), all behind one
 * skua-proxy on a static Envoy bootstrap with three listeners and admin:
 *
 *   ingress   :I  HTTP  /healthz direct_response, / redirect, /productpage, /reviews/* split,
 *                       /reviews/* with `x-canary: true` → v2, /api/v1/reviews/* prefix + host rewrite
 *   outbound  :O  HTTP  authority reviews:9080 → the same split (productpage's calls, as a sidecar's)
 *   tcp       :T  TCP   tcp_proxy → tcp-echo
 *   admin     :A        /ready /stats /clusters /config_dump ...
 */
import { freePort, get, HOST } from '../lib/net.ts';
import { h2Get, tcpRoundTrip } from '../lib/probes.ts';
import { bootstrap, cluster, httpListener, tcpListener, weighted } from '../lib/envoy.ts';
import { toYaml } from '../lib/yaml.ts';
import type { Check, Topology, TopologyOptions } from '../lib/topology.ts';

export interface BookinfoPorts {
  productpage: number; reviewsV1: number; reviewsV2: number; tcpEcho: number;
  ingress: number; outbound: number; tcp: number; admin: number;
}

/** Free loopback ports for every app and listener. */
export async function bookinfoPorts(): Promise<BookinfoPorts> {
  const keys = ['productpage', 'reviewsV1', 'reviewsV2', 'tcpEcho', 'ingress', 'outbound', 'tcp', 'admin'] as const;
  const out = {} as BookinfoPorts;
  const used = new Set<number>();
  for (const k of keys) {
    let port = await freePort();
    while (used.has(port)) port = await freePort();
    used.add(port);
    out[k] = port;
  }
  return out;
}

export const SPLIT = { 'reviews-v1': 80, 'reviews-v2': 20 };

/**
 * The proxy's bootstrap. With `dns`, endpoints are DNS names equal to the cluster names (STRICT_DNS),
 * as in compose.yaml where each app is a service of that name; otherwise loopback ports (STATIC).
 */
export function bookinfoBootstrap(p: BookinfoPorts, listen = HOST, dns = false): string {
  const ep = (name: string, port: number): Array<{ host: string; port: number }> => [{ host: dns ? name : HOST, port }];
  const type = dns ? 'STRICT_DNS' : 'STATIC';
  const reviewsRoute = (extra = {}) => weighted(SPLIT, { timeout: '3s', ...extra });
  const ingressHost = {
    name: 'bookinfo',
    domains: ['*'],
    response_headers_to_add: [{ header: { key: 'x-served-by', value: 'skua-ingress' } }],
    routes: [
      { name: 'healthz', match: { path: '/healthz' }, direct_response: { status: 200, body: { inline_string: 'ok\n' } } },
      { name: 'home', match: { path: '/' }, redirect: { path_redirect: '/productpage', response_code: 'FOUND' } },
      { name: 'productpage', match: { prefix: '/productpage' }, route: { cluster: 'productpage', timeout: '5s' } },
      { name: 'reviews-canary', match: { prefix: '/reviews/', headers: [{ name: 'x-canary', string_match: { exact: 'true' } }] }, route: { cluster: 'reviews-v2', timeout: '3s' } },
      { name: 'reviews', match: { prefix: '/reviews/' }, route: reviewsRoute() },
      { name: 'reviews-api', match: { prefix: '/api/v1/reviews/' }, route: reviewsRoute({ prefix_rewrite: '/reviews/', host_rewrite_literal: 'reviews:9080' }) },
    ],
  };
  const outboundHost = { name: 'reviews', domains: ['reviews', 'reviews:9080'], routes: [{ name: 'reviews', match: { prefix: '/' }, route: reviewsRoute() }] };
  const doc = bootstrap('skua-demo-proxy', { address: listen, port: p.admin }, [
    httpListener('ingress', listen, p.ingress, [ingressHost]),
    httpListener('outbound', listen, p.outbound, [outboundHost]),
    tcpListener('tcp', listen, p.tcp, 'tcp-echo'),
  ], [
    cluster('productpage', ep('productpage', p.productpage), type),
    cluster('reviews-v1', ep('reviews-v1', p.reviewsV1), type),
    cluster('reviews-v2', ep('reviews-v2', p.reviewsV2), type),
    cluster('tcp-echo', ep('tcp-echo', p.tcpEcho), type),
  ]);
  return toYaml(doc);
}

function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(what);
}

function checks(p: BookinfoPorts): Check[] {
  return [
    { name: 'direct_response  GET /healthz', run: async () => {
      const r = await get(p.ingress, '/healthz');
      expect(r.status === 200 && r.body === 'ok\n', `got ${r.status} ${JSON.stringify(r.body)}`);
      return `${r.status} ${JSON.stringify(r.body)}`;
    } },
    { name: 'redirect         GET /', run: async () => {
      const r = await get(p.ingress, '/');
      expect(r.status === 302 && String(r.headers.location).endsWith('/productpage'), `got ${r.status} location=${r.headers.location}`);
      return `${r.status} location: ${r.headers.location}`;
    } },
    { name: 'header match     GET /reviews/1 x-canary: true', run: async () => {
      const r = await get(p.ingress, '/reviews/1', { 'x-canary': 'true' });
      expect(r.status === 200 && r.headers['x-reviews-version'] === 'v2', `got ${r.status} version=${r.headers['x-reviews-version']}`);
      return `${r.status} from reviews ${r.headers['x-reviews-version']}`;
    } },
    { name: 'request id       GET /reviews/1 (x-request-id)', run: async () => {
      const r = await get(p.ingress, '/reviews/1');
      const id = String(r.headers['x-request-id']);
      expect(r.status === 200 && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id), `got ${r.status}, upstream saw x-request-id ${JSON.stringify(id)} (want a UUID)`);
      return `upstream saw x-request-id ${id}`;
    } },
    { name: 'prefix_rewrite   GET /api/v1/reviews/7', run: async () => {
      const r = await get(p.ingress, '/api/v1/reviews/7');
      expect(r.status === 200 && (JSON.parse(r.body) as { id: string }).id === '7', `got ${r.status} ${r.body.slice(0, 80)}`);
      return `${r.status} ${r.body.slice(0, 28)}...`;
    } },
    { name: 'no route         GET /nope', run: async () => {
      const r = await get(p.ingress, '/nope');
      expect(r.status === 404, `got ${r.status}`);
      return `${r.status}`;
    } },
    { name: 'HTTP/2 (h2c)     GET /productpage', run: async () => {
      const r = await h2Get(p.ingress, '/productpage');
      expect(r.status === 200 && r.body.includes('Comedy of Errors'), `got ${r.status} ${r.body.slice(0, 80)}`);
      return `${r.status} via reviews ${r.headers['x-reviews-version']}, x-served-by: ${r.headers['x-served-by']}`;
    } },
    { name: 'tcp_proxy        echo round trip', run: async () => {
      const payload = `hello through skua ${Date.now()}\n`;
      const r = await tcpRoundTrip(p.tcp, payload);
      expect(r.echoed === payload, `sent ${JSON.stringify(payload)}, got back ${JSON.stringify(r.echoed)}`);
      return `${payload.length} bytes echoed in ${r.ms.toFixed(1)} ms`;
    } },
  ];
}

export function bookinfo(p: BookinfoPorts, opts: TopologyOptions): Topology {
  const app = (name: string, script: string, port: number, env: Record<string, string> = {}) =>
    ({ name, script: `demo/apps/${script}`, env: { PORT: String(port), LISTEN_ADDR: HOST, ...env }, ready: { port } });
  const bootstrapPath = `${opts.dir}/bootstrap.yaml`;
  const base = `http://${HOST}:${p.ingress}`;
  return {
    title: 'bookinfo: productpage → reviews v1/v2 behind skua-proxy (static Envoy bootstrap)',
    files: { 'bootstrap.yaml': bookinfoBootstrap(p) },
    processes: [
      app('reviews-v1', 'reviews.ts', p.reviewsV1, { SERVICE_VERSION: 'v1' }),
      app('reviews-v2', 'reviews.ts', p.reviewsV2, { SERVICE_VERSION: 'v2' }),
      app('productpage', 'productpage.ts', p.productpage, { REVIEWS_URL: `http://${HOST}:${p.outbound}`, REVIEWS_HOST: 'reviews:9080' }),
      app('tcp-echo', 'tcp-echo.ts', p.tcpEcho),
      {
        name: 'skua-proxy',
        script: 'packages/proxy/src/main.ts',
        args: ['-c', bootstrapPath, '-l', opts.logLevel, '--concurrency', String(opts.concurrency)],
        ready: { admin: p.admin },
        proxy: true,
      },
    ],
    checks: checks(p),
    load: [
      { label: 'GET /productpage', port: p.ingress, path: '/productpage', weight: 70, expect: 200 },
      { label: 'GET /reviews/1', port: p.ingress, path: '/reviews/1', weight: 20, expect: 200 },
      { label: 'GET /healthz', port: p.ingress, path: '/healthz', weight: 10, expect: 200 },
    ],
    split: { header: 'x-reviews-version', expect: { v1: 0.8, v2: 0.2 } },
    admins: [{ name: 'skua-proxy', port: p.admin }],
    stats: /^(http\.(ingress|outbound)\.downstream_rq_(total|[2-5]xx)|cluster\.[\w-]+\.(upstream_rq_[2-5]xx|upstream_cx_connect_fail)|tcp\.tcp\.downstream_cx_total)$/,
    urls: [
      `curl -i ${base}/productpage`,
      `curl -i ${base}/reviews/1            (80/20 split: see x-reviews-version)`,
      `curl -i -H 'x-canary: true' ${base}/reviews/1`,
      `curl -i ${base}/api/v1/reviews/7     (prefix_rewrite → /reviews/7)`,
      `curl -i ${base}/healthz`,
      `curl --http2-prior-knowledge ${base}/productpage`,
      `echo hello | curl -s --max-time 1 telnet://${HOST}:${p.tcp}   (tcp_proxy → tcp-echo)`,
      `admin: http://${HOST}:${p.admin}/  (/stats, /stats/prometheus, /clusters, /config_dump, /ready)`,
      `bootstrap: ${bootstrapPath}`,
    ],
  };
}
