// Istio's bookinfo traffic-management samples, end to end through skua-proxy with real backends.
// Each VirtualService (../shared/fixtures/istio-istio/samples/bookinfo/networking) is translated by
// hand into the RouteConfiguration istiod generates for a sidecar (test/lib/bookinfo.ts). One proxy
// carries one outbound listener per applied VirtualService set (each listener = the RDS "9080" a
// sidecar holds after that `kubectl apply`), so every scenario runs against the same process.
// Splits are checked statistically: counts over 2,000 requests must fall within ±4σ of the binomial
// expectation. The last suite chains sidecars: productpage's (inbound + outbound) and one per reviews pod.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, freePort, startProxy, validate, type RunningProxy } from './lib/proxy.ts';
import { parseAccessLog, request, type AccessLogLine } from './lib/client.ts';
import {
  binomialBounds, bookinfoServices, inboundCluster, inboundRouteConfig, outboundCluster, outboundRouteConfig,
  serviceDomains, sidecarListener, startApp, startProductpage, subsetCluster, tally, VS,
  type App, type TranslateOptions, type VirtualService,
} from './lib/bookinfo.ts';

const N = 2000;
/** fixedDelay of virtual-service-ratings-test-delay.yaml, shortened from 7s (same Duration shape). */
const DELAY = '0.6s';
const DELAY_MS = 600;

/**
 * istiod puts its default retry_policy on every sidecar route. Whether this build accepts it is
 * probed once: if it is refused, the routes are generated without it and the retry test is skipped
 * with the proxy's own error (which names the field).
 */
async function probeRetryPolicy(): Promise<{ accepted: true } | { accepted: false; reason: string }> {
  const rc = outboundRouteConfig([VS.allV1('reviews')], { retries: true });
  const r = await validate({ static_resources: { listeners: [sidecarListener('probe', 1, 'probe', rc)], clusters: [subsetCluster('reviews', 'v1', [1])] } });
  if (r.code === 0) return { accepted: true };
  const msg = (r.stderr || r.stdout).trim().split('\n').find((l) => /retry|host_selection|previous_hosts/.test(l)) ?? (r.stderr || r.stdout).trim();
  return { accepted: false, reason: `istiod's default route.retry_policy is refused at load: ${msg}` };
}

/** The VirtualService set applied for each outbound listener. */
const VARIANTS: Record<string, readonly VirtualService[]> = {
  'all-v1': bookinfoServices(),
  'reviews-50-v3': bookinfoServices(VS.reviews50v3),
  'reviews-80-20': bookinfoServices(VS.reviews80v1v2),
  'reviews-test-v2': bookinfoServices(VS.reviewsTestV2),
  'reviews-jason-v2-v3': bookinfoServices(VS.reviewsJasonV2V3),
  'ratings-test-delay': bookinfoServices(VS.ratingsTestDelay(DELAY)),
  'ratings-test-abort': bookinfoServices(VS.ratingsTestAbort),
  'details-abort-100': bookinfoServices(VS.detailsAbort(100)),
  'details-abort-30.5': bookinfoServices(VS.detailsAbort(30.5)),
  // details v2 has a dead endpoint next to a live one: only retries with previous_hosts save every request.
  'details-v2': bookinfoServices({ name: 'details', host: 'details', http: [{ route: [{ subset: 'v2' }] }] }),
};

const statPrefix = (variant: string): string => `outbound_0.0.0.0_9080_${variant}`;

describe('bookinfo through one skua sidecar (istiod-shaped outbound RDS 9080)', { timeout: 240_000 }, () => {
  const apps: Record<string, App> = {};
  let proxy: RunningProxy;
  let retry: Awaited<ReturnType<typeof probeRetryPolicy>>;
  let deadPort = 0;

  before(async () => {
    for (const name of ['productpage-v1', 'reviews-v1', 'reviews-v2', 'reviews-v3', 'ratings-v1', 'details-v1', 'details-v2']) apps[name] = await startApp(name);
    deadPort = await freePort(); // nothing listens there: connect refused
    retry = await probeRetryPolicy();
    const opts: TranslateOptions = { retries: retry.accepted };
    const names = Object.keys(VARIANTS);
    proxy = await startProxy((p) => ({
      static_resources: {
        listeners: names.map((v) => sidecarListener(`0.0.0.0_9080_${v}`, p(v), statPrefix(v), outboundRouteConfig(VARIANTS[v], opts))),
        clusters: [
          subsetCluster('productpage', 'v1', [apps['productpage-v1'].port]),
          ...['v1', 'v2', 'v3'].map((s) => subsetCluster('reviews', s, [apps[`reviews-${s}`].port])),
          subsetCluster('ratings', 'v1', [apps['ratings-v1'].port]),
          subsetCluster('details', 'v1', [apps['details-v1'].port]),
          subsetCluster('details', 'v2', [deadPort, apps['details-v2'].port]),
        ],
      },
    }), { ports: names });
  });
  after(() => cleanup(() => proxy?.stop(), ...Object.values(apps).map((a) => () => a.close())));

  const url = (variant: string, path = '/'): string => `http://127.0.0.1:${proxy.ports[variant]}${path}`;

  async function logFor(p: RunningProxy, id: string): Promise<AccessLogLine> {
    const raw = await p.waitForStdout(new RegExp(`"${id}"`));
    const line = parseAccessLog(raw);
    assert.ok(line, `not Envoy's default access log format: ${raw}`);
    return line;
  }

  function assertSplit(t: Awaited<ReturnType<typeof tally>>, expect: Record<string, number>): string {
    assert.deepEqual([...t.statuses], [[200, N]], `every request answered 200: ${JSON.stringify([...t.statuses])}`);
    assert.deepEqual([...t.bodies.keys()].sort(), Object.keys(expect).sort(), `only the weighted subsets answer: ${JSON.stringify([...t.bodies])}`);
    const report: string[] = [];
    for (const [body, p] of Object.entries(expect)) {
      const got = t.bodies.get(body) ?? 0;
      const { lo, hi, sigma } = binomialBounds(N, p);
      report.push(`${body} ${got}/${N} (expected ${N * p} ± ${(4 * sigma).toFixed(0)})`);
      assert.ok(got >= lo && got <= hi, `${body}: ${got} of ${N} outside [${lo}, ${hi}] (n·p ± 4σ, σ = ${sigma.toFixed(1)})`);
    }
    return report.join(', ');
  }

  test('virtual-service-reviews-50-v3: v1/v3 50/50 within ±4σ over 2,000 requests', async (t) => {
    const r = await tally(url('reviews-50-v3', '/reviews/0'), N, { headers: { host: 'reviews:9080' } });
    t.diagnostic(`${assertSplit(r, { 'reviews-v1': 0.5, 'reviews-v3': 0.5 })} in ${r.ms.toFixed(0)} ms`);
  });

  test('virtual-service-reviews-80-20: v1/v2 80/20 within ±4σ over 2,000 requests', async (t) => {
    const r = await tally(url('reviews-80-20', '/reviews/0'), N, { headers: { host: 'reviews.default.svc.cluster.local:9080' } });
    t.diagnostic(`${assertSplit(r, { 'reviews-v1': 0.8, 'reviews-v2': 0.2 })} in ${r.ms.toFixed(0)} ms`);
  });

  test('every istiod domain form reaches its service; an unknown host gets block_all 502', async () => {
    for (const host of serviceDomains('reviews')) {
      const r = await request(url('all-v1', '/reviews/0'), { headers: { host } });
      assert.equal(r.status, 200, `Host: ${host}`);
      assert.equal(r.text, 'reviews-v1', `Host: ${host}`);
    }
    for (const svc of ['productpage', 'ratings', 'details']) {
      const r = await request(url('all-v1'), { headers: { host: `${svc}:9080` } });
      assert.equal(r.text, `${svc}-v1`);
    }
    const r = await request(url('all-v1'), { headers: { host: 'httpbin.org' } });
    assert.equal(r.status, 502);
    assert.equal(r.body.length, 0);
  });

  test('virtual-service-reviews-test-v2: end-user jason → v2, everyone else → v1', async () => {
    const u = url('reviews-test-v2', '/reviews/0');
    const jason = await tally(u, 300, { headers: { host: 'reviews:9080', 'end-user': 'jason' } });
    assert.deepEqual([...jason.bodies], [['reviews-v2', 300]]);
    const anon = await tally(u, 300, { headers: { host: 'reviews:9080' } });
    assert.deepEqual([...anon.bodies], [['reviews-v1', 300]]);
    // Header names are case-insensitive; string_match.exact on the value is not; no prefix matching.
    const cases: Array<[Record<string, string>, string]> = [
      [{ 'End-User': 'jason' }, 'reviews-v2'],
      [{ 'end-user': 'Jason' }, 'reviews-v1'],
      [{ 'end-user': 'jason2' }, 'reviews-v1'],
      [{ 'end-user': '' }, 'reviews-v1'],
      [{ 'x-end-user': 'jason' }, 'reviews-v1'],
    ];
    for (const [h, want] of cases) {
      const r = await request(u, { headers: { host: 'reviews', ...h } });
      assert.equal(r.text, want, JSON.stringify(h));
    }
  });

  test('virtual-service-reviews-jason-v2-v3: end-user jason → v2, everyone else → v3', async () => {
    const u = url('reviews-jason-v2-v3', '/reviews/0');
    assert.deepEqual([...(await tally(u, 200, { headers: { host: 'reviews:9080', 'end-user': 'jason' } })).bodies], [['reviews-v2', 200]]);
    assert.deepEqual([...(await tally(u, 200, { headers: { host: 'reviews:9080', 'end-user': 'kate' } })).bodies], [['reviews-v3', 200]]);
  });

  test(`virtual-service-ratings-test-delay: jason's requests to ratings are delayed ${DELAY} (flag DI), others are not`, async (t) => {
    const u = url('ratings-test-delay', '/ratings/0');
    const timed = async (headers: Record<string, string>): Promise<{ ms: number; status: number; text: string }> => {
      const t0 = performance.now();
      const r = await request(u, { headers: { host: 'ratings:9080', ...headers }, timeoutMs: 10_000 });
      return { ms: performance.now() - t0, status: r.status, text: r.text };
    };
    await timed({}); // connection and JIT warm-up
    const others = await Promise.all(Array.from({ length: 6 }, (_, i) => timed({ 'x-request-id': `bi-delay-other-${i}` })));
    const t0 = performance.now();
    const jason = await Promise.all(Array.from({ length: 6 }, (_, i) => timed({ 'end-user': 'jason', 'x-request-id': `bi-delay-jason-${i}` })));
    const wall = performance.now() - t0;
    t.diagnostic(`jason: ${jason.map((j) => j.ms.toFixed(0)).join(', ')} ms (6 concurrent, wall ${wall.toFixed(0)} ms); others: ${others.map((o) => o.ms.toFixed(0)).join(', ')} ms`);
    for (const j of jason) {
      assert.equal(j.status, 200);
      assert.equal(j.text, 'ratings-v1');
      assert.ok(j.ms >= DELAY_MS - 2 && j.ms < DELAY_MS + 1500, `jason's request took ${j.ms.toFixed(0)} ms, expected ≈ ${DELAY_MS}`);
    }
    assert.ok(wall < 2 * DELAY_MS, `concurrent delays run in parallel (wall ${wall.toFixed(0)} ms)`);
    for (const o of others) {
      assert.equal(o.text, 'ratings-v1');
      assert.ok(o.ms < DELAY_MS / 2, `an undelayed request took ${o.ms.toFixed(0)} ms`);
    }
    const l = await logFor(proxy, 'bi-delay-jason-0');
    assert.equal(l.status, 200);
    assert.equal(l.flags, 'DI');
    assert.ok(l.duration >= DELAY_MS - 2, `access log duration ${l.duration} ms`);
    assert.equal(l.upstreamHost, `127.0.0.1:${apps['ratings-v1'].port}`);
    assert.equal((await logFor(proxy, 'bi-delay-other-0')).flags, '-');
    assert.equal(await proxy.stat(`http.${statPrefix('ratings-test-delay')}.fault.delays_injected`), 6);
  });

  test('virtual-service-ratings-test-abort: jason gets HTTP 500 "fault filter abort" (flag FI) and ratings never sees it', async () => {
    const u = url('ratings-test-abort', '/ratings/0');
    const seenBefore = apps['ratings-v1'].seen.length;
    const jason = await tally(u, 50, { headers: { host: 'ratings:9080', 'end-user': 'jason' } });
    assert.deepEqual([...jason.statuses], [[500, 50]]);
    assert.deepEqual([...jason.bodies], [['fault filter abort', 50]]);
    assert.equal(apps['ratings-v1'].seen.length, seenBefore, 'aborted requests never reach the upstream');
    const one = await request(u, { headers: { host: 'ratings:9080', 'end-user': 'jason', 'x-request-id': 'bi-abort-jason' } });
    assert.equal(one.status, 500);
    assert.equal(one.headers['content-type'], 'text/plain');
    const l = await logFor(proxy, 'bi-abort-jason');
    assert.equal(l.status, 500);
    assert.equal(l.flags, 'FI');
    assert.equal(l.upstreamHost, '-');
    assert.equal(l.bytesSent, 'fault filter abort'.length);
    const anon = await tally(u, 50, { headers: { host: 'ratings:9080', 'end-user': 'kate' } });
    assert.deepEqual([...anon.statuses], [[200, 50]]);
    assert.deepEqual([...anon.bodies], [['ratings-v1', 50]]);
    assert.equal(await proxy.stat(`http.${statPrefix('ratings-test-abort')}.fault.aborts_injected`), 51);
  });

  test('fault-injection-details-v1: abort 555 at 100% for everyone', async () => {
    const r = await tally(url('details-abort-100', '/details/0'), 100, { headers: { host: 'details:9080' } });
    assert.deepEqual([...r.statuses], [[555, 100]]);
    assert.deepEqual([...r.bodies], [['fault filter abort', 100]]);
  });

  test('abort percentage 30.5 (numerator 305000 / MILLION) within ±4σ over 2,000 requests', async (t) => {
    const r = await tally(url('details-abort-30.5', '/details/0'), N, { headers: { host: 'details:9080' } });
    const aborted = r.statuses.get(555) ?? 0;
    assert.equal(aborted + (r.statuses.get(200) ?? 0), N, JSON.stringify([...r.statuses]));
    const { lo, hi, sigma } = binomialBounds(N, 0.305);
    t.diagnostic(`aborted ${aborted}/${N} (expected ${N * 0.305} ± ${(4 * sigma).toFixed(0)})`);
    assert.ok(aborted >= lo && aborted <= hi, `${aborted} aborts outside [${lo}, ${hi}]`);
  });

  test('include_request_attempt_count: the upstream sees x-envoy-attempt-count: 1', async () => {
    const before = apps['details-v1'].seen.length;
    await request(url('all-v1', '/details/0'), { headers: { host: 'details:9080' } });
    const seen = apps['details-v1'].seen.slice(before);
    assert.equal(seen.length, 1);
    assert.equal(seen[0].headers['x-envoy-attempt-count'], '1');
  });

  test("istiod's default retry_policy: connect-failure retried on another host (previous_hosts), no request lost", async (t) => {
    assert.ok(retry.accepted, `istiod's retry_policy must load: ${retry.accepted ? '' : retry.reason}`);
    const name = outboundCluster('details', 'v2');
    const r = await tally(url('details-v2', '/details/0'), 200, { headers: { host: 'details:9080' } });
    const retries = await proxy.stat(`cluster.${name}.upstream_rq_retry`);
    const connectFails = await proxy.stat(`cluster.${name}.upstream_cx_connect_fail`);
    t.diagnostic(`statuses ${JSON.stringify([...r.statuses])}; upstream_rq_retry ${retries}; upstream_cx_connect_fail ${connectFails}`);
    assert.deepEqual([...r.statuses], [[200, 200]]);
    assert.deepEqual([...r.bodies], [['details-v2', 200]]);
    assert.ok((retries ?? 0) > 0, 'some first attempts hit the dead endpoint and were retried');
    assert.equal(retries, connectFails, 'one retry per refused connect: the retry never picks the dead host again');
  });
});

describe('bookinfo mesh chain: client → productpage sidecar (inbound) → productpage → sidecar (outbound) → reviews pod sidecar (inbound) → reviews', { timeout: 120_000 }, () => {
  const apps: Record<string, App> = {};
  const reviewsSidecars: Record<string, RunningProxy> = {};
  let productpageSidecar: RunningProxy;
  let outboundPort = 0;
  let retries = false;

  /** A reviews pod's sidecar: istiod's inbound listener for port 9080 → `inbound|9080||` → the app. */
  const podSidecar = (app: App): Promise<RunningProxy> => startProxy((p) => ({
    static_resources: {
      listeners: [sidecarListener('virtualInbound', p('inbound'), 'inbound_0.0.0.0_9080', inboundRouteConfig('reviews'))],
      clusters: [inboundCluster(app.port)],
    },
  }), { ports: ['inbound'] });

  before(async () => {
    retries = (await probeRetryPolicy()).accepted;
    for (const name of ['reviews-v1', 'reviews-v2']) apps[name] = await startApp(name);
    apps['productpage-v1'] = await startProductpage(() => outboundPort);
    const [v1, v2] = await Promise.all([podSidecar(apps['reviews-v1']), podSidecar(apps['reviews-v2'])]);
    reviewsSidecars.v1 = v1; reviewsSidecars.v2 = v2;
    // productpage's sidecar: inbound to the app, outbound RDS 9080 with virtual-service-reviews-test-v2.
    // The subset clusters' endpoints are the reviews pods, i.e. their sidecars' inbound listeners.
    productpageSidecar = await startProxy((p) => ({
      static_resources: {
        listeners: [
          sidecarListener('virtualInbound', p('inbound'), 'inbound_0.0.0.0_9080', inboundRouteConfig('productpage')),
          sidecarListener('0.0.0.0_9080', p('outbound'), 'outbound_0.0.0.0_9080', outboundRouteConfig(bookinfoServices(VS.reviewsTestV2), { retries })),
        ],
        clusters: [
          inboundCluster(apps['productpage-v1'].port),
          subsetCluster('reviews', 'v1', [v1.ports.inbound]),
          subsetCluster('reviews', 'v2', [v2.ports.inbound]),
          // reviews v3, ratings, details and productpage's own outbound clusters are not needed here:
          // validate_clusters: false lets the route config name them anyway, as istiod's does.
        ],
      },
    }), { ports: ['inbound', 'outbound'] });
    outboundPort = productpageSidecar.ports.outbound;
  });
  after(() => cleanup(
    () => productpageSidecar?.stop(), ...Object.values(reviewsSidecars).map((p) => () => p.stop()),
    ...Object.values(apps).map((a) => () => a.close()),
  ));

  const productpage = (headers: Record<string, string>) => request(`http://127.0.0.1:${productpageSidecar.ports.inbound}/productpage`,
    { headers: { host: `productpage:9080`, ...headers } });

  async function logFor(p: RunningProxy, re: RegExp): Promise<AccessLogLine> {
    const raw = await p.waitForStdout(re);
    const line = parseAccessLog(raw);
    assert.ok(line, `not Envoy's default access log format: ${raw}`);
    return line;
  }

  test('jason reaches reviews-v2 and others reviews-v1 across two sidecar hops; request id and end-user propagate', async () => {
    const j = await productpage({ 'end-user': 'jason', 'x-request-id': 'bi-chain-jason' });
    assert.equal(j.status, 200);
    assert.equal(j.text, 'productpage-v1 -> 200 reviews-v2');
    const a = await productpage({ 'x-request-id': 'bi-chain-anon' });
    assert.equal(a.text, 'productpage-v1 -> 200 reviews-v1');

    const atReviews = apps['reviews-v2'].seen.find((s) => s.headers['x-request-id'] === 'bi-chain-jason');
    assert.ok(atReviews, 'reviews-v2 saw the request id the client sent to productpage');
    assert.equal(atReviews.headers['end-user'], 'jason');
    assert.equal(atReviews.url, '/reviews/0');
    assert.equal(apps['reviews-v1'].seen.some((s) => s.headers['x-request-id'] === 'bi-chain-jason'), false);

    // productpage's sidecar logs the request twice (inbound, then outbound); reviews-v2's sidecar once.
    const inbound = await logFor(productpageSidecar, /"GET \/productpage HTTP\/1\.1" .*"bi-chain-jason"/);
    assert.equal(inbound.upstreamHost, `127.0.0.1:${apps['productpage-v1'].port}`);
    assert.equal(inbound.authority, 'productpage:9080');
    const outbound = await logFor(productpageSidecar, /"GET \/reviews\/0 HTTP\/1\.1" .*"bi-chain-jason"/);
    assert.equal(outbound.authority, 'reviews:9080');
    assert.equal(outbound.upstreamHost, `127.0.0.1:${reviewsSidecars.v2.ports.inbound}`);
    const hop2 = await logFor(reviewsSidecars.v2, /"bi-chain-jason"/);
    assert.equal(hop2.status, 200);
    assert.equal(hop2.upstreamHost, `127.0.0.1:${apps['reviews-v2'].port}`);
    assert.equal(hop2.authority, 'reviews:9080');
  });

  test('200 requests through the chain: every jason request lands on v2, every other on v1', async () => {
    const u = `http://127.0.0.1:${productpageSidecar.ports.inbound}/productpage`;
    const j = await tally(u, 100, { headers: { host: 'productpage:9080', 'end-user': 'jason' }, concurrency: 8 });
    assert.deepEqual([...j.bodies], [['productpage-v1 -> 200 reviews-v2', 100]]);
    const a = await tally(u, 100, { headers: { host: 'productpage:9080' }, concurrency: 8 });
    assert.deepEqual([...a.bodies], [['productpage-v1 -> 200 reviews-v1', 100]]);
    const served = (await reviewsSidecars.v2.stat('cluster.inbound|9080||.upstream_rq_2xx')) ?? 0;
    assert.ok(served >= 100, `reviews-v2's sidecar served ${served} requests to its app`);
  });

  test('a subset with no cluster in this sidecar answers 503 NC (validate_clusters: false)', async () => {
    const r = await request(`http://127.0.0.1:${outboundPort}/ratings/0`, { headers: { host: 'ratings:9080', 'x-request-id': 'bi-chain-nc' } });
    assert.equal(r.status, 503);
    const l = await logFor(productpageSidecar, /"bi-chain-nc"/);
    assert.equal(l.flags, 'NC');
  });
});
