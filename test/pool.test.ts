// Upstream HTTP/1.1 pool: keep-alive reuse, and idle connections closed after the cluster's idle_timeout.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

describe('upstream HTTP/1.1 pool', { timeout: 30_000 }, () => {
  let backend: Backend, proxy: RunningProxy, base: string;

  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([routeTo('backend')])], { statPrefix: 'pool' }))]),
    ], [cluster('backend', [backend.port], { extra: {
      typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        common_http_protocol_options: { idle_timeout: '0.3s' }, explicit_http_config: { http_protocol_options: {} },
      } },
    } })]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });

  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('sequential requests reuse one upstream connection; it is closed once idle for idle_timeout', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await request(`${base}/x${i}`)).status, 200);
    assert.equal(await proxy.stat('cluster.backend.upstream_cx_total'), 1);
    assert.equal(await proxy.stat('cluster.backend.upstream_cx_active'), 1);
    await sleep(1500);
    assert.equal(await proxy.stat('cluster.backend.upstream_cx_active'), 0);
    assert.equal((await request(`${base}/again`)).status, 200);
    assert.equal(await proxy.stat('cluster.backend.upstream_cx_total'), 2);
  });
});
