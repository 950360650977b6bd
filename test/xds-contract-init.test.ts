// initial_fetch_timeout per subscription, as Envoy times it (issue 16 defect 6), over gRPC from a
// test ADS server that holds back answers: CDS is timed from the start of ADS, LDS from when it is
// asked for, each RDS / EDS name from when a listener / cluster waits for it. /ready does not go
// LIVE while a listener's routes are still coming; a route or endpoints that never come end their
// own wait (the listener serves 404, the cluster has no endpoints) and apply when they arrive.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestAds, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { cleanup, freePort, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';
import { TYPE_URL, cla, edsCluster, eventually, listeningSockets, httpListener, routeConfig, servedBy, staticCluster } from './lib/xds-resources.ts';

function bootstrap(adsPort: number, delta: boolean, ldsCdsTimeout: string): Json {
  const b = adsBootstrap(adsPort, delta);
  const dr = b.dynamic_resources as Json;
  (dr.lds_config as Json).initial_fetch_timeout = ldsCdsTimeout;
  (dr.cds_config as Json).initial_fetch_timeout = ldsCdsTimeout;
  return b;
}

async function readyState(adminPort: number): Promise<string> {
  const r = await request(`http://127.0.0.1:${adminPort}/ready`);
  return `${r.status} ${r.text.trim()}`;
}


for (const delta of [false, true]) {
  const mode = delta ? 'Delta' : 'SotW';
  describe(`initial_fetch_timeout per subscription (${mode})`, () => {
    let ads: TestAds | undefined, proxy: RunningProxy | undefined, a: Backend | undefined;
    /** A proxy still starting when a test failed: stopped once it is up (startProxy stops it if it never is). */
    let starting: Promise<RunningProxy> | undefined;
    after(() => cleanup(() => starting?.then((p) => p.stop(), () => undefined), () => proxy?.stop(), () => ads?.close(), () => a?.close()));

    test('/ready waits for routes that come after the LDS/CDS timeout has passed', async () => {
      a = await startHttpBackend('a');
      const port = await freePort();
      ads = await startTestAds();
      ads.set(TYPE_URL.cluster, [staticCluster('backend', a.port)]);
      ads.set(TYPE_URL.listener, [httpListener('http', port, { rds: 'r1' })]);
      ads.set(TYPE_URL.route, [routeConfig('r1', 'backend')]);
      ads.hold(TYPE_URL.listener);
      ads.hold(TYPE_URL.route);
      let adminPort = 0;
      starting = startProxy((ports) => { adminPort = ports('admin'); return bootstrap(ads!.port, delta, '6s'); }, { readyTimeoutMs: 20_000 });
      const stream = await ads.stream();
      await ads.waitFor(() => stream.subscribed.has(TYPE_URL.listener), 'LDS asked for');
      const ldsAsked = Date.now();
      await sleep(300);
      ads.release(TYPE_URL.listener);
      await ads.waitFor(() => stream.subscribed.has(TYPE_URL.route), 'RDS asked for');
      // Past 6 s since ADS started, but LDS answered in time and RDS has its own (15 s) timer. (The
      // margins are wide: a loaded machine may take seconds to apply a response.)
      await sleep(ldsAsked + 6500 - Date.now());
      assert.equal(await readyState(adminPort), '503 INITIALIZING', 'not LIVE while the routes are still coming');
      assert.equal(await servedBy(port), 'ECONNREFUSED', 'the warming listener is not bound');
      ads.release(TYPE_URL.route);
      proxy = await starting;
      starting = undefined;
      const r = await request(`http://127.0.0.1:${port}/first`);
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-route'], 'r1');
      assert.equal(await proxy.stat('listener_manager.lds.init_fetch_timeout'), undefined, 'LDS came in time');
    });

    test('a route that never comes: its own timeout lets the listener serve 404 NR; the route applies when it arrives', async () => {
      await cleanup(() => proxy?.stop(), () => ads?.close());
      proxy = undefined;
      const port = await freePort();
      ads = await startTestAds();
      ads.set(TYPE_URL.cluster, [staticCluster('backend', a!.port)]);
      ads.set(TYPE_URL.listener, [httpListener('http', port, { rds: 'r2', rdsFetchTimeout: '1s' })]);
      ads.set(TYPE_URL.route, [routeConfig('r2', 'backend')]);
      ads.hold(TYPE_URL.route);
      // LDS/CDS wait forever (Istio's 0s): only the route's own timer can end the wait.
      const workers = delta ? 1 : 2;
      proxy = await startProxy(() => bootstrap(ads!.port, delta, '0s'), { readyTimeoutMs: 15_000, args: ['--concurrency', String(workers)] });
      const r = await request(`http://127.0.0.1:${port}/nr`);
      assert.equal(r.status, 404, 'no route yet: 404 NR');
      assert.equal(await proxy.stat('http.http.rds.r2.init_fetch_timeout'), 1);
      if (workers === 2) {
        await eventually('every worker listening', async () => (await listeningSockets(port)) === 2);
      }
      ads.release(TYPE_URL.route);
      await eventually('the route applied', async () => (await request(`http://127.0.0.1:${port}/r`)).headers['x-route'] === 'r2');
    });

    test('endpoints that never come: the EDS cluster goes active after its own timeout, without endpoints', async () => {
      await cleanup(() => proxy?.stop(), () => ads?.close());
      proxy = undefined;
      const port = await freePort();
      ads = await startTestAds();
      const cluster = edsCluster('eds-backend');
      ((cluster.eds_cluster_config as Json).eds_config as Json).initial_fetch_timeout = '1s';
      ads.set(TYPE_URL.cluster, [cluster]);
      ads.set(TYPE_URL.endpoint, [cla('eds-backend', [a!.port])]);
      ads.set(TYPE_URL.listener, [httpListener('http', port, { cluster: 'eds-backend' })]);
      ads.hold(TYPE_URL.endpoint);
      proxy = await startProxy(() => bootstrap(ads!.port, delta, '0s'), { readyTimeoutMs: 15_000 });
      assert.equal((await request(`http://127.0.0.1:${port}/none`)).status, 503, 'no endpoints yet');
      ads.release(TYPE_URL.endpoint);
      await eventually('the endpoints applied', async () => (await request(`http://127.0.0.1:${port}/eds`)).status === 200);
    });
  });
}
