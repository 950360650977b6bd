// A mesh from a mesh file, end to end: skua-controlplane translates a compact description (two
// services, reviews with v1 and v2, details over TCP) into istiod-shaped config; two skua-proxy
// sidecars (sleep's, the client, over Delta ADS; reviews-v1's over SotW) take it by ADS with
// their workloads' node ids. Requests from sleep through its outbound listener reach the right
// backends per the routes (header match, weights, fault), reviews-v1 is reached through its
// sidecar's inbound listener over Istio mTLS (mtls STRICT: certificates from the local CA through
// each sidecar's secret manager, SDS `default`/`ROOTCA`), plain reviews-v2 in plaintext, and a
// weight change in the mesh file takes effect live. No traffic capture (capture none): listeners
// bind loopback addresses of their own.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startControlPlane, adsBootstrap, type RunningControlPlane } from './lib/controlplane.ts';
import { cleanup, freePort, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, startTcpEcho, type Backend } from './lib/backends.ts';
import { openSocket, readUntil, request, sleep } from './lib/client.ts';
import { startLocalCa, workload, type LocalCa, type Workload } from './lib/mesh.ts';
import { DeltaClient } from '../packages/controlplane/test/lib/delta-client.ts';

const SLEEP = { ip: '127.0.0.11', out: '127.0.1.11' };
const REVIEWS_V1 = { ip: '127.0.0.21', out: '127.0.1.21' };

function node(id: string, name: string, app: string, version: string): Json {
  return {
    id, cluster: `${app}.default`,
    metadata: { NAME: name, NAMESPACE: 'default', WORKLOAD_NAME: name, CLUSTER_ID: 'Kubernetes', MESH_ID: 'cluster.local', LABELS: { app, version } },
  };
}

function sidecarBootstrap(cpPort: number, delta: boolean, id: string, name: string, app: string, version: string): Json {
  const b = adsBootstrap(cpPort, delta, id);
  b.node = node(id, name, app, version);
  return b;
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('mesh file → sidecars (skua-controlplane --mesh, two skua-proxy sidecars)', () => {
  let cp: RunningControlPlane, sleepProxy: RunningProxy, reviewsProxy: RunningProxy;
  let v1: Backend, v2: Backend, details: Backend;
  let ca: LocalCa, wlSleep: Workload, wlReviews: Workload;
  let reviewsPort: number, detailsPort: number;

  const mesh = (weights: { v1: number; v2: number }): Json => ({
    mesh: { mtls: 'STRICT', capture: 'none' },
    services: [
      { name: 'reviews', vip: '10.96.0.21', ports: [{ port: reviewsPort, protocol: 'http' }], subsets: { v1: { version: 'v1' }, v2: { version: 'v2' } } },
      { name: 'details', vip: '10.96.0.31', ports: [{ port: detailsPort, protocol: 'tcp' }] },
    ],
    workloads: [
      { name: 'sleep', service_account: 'sleep', ip: SLEEP.ip, outbound_ip: SLEEP.out, labels: { app: 'sleep' } },
      { name: 'reviews-v1', service_account: 'bookinfo-reviews', ip: REVIEWS_V1.ip, outbound_ip: REVIEWS_V1.out, labels: { app: 'reviews', version: 'v1' }, services: ['reviews'], app: { [reviewsPort]: `127.0.0.1:${v1.port}` } },
      { name: 'reviews-v2', service_account: 'bookinfo-reviews', ip: '127.0.0.22', sidecar: false, labels: { app: 'reviews', version: 'v2' }, services: ['reviews'], app: { [reviewsPort]: `127.0.0.1:${v2.port}` } },
      { name: 'details-v1', ip: '127.0.0.31', sidecar: false, labels: { app: 'details', version: 'v1' }, services: ['details'], app: { [detailsPort]: `127.0.0.1:${details.port}` } },
    ],
    routes: [{
      host: 'reviews',
      http: [
        { name: 'canary', match: [{ headers: { 'x-canary': { exact: 'true' } } }], route: [{ subset: 'v2' }] },
        { name: 'pin-v1', match: [{ headers: { 'x-version': { exact: 'v1' } } }], route: [{ subset: 'v1' }] },
        { name: 'teapot', match: [{ headers: { 'x-fault': { exact: 'abort' } } }], route: [{ subset: 'v1' }], fault: { abort: { http_status: 418, percent: 100 } } },
        { name: 'split', route: [{ subset: 'v1', weight: weights.v1 }, { subset: 'v2', weight: weights.v2 }], retries: { attempts: 2, retry_on: 'connect-failure' }, timeout: '5s' },
      ],
    }],
  });

  const call = (headers: Record<string, string> = {}): ReturnType<typeof request> =>
    request(`http://${SLEEP.out}:${reviewsPort}/reviews/1`, { headers: { host: `reviews:${reviewsPort}`, ...headers } });

  before(async () => {
    [v1, v2, details] = await Promise.all([startHttpBackend('reviews-v1'), startHttpBackend('reviews-v2'), startTcpEcho()]);
    reviewsPort = await freePort();
    detailsPort = await freePort();
    ca = await startLocalCa();
    wlSleep = workload(ca, 'default', 'sleep');
    wlReviews = workload(ca, 'default', 'bookinfo-reviews');
    cp = await startControlPlane({}, { mesh: mesh({ v1: 50, v2: 50 }) });
    sleepProxy = await startProxy(() => sidecarBootstrap(cp.port, true, `sidecar~${SLEEP.ip}~sleep.default~default.svc.cluster.local`, 'sleep', 'sleep', 'latest'),
      { env: wlSleep.env, cwd: wlSleep.dir });
    reviewsProxy = await startProxy(() => sidecarBootstrap(cp.port, false, `sidecar~${REVIEWS_V1.ip}~reviews-v1.default~default.svc.cluster.local`, 'reviews-v1', 'reviews', 'v1'),
      { env: wlReviews.env, cwd: wlReviews.dir });
    await eventually('both sidecars serving', async () => (await call({ 'x-fault': 'abort' })).status === 418 && (await call({ 'x-version': 'v1' })).status === 200);
  });
  after(() => cleanup(() => sleepProxy?.stop(), () => reviewsProxy?.stop(), () => cp?.stop(), () => ca?.close(), () => wlSleep?.remove(), () => wlReviews?.remove(),
    () => v1?.close(), () => v2?.close(), () => details?.close()));

  test('the sidecars hold istiod-named config: 0.0.0.0_<port> + RDS <port>, outbound|<port>|<subset>|<host>, inbound|<port>||', async () => {
    const dump = JSON.parse((await sleepProxy.admin('/config_dump')).body) as { configs: Json[] };
    const text = JSON.stringify(dump);
    for (const name of [`"0.0.0.0_${reviewsPort}"`, `"10.96.0.31_${detailsPort}"`, `"outbound|${reviewsPort}|v1|reviews.default.svc.cluster.local"`,
      `"outbound|${reviewsPort}|v2|reviews.default.svc.cluster.local"`, `"reviews.default.svc.cluster.local:${reviewsPort}"`]) {
      assert.ok(text.includes(name), `sleep's sidecar has ${name}`);
    }
    assert.ok(!text.includes(`inbound|${reviewsPort}||`), 'sleep backs no service: no inbound cluster');
    const rv = JSON.stringify(JSON.parse((await reviewsProxy.admin('/config_dump')).body));
    assert.ok(rv.includes(`"inbound|${reviewsPort}||"`) && rv.includes(`"virtualInbound_${REVIEWS_V1.ip}_${reviewsPort}"`));
    assert.equal(await sleepProxy.stat('control_plane.connected_state'), 1);
    assert.equal(await reviewsProxy.stat('control_plane.connected_state'), 1);
  });

  test('STRICT mTLS: sleep → reviews-v1 sidecar carries sleep\'s SPIFFE id; plaintext to the inbound port is refused', async () => {
    const r = await call({ 'x-version': 'v1' });
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-backend'], 'reviews-v1');
    // The inbound HCM (forward_client_cert_details APPEND_FORWARD) tells the app who called.
    assert.match(String(v1.requests.at(-1)?.headers['x-forwarded-client-cert']), /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep/);
    assert.ok(((await sleepProxy.stat(`cluster.outbound|${reviewsPort}|v1|reviews.default.svc.cluster.local.ssl.handshake`)) ?? 0) >= 1);
    await assert.rejects(request(`http://${REVIEWS_V1.ip}:${reviewsPort}/plain`, { timeoutMs: 3000 }));
    // Plain reviews-v2 (no sidecar, no tlsMode label) is reached in plaintext.
    assert.equal((await call({ 'x-canary': 'true' })).headers['x-backend'], 'reviews-v2');
  });

  test('header match: x-canary: true always reaches reviews-v2', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await call({ 'x-canary': 'true' });
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-backend'], 'reviews-v2');
    }
  });

  test('fault: the teapot rule aborts at the client sidecar with the configured status', async () => {
    const before = v1.requests.length;
    const r = await call({ 'x-fault': 'abort' });
    assert.equal(r.status, 418);
    assert.equal(r.text, 'fault filter abort');
    assert.equal(v1.requests.length, before);
  });

  test('weights 50/50 reach both versions; v1 through its own sidecar\'s inbound listener', async () => {
    const seen = { 'reviews-v1': 0, 'reviews-v2': 0 } as Record<string, number>;
    const inboundBefore = (await reviewsProxy.stat(`cluster.inbound|${reviewsPort}||.upstream_rq_total`)) ?? 0;
    const v1Cluster = `cluster.outbound|${reviewsPort}|v1|reviews.default.svc.cluster.local.upstream_rq_200`;
    const outboundBefore = (await sleepProxy.stat(v1Cluster)) ?? 0;
    for (let i = 0; i < 100; i++) {
      const r = await call();
      assert.equal(r.status, 200);
      seen[String(r.headers['x-backend'])]++;
    }
    assert.ok(seen['reviews-v1'] >= 20 && seen['reviews-v2'] >= 20, JSON.stringify(seen));
    assert.equal(await reviewsProxy.stat(`cluster.inbound|${reviewsPort}||.upstream_rq_total`), inboundBefore + seen['reviews-v1']);
    assert.equal(await sleepProxy.stat(v1Cluster), outboundBefore + seen['reviews-v1']);
    // The v1 backend saw the hop through both sidecars (the inbound HCM adds its request id).
    assert.ok(v1.requests.at(-1)?.headers['x-request-id']);
  });

  test('TCP service: the <vip>_<port> listener relays to details', async () => {
    const s = await openSocket(detailsPort, SLEEP.out);
    s.write('ping-details');
    const got = await readUntil(s, (b) => b.toString().includes('ping-details'));
    s.destroy();
    assert.equal(got.toString(), 'ping-details');
  });

  test('a ztunnel subscribing over Delta gets the same mesh as WDS', async () => {
    const z = new DeltaClient(cp.port, { id: 'ztunnel~127.0.0.5~ztunnel-x.istio-system~istio-system.svc.cluster.local', metadata: { NAMESPACE: 'istio-system' } });
    try {
      z.subscribe('type.googleapis.com/istio.workload.Address', []);
      z.subscribe('type.googleapis.com/istio.security.Authorization', []);
      await z.waitFor(() => z.names('type.googleapis.com/istio.workload.Address').length === 6, 'services and workloads');
      assert.deepEqual(z.names('type.googleapis.com/istio.workload.Address'), [
        'Kubernetes//Pod/default/details-v1', 'Kubernetes//Pod/default/reviews-v1', 'Kubernetes//Pod/default/reviews-v2', 'Kubernetes//Pod/default/sleep',
        'default/details.default.svc.cluster.local', 'default/reviews.default.svc.cluster.local',
      ]);
      const w = z.get('type.googleapis.com/istio.workload.Address', 'Kubernetes//Pod/default/reviews-v1')!.workload as Json;
      assert.deepEqual(w.services, { 'default/reviews.default.svc.cluster.local': { ports: [{ service_port: reviewsPort, target_port: reviewsPort }] } });
      assert.equal(w.service_account, 'bookinfo-reviews');
      // Envoy's types are not pushed to a WDS-only subscriber.
      assert.ok(z.responses.every((r) => r.type_url.startsWith('type.googleapis.com/istio.')));
    } finally {
      z.close();
    }
  });

  test('a mesh-file edit (weights 0/100) takes effect live', async () => {
    // The control plane applies an edit after a 100 ms debounce: wait for it first, or ten v2 answers in a
    // row under the old 50/50 split (1 in 1,024) pass the check below before the edit is even read (seen in CI).
    const logged = cp.log().length;
    cp.writeMesh(mesh({ v1: 0, v2: 100 }));
    await eventually('the edit applied', async () => /config: mesh .* applied/.test(cp.log().slice(logged)));
    await eventually('all traffic on v2', async () => {
      for (let i = 0; i < 10; i++) if ((await call()).headers['x-backend'] !== 'reviews-v2') return false;
      return true;
    });
    for (let i = 0; i < 30; i++) assert.equal((await call()).headers['x-backend'], 'reviews-v2');
  });

  test('a broken mesh file is reported and the last good config keeps serving', async () => {
    const bad = mesh({ v1: 100, v2: 0 });
    ((bad.routes as Json[])[0].http as Json[])[3].route = [{ subset: 'v9' }];
    cp.writeMesh(bad);
    await eventually('the problem reported', async () => /routes\[0\]\.http\[3\]\.route\[0\]\.subset: unknown subset "v9" of reviews/.test(cp.log()));
    assert.equal((await call()).headers['x-backend'], 'reviews-v2');
  });
});
