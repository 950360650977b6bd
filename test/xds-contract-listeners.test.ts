// The xDS contract for listeners, over gRPC from a test ADS server (SotW and Delta) into a real
// skua-proxy with one and with two workers: a listener that cannot bind is NACKed before anything
// drains and the old one keeps serving (Envoy binds when it creates a listener: "cannot bind"); a
// second listener on an address in use is NACKed ("has duplicate address"), so with SO_REUSEPORT
// workers the traffic is never split between two listeners; removals apply before additions.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { startTestAds, type AdsStream, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { cleanup, freePort, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { TYPE_URL, activePort, eventually, listeningSockets, any, dynamicListener, errorDetails, httpListener, servedBy, servedBySet, staticCluster } from './lib/xds-resources.ts';

/** A plain socket holding a port, as another process would (no SO_REUSEPORT). */
function occupy(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer((c) => c.destroy());
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}


for (const delta of [false, true]) {
  for (const workers of [1, 2]) {
    describe(`xDS contract for listeners (${delta ? 'Delta' : 'SotW'}, --concurrency ${workers})`, () => {
      let ads: TestAds, proxy: RunningProxy, stream: AdsStream, a: Backend, port: number, other: number;

      /** Sends listeners (SotW: the whole set) and returns the NACK message, undefined for an ACK. */
      const sendListeners = async (jsons: readonly Json[], removed: string[] = []): Promise<string | undefined> => {
        const nonce = delta
          ? stream.sendDelta({ type_url: TYPE_URL.listener, resources: jsons.map((j) => ({ name: String(j.name), version: 'x', resource: any(j) })), removed_resources: removed })
          : stream.sendSotw({ type_url: TYPE_URL.listener, resources: jsons.map(any) });
        return (await stream.reply(nonce)).error_detail?.message;
      };
      const baseline = async (): Promise<void> => {
        assert.equal(await sendListeners([httpListener('http', port)], delta ? ['dup'] : []), undefined, 'baseline ACKed');
        await eventually('http serving on its port', async () => (await servedBy(port)) === 'http');
      };

      before(async () => {
        a = await startHttpBackend('a');
        port = await freePort();
        other = await freePort();
        ads = await startTestAds();
        ads.set(TYPE_URL.cluster, [staticCluster('backend', a.port)]);
        ads.set(TYPE_URL.listener, [httpListener('http', port)]);
        proxy = await startProxy(() => adsBootstrap(ads.port, delta), { args: ['--concurrency', String(workers)] });
        stream = await ads.stream();
      });
      after(() => cleanup(() => proxy?.stop(), () => ads?.close(), () => a?.close()));

      test('defect 3: a listener moved to a port in use is NACKed before the old one drains, and keeps serving', async () => {
        await baseline();
        await eventually('every worker listening', async () => (await listeningSockets(port)) === workers);
        const holder = await occupy(other);
        let error: string | undefined;
        try {
          error = await sendListeners([httpListener('http', other)]);
          assert.deepEqual([...await servedBySet(port, 20)], ['http'], 'the old listener serves every connection');
          assert.equal(await listeningSockets(port), workers, 'on every worker');
        } finally {
          await new Promise((r) => holder.close(r));
        }
        assert.equal(error, `http: cannot bind '127.0.0.1:${other}': Address already in use`);
        const entry = await dynamicListener(proxy, 'http');
        assert.equal(activePort(entry), port, 'config_dump: the old listener is the active one');
        assert.match(errorDetails(entry) ?? '', /^cannot bind '127\.0\.0\.1:\d+': Address already in use$/);
        // Once the port is free the same update is accepted: the listener moves, the old port closes.
        assert.equal(await sendListeners([httpListener('http', other)]), undefined);
        assert.equal(await servedBy(other), 'http');
        await eventually('the old port closed', async () => (await servedBy(port)) === 'ECONNREFUSED');
        await eventually('every worker listening on the new port', async () => (await listeningSockets(other)) === workers);
        assert.equal(errorDetails(await dynamicListener(proxy, 'http')), undefined, 'accepted: the error state clears');
      });

      test('defect 4: a second listener on an address in use is NACKed; no connection goes to it', async () => {
        await baseline();
        const error = await sendListeners(delta ? [httpListener('dup', port)] : [httpListener('http', port), httpListener('dup', port)]);
        assert.deepEqual([...await servedBySet(port, 30)], ['http'], 'every connection to the first listener');
        assert.equal(error, `dup: error adding listener: 'dup' has duplicate address '127.0.0.1:${port}' as existing listener 'http'`);
        const dup = await dynamicListener(proxy, 'dup');
        assert.equal(dup?.active_state, undefined);
        assert.equal(dup?.warming_state, undefined);
        assert.match(errorDetails(dup) ?? '', /has duplicate address/);
        assert.equal(await listeningSockets(port), workers, 'one socket per worker, not two');
      });

      test('removals apply before additions: a listener may take the address of one removed in the same update', async () => {
        await baseline();
        assert.equal(await sendListeners([httpListener('dup', port)], delta ? ['http'] : []), undefined);
        await eventually('the new listener serving the address', async () => {
          const seen = await servedBySet(port, 10);
          return seen.size === 1 && seen.has('dup');
        });
        assert.equal(await dynamicListener(proxy, 'http'), undefined);
      });
    });
  }
}
