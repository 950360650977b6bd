// (c) Work per ClusterLoadAssignment does not depend on the number of clusters. An in-process
// skua-proxy (ProxyServer: its real ADS client over gRPC to the SotW/Delta test ADS server, a real
// listener and admin) counts, for one assignment, the clusters it is delivered to and every walk
// over all clusters; both must be the same with 1 and with 2,001 clusters. Traffic goes through the
// proxy before and after, and config_dump is checked. SKUA_TEST_PROXY_MAIN points it at another build.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startTestAds, type AdsStream, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { freePort, proxyMain, type Json } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { TYPE_URL, any, cla, edsCluster } from './lib/xds-resources.ts';
import { eventually, prefixListener } from './lib/eds-helpers.ts';
import type { ProxyServer } from '../packages/proxy/src/server.ts';

const MORE = 2000;
const src = path.dirname(proxyMain);
const load = async <M>(file: string): Promise<M> => import(pathToFileURL(path.join(src, file)).href) as Promise<M>;

for (const delta of [false, true]) {
  describe(`EDS work per assignment (${delta ? 'Delta' : 'SotW'}, in-process proxy)`, () => {
    let ads: TestAds, stream: AdsStream, server: ProxyServer, a: Backend, b: Backend, port: number, adminPort: number;
    let walks = 0;

    const backendOf = async (p: string): Promise<string> => {
      const r = await request(`http://127.0.0.1:${port}${p}`);
      return r.status === 200 ? (JSON.parse(r.text) as { backend: string }).backend : String(r.status);
    };
    const dump = async (query: string): Promise<Json[]> => {
      const res = await fetch(`http://127.0.0.1:${adminPort}/config_dump?${query}`);
      return (await res.json() as { configs: Json[] }).configs;
    };
    /** One assignment for c0 alone, pointing at `to`: the clusters it reached and the walks over all clusters. */
    const oneAssignment = async (to: Backend): Promise<{ walks: number; deliveries: number }> => {
      const eds = (server.dynamic as unknown as { eds?: { deliveries: number } }).eds;
      const w0 = walks, d0 = eds?.deliveries ?? NaN;
      const nonce = delta
        ? stream.sendDelta({ type_url: TYPE_URL.endpoint, resources: [{ name: 'c0', version: `to-${to.name}`, resource: any(cla('c0', [to.port])) }] })
        : stream.sendSotw({ type_url: TYPE_URL.endpoint, version_info: `to-${to.name}`, resources: [any(cla('c0', [to.port]))] });
      assert.equal((await stream.reply(nonce)).error_detail?.message || undefined, undefined, 'ACKed');
      await eventually(`c0 → ${to.name}`, async () => (await backendOf('/c0')) === to.name, 20_000);
      return { walks: walks - w0, deliveries: (eds?.deliveries ?? NaN) - d0 };
    };

    before(async () => {
      [a, b] = await Promise.all([startHttpBackend('a'), startHttpBackend('b')]);
      port = await freePort();
      adminPort = await freePort();
      ads = await startTestAds();
      ads.set(TYPE_URL.cluster, [edsCluster('c0')]);
      ads.set(TYPE_URL.endpoint, [cla('c0', [a.port])]);
      ads.set(TYPE_URL.listener, [prefixListener(port, { '/c0': 'c0', '/last': `c${MORE}` })]);
      const { compileBootstrap } = await load<typeof import('../packages/proxy/src/config/bootstrap.ts')>('config/bootstrap.ts');
      const { ProxyServer: Server } = await load<typeof import('../packages/proxy/src/server.ts')>('server.ts');
      const { setLogLevel } = await load<typeof import('../packages/proxy/src/core/log.ts')>('core/log.ts');
      setLogLevel('error');
      const bootstrap = { ...adsBootstrap(ads.port, delta), admin: { address: { socket_address: { address: '127.0.0.1', port_value: adminPort } } } };
      server = new Server(compileBootstrap(bootstrap), { concurrency: 1, drainTimeS: 0, drainStrategy: 'immediate', configPath: '', configYaml: '', logLevel: 'error', reusePort: false, admin: true });
      // Every walk over all clusters is counted.
      const all = server.clusters.all.bind(server.clusters);
      server.clusters.all = function* () { for (const c of all()) { walks++; yield c; } };
      await server.start();
      stream = await ads.stream();
    });
    after(() => {
      // (An older build has no close(): stop what it started by hand.)
      if (typeof server?.close === 'function') server.close();
      else { server?.ads?.stop(); server?.listeners.closeAll(); server?.clusters.closeAll(); }
      ads?.close();
      return Promise.all([a?.close(), b?.close()]);
    });

    test('(c) one assignment touches its cluster only, with 1 cluster and with 2,001', async () => {
      await eventually('c0 → a', async () => (await backendOf('/c0')) === 'a', 20_000);
      const small = await oneAssignment(b);
      ads.set(TYPE_URL.endpoint, [cla('c0', [b.port]), ...Array.from({ length: MORE }, (_, i) => cla(`c${i + 1}`, [a.port]))]);
      ads.set(TYPE_URL.cluster, Array.from({ length: MORE + 1 }, (_, i) => edsCluster(`c${i}`)));
      await eventually('the last cluster serves', async () => (await backendOf('/last')) === 'a', 60_000);
      assert.equal((await dump('resource=dynamic_active_clusters')).length, MORE + 1);
      const large = await oneAssignment(a);
      assert.equal(large.walks, small.walks, `walks over all clusters per assignment: ${small.walks} with 1 cluster, ${large.walks} with ${MORE + 1}`);
      assert.equal(large.deliveries, small.deliveries, 'clusters an assignment reaches');
      assert.deepEqual(small, { walks: 0, deliveries: 1 });
      const eds = await dump('include_eds&resource=dynamic_endpoint_configs');
      assert.equal(eds.length, MORE + 1);
      const c0 = eds.find((e) => (e.endpoint_config as Json).cluster_name === 'c0')!;
      assert.match(JSON.stringify(c0), new RegExp(`"port_value":${a.port}`), "c0's assignment is the last one pushed");
      assert.equal(await backendOf('/last'), 'a');
    });
  });
}
