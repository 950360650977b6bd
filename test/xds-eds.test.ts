// EDS that forgets, driven over gRPC from the SotW/Delta test ADS server into a real skua-proxy
// (one worker and --concurrency 2), with traffic before and after and config_dump checked:
// (a) a removed cluster's ClusterLoadAssignment is released (config_dump?include_eds and the
//     per-thread skua.eds.assignments gauge), and one for a cluster nobody has is not stored;
// (b) a removed-then-re-added EDS cluster warms again and goes active only on a fresh assignment:
//     traffic reaches the new endpoints, never the stale ones;
// (c) a live EDS cluster updated by CDS serves the assignment it had at once (the config layer keeps
//     the assignment's bytes and compiles its endpoints again for the new cluster).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestAds, type AdsStream, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { cleanup, freePort, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { TYPE_URL, any, cla, dumpEntries, edsCluster } from './lib/xds-resources.ts';
import { eventually, prefixListener } from './lib/eds-helpers.ts';

for (const [delta, workers] of [[false, 1], [true, 1], [false, 2], [true, 2]] as const) {
  describe(`EDS forgets (${delta ? 'Delta' : 'SotW'}, ${workers} worker${workers > 1 ? 's' : ''})`, () => {
    let ads: TestAds, stream: AdsStream, proxy: RunningProxy, a: Backend, b: Backend, c: Backend, port: number;

    /** Status and backend of `n` requests to /<cluster>, each on a new connection (spread over the threads). */
    const hits = async (cluster: string, n = 4 * workers): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        const r = await request(`http://127.0.0.1:${port}/${cluster}`);
        out.push(r.status === 200 ? (JSON.parse(r.text) as { backend: string }).backend : String(r.status));
      }
      return out;
    };
    const assignments = async (): Promise<string[]> => {
      const dump = JSON.parse((await proxy.admin('/config_dump?include_eds')).body) as { configs: Json[] };
      const eds = dump.configs.find((x) => String(x['@type']).endsWith('EndpointsConfigDump'))!;
      return ((eds.dynamic_endpoint_configs ?? []) as Json[]).map((e) => String((e.endpoint_config as Json).cluster_name)).sort();
    };
    const warming = async (): Promise<string[]> => (await dumpEntries(proxy, 'dynamic_warming_clusters')).map((e) => String((e.cluster as Json).name));
    /** CDS keeps only c1: SotW sends the full state, Delta names c2 in removed_resources. */
    const removeC2 = (): void => {
      ads.set(TYPE_URL.cluster, [edsCluster('c1')]);
      if (delta) stream.sendDelta({ type_url: TYPE_URL.cluster, resources: [], removed_resources: ['c2'] });
    };
    const start = async (): Promise<void> => {
      ads.release(TYPE_URL.endpoint);
      ads.set(TYPE_URL.endpoint, [cla('c1', [a.port]), cla('c2', [b.port])]);
      ads.set(TYPE_URL.cluster, [edsCluster('c1'), edsCluster('c2')]);
      await eventually('c1 → a, c2 → b', async () => (await hits('c1')).every((x) => x === 'a') && (await hits('c2')).every((x) => x === 'b'));
    };

    before(async () => {
      [a, b, c] = await Promise.all([startHttpBackend('a'), startHttpBackend('b'), startHttpBackend('c')]);
      port = await freePort();
      ads = await startTestAds();
      ads.set(TYPE_URL.cluster, [edsCluster('c1'), edsCluster('c2')]);
      ads.set(TYPE_URL.endpoint, [cla('c1', [a.port]), cla('c2', [b.port])]);
      ads.set(TYPE_URL.listener, [prefixListener(port, { '/c1': 'c1', '/c2': 'c2' })]);
      proxy = await startProxy(() => adsBootstrap(ads.port, delta), { args: ['--concurrency', String(workers)] });
      stream = await ads.stream();
    });
    after(() => cleanup(() => proxy?.stop(), () => ads?.close(), () => a?.close(), () => b?.close(), () => c?.close()));

    test('(a) a removed cluster takes its assignment along; one for a cluster nobody has is not stored', async () => {
      await start();
      assert.deepEqual(await assignments(), ['c1', 'c2']);
      removeC2();
      await eventually('c2 gone: 503', async () => (await hits('c2')).every((x) => x === '503'));
      assert.deepEqual(await assignments(), ['c1'], 'config_dump?include_eds lists c1 only');
      await eventually('c2 assignment released on every thread', async () => (await proxy.stat('skua.eds.assignments')) === 1 * workers);
      assert.doesNotMatch((await proxy.admin('/clusters')).body, /^c2::/m, '/clusters has no host of c2');
      assert.doesNotMatch((await proxy.admin('/stats')).body, /^cluster\.c2\./m, "c2's stats went with it (as in Envoy)");
      assert.match((await proxy.admin('/stats')).body, /^cluster\.c1\.upstream_rq_total: \d+$/m);
      // An assignment for c2 now (SotW: nobody asks for it; Delta: pushed anyway) changes nothing.
      const nonce = delta
        ? stream.sendDelta({ type_url: TYPE_URL.endpoint, resources: [{ name: 'c2', version: 'late', resource: any(cla('c2', [b.port])) }] })
        : stream.sendSotw({ type_url: TYPE_URL.endpoint, resources: [any(cla('c1', [a.port])), any(cla('c2', [b.port]))] });
      assert.equal((await stream.reply(nonce)).error_detail?.message || undefined, undefined, 'ACKed');
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(await assignments(), ['c1']);
      assert.equal(await proxy.stat('skua.eds.assignments'), 1 * workers);
      assert.deepEqual(await hits('c1'), Array(4 * workers).fill('a'), 'c1 keeps serving');
      assert.deepEqual(await hits('c2'), Array(4 * workers).fill('503'));
    });

    test('(b) a re-added cluster warms again and goes active only on a fresh assignment', async () => {
      await start();
      removeC2();
      await eventually('c2 gone: 503', async () => (await hits('c2')).every((x) => x === '503'));
      const staleHits = b.requests.length;
      // The control plane's next assignment for c2 points at c; it is held back until the cluster is re-added.
      ads.hold(TYPE_URL.endpoint);
      ads.set(TYPE_URL.endpoint, [cla('c1', [a.port]), cla('c2', [c.port])]);
      ads.set(TYPE_URL.cluster, [edsCluster('c1'), edsCluster('c2')]);
      await eventually('c2 warming', async () => (await warming()).includes('c2'));
      await eventually('the proxy asks for c2 again', async () => stream.names.get(TYPE_URL.endpoint)?.names.has('c2') === true);
      assert.deepEqual(await hits('c2'), Array(4 * workers).fill('503'), 'a warming cluster takes no traffic');
      assert.equal(b.requests.length, staleHits, 'the stale endpoints got nothing');
      assert.ok(!(await assignments()).includes('c2'), 'no assignment for c2 while it warms');
      ads.release(TYPE_URL.endpoint);
      await eventually('c2 → c', async () => (await hits('c2')).every((x) => x === 'c'));
      assert.deepEqual(await warming(), []);
      assert.deepEqual(await assignments(), ['c1', 'c2']);
      assert.equal(b.requests.length, staleHits, 'never the stale endpoints');
      assert.deepEqual(await hits('c1'), Array(4 * workers).fill('a'));
    });

    test('(c) a live cluster updated by CDS takes the assignment it had: no warming, no new EDS push needed', async () => {
      await start();
      ads.hold(TYPE_URL.endpoint);
      const connectTimeout = async (): Promise<unknown> =>
        ((await dumpEntries(proxy, 'dynamic_active_clusters')).find((e) => (e.cluster as Json).name === 'c1')?.cluster as Json | undefined)?.connect_timeout;
      assert.equal(await connectTimeout(), '1s');
      ads.set(TYPE_URL.cluster, [{ ...edsCluster('c1'), connect_timeout: '2s' }, edsCluster('c2')]);
      await eventually('c1 updated', async () => (await connectTimeout()) === '2s');
      assert.deepEqual(await warming(), [], 'the update did not warm again');
      assert.deepEqual(await hits('c1'), Array(4 * workers).fill('a'), 'the updated cluster serves the endpoints it had');
      ads.release(TYPE_URL.endpoint);
    });
  });
}
