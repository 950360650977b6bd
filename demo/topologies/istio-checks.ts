/**
 * The istio demo's steps: Istio's bookinfo samples (from the fixtures, unedited except for the
 * namespace a `kubectl apply -n` would give) are applied to the running mesh one after another, as
 * in Istio's tasks, and each documented effect is measured through the real proxies.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { applyText, deleteText } from '../../packages/controlplane/src/istio/apply.ts';
import { getFrom, type Reply } from '../lib/net.ts';
import { eventually as poll, expect, stats as adminStats } from '../lib/checks.ts';
import type { Check } from '../lib/topology.ts';
import { APP_PORT, HTTPBIN_PORT, outboundIp, podIp, SERVICE_PORT, type Addressing, type DemoWorkload } from './istio-platform.ts';

export interface IstioDemo {
  readonly istioDir: string;
  readonly addressing: Addressing;
  readonly admins: Readonly<Record<string, { readonly host: string; readonly port: number }>>;
  readonly gateway: { readonly host: string; readonly port: number };
  find(key: string): DemoWorkload;
}

const ROOT = path.resolve(import.meta.dirname, '../..');
export const FIXTURES = process.env.SKUA_FIXTURES ?? path.resolve(ROOT, '../shared/fixtures');
const BOOKINFO = 'istio-istio/samples/bookinfo';

function sample(rel: string): string {
  const file = path.join(FIXTURES, rel);
  if (!existsSync(file)) throw new Error(`${file} is missing: the istio demo applies Istio's samples from the fixtures (set SKUA_FIXTURES to their directory)`);
  return readFileSync(file, 'utf8');
}

const eventually = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> => poll(what, probe, timeoutMs, 150);
const stats = (admin: { host: string; port: number }): Promise<Map<string, number>> => adminStats(admin.port, admin.host);

export function istioChecks(d: IstioDemo): Check[] {
  const apply = (rel: string, namespace?: string, edit: (t: string) => string = (t) => t): string => applyText(d.istioDir, edit(sample(rel)), namespace).map((r) => r.id).join(', ');
  const remove = (rel: string, namespace?: string): void => { deleteText(d.istioDir, sample(rel), namespace); };
  const page = (user?: string, timeoutMs = 15_000): Promise<Reply> => getFrom(d.gateway.host, d.gateway.port, '/productpage', user ? { cookie: `user=${user}` } : {}, timeoutMs);
  const versions = async (n: number, user?: string, parallel = 8): Promise<Record<string, number>> => {
    const seen: Record<string, number> = {};
    let left = n;
    await Promise.all(Array.from({ length: parallel }, async () => {
      while (left-- > 0) {
        const r = await page(user);
        expect(r.status === 200, `GET /productpage: ${r.status} ${r.body.slice(0, 160)}`);
        const v = String(r.headers['x-reviews-version']);
        seen[v] = (seen[v] ?? 0) + 1;
      }
    }));
    return seen;
  };
  const only = (seen: Record<string, number>, v: string): boolean => Object.keys(seen).length === 1 && seen[v] !== undefined;
  const show = (seen: Record<string, number>): string => Object.entries(seen).sort().map(([k, n]) => `${k} ${n}`).join(' / ');
  // httpbin in namespace foo, called as the sleep app (or productpage's app) would: through its own sidecar.
  const httpbin = (from: string, method: 'GET' | 'POST'): Promise<number> => new Promise((resolve, reject) => {
    import('node:http').then(({ request }) => {
      const req = request({ host: outboundIp(d.addressing, d.find(from)), port: HTTPBIN_PORT, method, path: '/anything', headers: { host: `httpbin.foo:${HTTPBIN_PORT}` }, agent: false, timeout: 5000 }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', reject);
      req.end(method === 'POST' ? 'x'.repeat(64) : undefined);
    }, reject);
  });
  const status = async (from: string, method: 'GET' | 'POST', want: number): Promise<true | undefined> => ((await httpbin(from, method)) === want ? true : undefined);
  const reviewsV1 = d.find('reviews-v1');

  return [
    { name: 'ADS: 8 sidecars and the ingress gateway connected', run: async () => {
      const t0 = performance.now();
      for (const [key, admin] of Object.entries(d.admins)) {
        await eventually(`${key}'s proxy to take its config`, async () => {
          const s = await stats(admin);
          // A pilot-agent proxy (the gateway) publishes only Istio's stats inclusion list: no control_plane.* there.
          const state = s.get('control_plane.connected_state');
          const connected = state === undefined ? (s.get('listener_manager.lds.update_success') ?? 0) >= 1 : state === 1;
          return connected && (s.get('cluster_manager.cds.update_success') ?? 0) >= 1 ? true : undefined;
        });
      }
      // The first call also waits for certificates (SDS from the control plane's CA) on every hop.
      const r = await eventually('productpage → details, reviews through the sidecars', async () => {
        const pp = d.find('productpage');
        const x = await getFrom(podIp(d.addressing, pp), APP_PORT, '/productpage', {}, 8000);
        return x.status === 200 && !x.body.includes('Sorry') ? x : undefined;
      }, 30_000);
      return `serving in ${Math.round(performance.now() - t0)} ms; no routing rules yet: reviews ${r.headers['x-reviews-version']}`;
    } },
    { name: 'bookinfo-gateway.yaml: the ingress gateway (skua-proxy router) serves productpage', run: async () => {
      apply(`${BOOKINFO}/networking/bookinfo-gateway.yaml`);
      const r = await eventually('GET /productpage through the gateway', async () => { const x = await page(); return x.status === 200 ? x : undefined; });
      const stat = await getFrom(d.gateway.host, d.gateway.port, '/static/app.css', {}, 5000);
      const other = await getFrom(d.gateway.host, d.gateway.port, '/other', {}, 5000);
      expect(stat.body.includes('productpage: no route') && other.status === 404 && !other.body.includes('productpage'), `/static: ${stat.status} ${stat.body.slice(0, 60)}; /other: ${other.status}`);
      return `${d.gateway.host}:${d.gateway.port}/productpage ${r.status}; /static/* routed to productpage (${stat.status}); /other ${other.status} from the gateway`;
    } },
    { name: 'destination-rule-all.yaml + virtual-service-all-v1.yaml: all reviews from v1', run: async () => {
      apply(`${BOOKINFO}/networking/destination-rule-all.yaml`);
      apply(`${BOOKINFO}/networking/virtual-service-all-v1.yaml`);
      await eventually('reviews pinned to v1', async () => (only(await versions(16), 'v1') ? true : undefined));
      const seen = await versions(100);
      expect(only(seen, 'v1'), show(seen));
      return `100 of 100 from reviews v1`;
    } },
    { name: 'virtual-service-reviews-jason-v2-v3.yaml: jason → v2, everyone else → v3', run: async () => {
      apply(`${BOOKINFO}/networking/virtual-service-reviews-jason-v2-v3.yaml`);
      await eventually('jason on v2', async () => (only(await versions(8, 'jason'), 'v2') ? true : undefined));
      const jason = await versions(30, 'jason'), others = await versions(30);
      expect(only(jason, 'v2') && only(others, 'v3'), `jason ${show(jason)}; others ${show(others)}`);
      return `jason: 30 of 30 from v2; anonymous: 30 of 30 from v3`;
    } },
    { name: 'virtual-service-ratings-test-delay.yaml: 7 s ratings delay for jason, reviews time out', run: async () => {
      apply(`${BOOKINFO}/networking/virtual-service-ratings-test-delay.yaml`);
      const probe = async (): Promise<{ ms: number; r: Reply }> => { const t = performance.now(); const r = await page('jason', 20_000); return { ms: performance.now() - t, r }; };
      const slow = await eventually('the delay for jason', async () => { const x = await probe(); return x.ms > 5000 ? x : undefined; }, 40_000);
      const t = performance.now();
      const fast = await page();
      const fastMs = performance.now() - t;
      expect(slow.r.body.includes('Sorry, product reviews are currently unavailable'), `jason got: ${slow.r.body.slice(0, 200)}`);
      expect(fastMs < 2000 && fast.body.includes('★'), `anonymous: ${Math.round(fastMs)} ms ${fast.body.slice(0, 120)}`);
      return `jason: page after ${(slow.ms / 1000).toFixed(1)} s (productpage's 2 × 3 s), "reviews are currently unavailable"; anonymous: ${Math.round(fastMs)} ms with stars`;
    } },
    { name: 'virtual-service-ratings-test-abort.yaml: ratings answers 500 to jason', run: async () => {
      apply(`${BOOKINFO}/networking/virtual-service-ratings-test-abort.yaml`);
      const r = await eventually('the abort for jason', async () => {
        const x = await page('jason');
        if (x.body.includes('Ratings service is currently unavailable')) return x;
        throw new Error(`jason's page: ${x.status} reviews ${x.headers['x-reviews-version']} ${x.body.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').slice(0, 160)}`);
      }, 40_000);
      const anon = await page();
      expect(r.status === 200 && anon.body.includes('★') && !anon.body.includes('unavailable'), `anonymous: ${anon.body.slice(0, 160)}`);
      return `jason: reviews ${r.headers['x-reviews-version']} shows "Ratings service is currently unavailable"; anonymous: stars`;
    } },
    { name: 'fault-injection-details-v1.yaml: details aborts every request with 555', run: async () => {
      apply(`${BOOKINFO}/networking/fault-injection-details-v1.yaml`);
      const r = await eventually('the details abort', async () => { const x = await page(); return x.body.includes('Sorry, product details are currently unavailable') ? x : undefined; });
      expect(r.status === 200 && r.body.includes('(555)'), r.body.slice(0, 200));
      // Back to the state before: the sample's DestinationRule replaced destination-rule-all's for details.
      remove(`${BOOKINFO}/networking/fault-injection-details-v1.yaml`);
      apply(`${BOOKINFO}/networking/destination-rule-all.yaml`);
      await eventually('details back', async () => { const x = await page(); return x.body.includes('by William Shakespeare') ? x : undefined; });
      return 'the page keeps working: "Sorry, product details are currently unavailable for this book. (555)"; removed again';
    } },
    { name: 'egress-rule-google-apis.yaml: port 80 calls leave as TLS to www.googleapis.com:443', run: async () => {
      apply(`${BOOKINFO}/networking/egress-rule-google-apis.yaml`);
      const pp = d.admins.productpage;
      const cluster = await eventually('the egress cluster in productpage\'s sidecar', async () => {
        const dump = JSON.parse((await getFrom(pp.host, pp.port, '/config_dump', {}, 5000)).body) as { configs: Array<Record<string, unknown>> };
        const clusters = dump.configs.flatMap((c) => (c.dynamic_active_clusters ?? []) as Array<{ cluster: Record<string, unknown> }>).map((c) => c.cluster);
        const routes = dump.configs.flatMap((c) => (c.dynamic_route_configs ?? []) as Array<{ route_config: Record<string, unknown> }>).map((r) => r.route_config);
        const c = clusters.find((x) => x.name === 'outbound|443||www.googleapis.com');
        const vh = (routes.find((r) => r.name === '80')?.virtual_hosts as Array<Record<string, unknown>> | undefined)?.find((v) => v.name === 'www.googleapis.com:80');
        const target = ((vh?.routes as Array<{ route?: { cluster?: string } }> | undefined)?.[0]?.route?.cluster);
        return c && target === 'outbound|443||www.googleapis.com' ? c : undefined;
      });
      const tls = (cluster.transport_socket as { typed_config?: { sni?: string } } | undefined)?.typed_config;
      expect(cluster.type === 'STRICT_DNS' && tls?.sni === 'www.googleapis.com', JSON.stringify(cluster).slice(0, 300));
      remove(`${BOOKINFO}/networking/egress-rule-google-apis.yaml`);
      return 'route www.googleapis.com:80 → outbound|443||www.googleapis.com (STRICT_DNS, TLS originated with SNI www.googleapis.com); measured in the config only: no internet here';
    } },
    { name: 'virtual-service-reviews-50-v3.yaml: reviews 50/50 v1/v3 (1,000 requests)', run: async () => {
      apply(`${BOOKINFO}/networking/virtual-service-reviews-50-v3.yaml`);
      await eventually('v1 and v3 both', async () => { const s = await versions(24); return s.v1 && s.v3 && !s.v2 ? true : undefined; });
      const seen = await versions(1000, undefined, 16);
      const v3 = (seen.v3 ?? 0) / 1000, sigma = Math.sqrt(0.25 / 1000);
      expect(Math.abs(v3 - 0.5) <= 4 * sigma && (seen.v1 ?? 0) + (seen.v3 ?? 0) === 1000, `${show(seen)} (4σ = ±${(4 * sigma * 1000).toFixed(0)})`);
      return `${show(seen)}; v3 ${(v3 * 100).toFixed(1)}%, |Δ| ${((Math.abs(v3 - 0.5)) / sigma).toFixed(1)}σ`;
    } },
    { name: 'gateway-api/route-reviews-90-10.yaml: an HTTPRoute on Service reviews splits 90/10 (400 requests)', run: async () => {
      remove(`${BOOKINFO}/networking/virtual-service-reviews-50-v3.yaml`);
      apply(`${BOOKINFO}/gateway-api/route-reviews-90-10.yaml`);
      await eventually('v1 and v2 only', async () => { const s = await versions(40); return s.v1 && !s.v3 ? true : undefined; });
      const seen = await versions(400, undefined, 16);
      const v1 = (seen.v1 ?? 0) / 400, sigma = Math.sqrt(0.09 / 400);
      expect(Math.abs(v1 - 0.9) <= 4 * sigma && !seen.v3, show(seen));
      remove(`${BOOKINFO}/gateway-api/route-reviews-90-10.yaml`);
      apply(`${BOOKINFO}/networking/virtual-service-reviews-50-v3.yaml`);
      await eventually('back to v1/v3', async () => { const s = await versions(24); return s.v3 && !s.v2 ? true : undefined; });
      return `${show(seen)}; v1 ${(v1 * 100).toFixed(1)}%, |Δ| ${(Math.abs(v1 - 0.9) / sigma).toFixed(1)}σ (then back to virtual-service-reviews-50-v3.yaml)`;
    } },
    { name: 'authn.yaml (PERMISSIVE): plaintext from outside the mesh accepted', run: async () => {
      apply('istio-istio/tests/testdata/config/authn.yaml');
      const r = await getFrom(podIp(d.addressing, reviewsV1), SERVICE_PORT, '/reviews/0', { host: 'reviews:9080' }, 3000);
      expect(r.status === 200, `plaintext to reviews-v1: ${r.status}`);
      return `plaintext GET to reviews-v1 ${podIp(d.addressing, reviewsV1)}:${SERVICE_PORT}: ${r.status}`;
    } },
    { name: 'destination-rule-all-mtls.yaml + peer-authn-strict.yaml: mTLS everywhere, plaintext refused', run: async () => {
      apply(`${BOOKINFO}/networking/destination-rule-all-mtls.yaml`);
      // The fixture is written for namespace testns; Bookinfo runs in default.
      apply('istio-istio/tests/testdata/config/peer-authn-strict.yaml', undefined, (t) => t.replace('namespace: testns', 'namespace: default'));
      const refused = await eventually('plaintext refused', async () => {
        const x = await getFrom(podIp(d.addressing, reviewsV1), SERVICE_PORT, '/reviews/0', { host: 'reviews:9080' }, 3000).then((y) => `answered ${y.status}`, (e: Error & { code?: string }) => e.code ?? e.message);
        return x.startsWith('answered') ? undefined : x;
      });
      const peer = await eventually('reviews v1 sees productpage\'s identity', async () => {
        const x = await getFrom(outboundIp(d.addressing, d.find('productpage')), SERVICE_PORT, '/reviews/0', { host: 'reviews:9080' }, 3000);
        const body = JSON.parse(x.body) as { version: string; peer?: string };
        return body.version === 'v1' && body.peer ? /URI=([^;,]+)/.exec(body.peer)?.[1] : undefined;
      });
      const r = await page();
      expect(r.status === 200 && peer === 'spiffe://cluster.local/ns/default/sa/bookinfo-productpage', `page ${r.status}, peer ${peer}`);
      return `plaintext: ${refused}; reviews sees ${peer}; the page still ${r.status}`;
    } },
    { name: 'deny-both-http-tcp-in.yaml (DENY in foo): httpbin refuses GET, allows POST', run: async () => {
      await eventually('sleep → httpbin before any policy', () => status('sleep', 'GET', 200));
      apply('istio-istio/pilot/pkg/security/authz/builder/testdata/tcp/deny-both-http-tcp-in.yaml');
      await eventually('GET denied', () => status('sleep', 'GET', 403));
      const post = await httpbin('sleep', 'POST');
      expect(post === 200, `POST ${post}`);
      return 'sleep → httpbin: GET 403 (RBAC: access denied), POST 200';
    } },
    { name: 'authz-valid.yaml (ALLOW, applied in foo): service account sa allowed, productpage denied', run: async () => {
      apply('istio-api/tests/testdata/authz-valid.yaml', 'foo');
      await eventually('productpage denied', () => status('productpage', 'POST', 403));
      const fromSleep = await httpbin('sleep', 'POST'), fromSleepGet = await httpbin('sleep', 'GET');
      expect(fromSleep === 200 && fromSleepGet === 403, `sleep POST ${fromSleep}, GET ${fromSleepGet}`);
      const s = await stats(d.admins.httpbin);
      const denied = [...s].filter(([k]) => k.endsWith('rbac.denied')).reduce((a, [, v]) => a + v, 0);
      return `sleep (foo/sa) POST 200, GET 403 (the DENY policy); productpage (default/bookinfo-productpage) POST 403; httpbin rbac denied ${denied}`;
    } },
  ];
}
