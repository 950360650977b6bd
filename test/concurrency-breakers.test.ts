// --concurrency 2: circuit breakers count across both worker threads, as Envoy's ResourceManager does
// (one per cluster, whatever worker a request is on). With max_requests 2 and a slow backend, a burst
// of requests on separate connections — which the kernel spreads over both workers (SO_REUSEPORT) —
// admits exactly two; per-worker counts would admit two per worker.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

const MAX_REQUESTS = 2;
const BURST = 12;
/** HIGH priority: no request counts against it; its gauges must show the limit once, not once per thread. */
const HIGH_MAX_REQUESTS = 7;

describe('--concurrency 2: shared circuit breakers', { timeout: 60_000 }, () => {
  let backend: Backend, proxy: RunningProxy, base: string;
  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([routeTo('slow')], ['cb.test'])], { statPrefix: 'cb' }))])],
      [{ ...cluster('slow', [backend.port]), circuit_breakers: { thresholds: [
        { max_requests: MAX_REQUESTS, track_remaining: true },
        { priority: 'HIGH', max_requests: HIGH_MAX_REQUESTS, track_remaining: true },
      ] } }],
    ), { ports: ['http'], args: ['--concurrency', '2'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('both workers serve: sequential requests on new connections make one upstream connection per worker', async () => {
    const before = backend.connections;
    for (let i = 0; i < 40; i++) assert.equal((await request(`${base}/seq/${i}`, { agent: false, headers: { host: 'cb.test' } })).status, 200);
    assert.equal(backend.connections - before, 2, 'both worker threads took connections');
  });

  test(`a burst of ${BURST} slow requests admits max_requests (${MAX_REQUESTS}) in the whole process; the rest overflow (503 UO)`, async () => {
    const replies = await Promise.all(Array.from({ length: BURST }, (_, i) =>
      request(`${base}/slow/${i}?delay=1500`, { agent: false, headers: { host: 'cb.test' } })));
    const ok = replies.filter((r) => r.status === 200).length;
    const overflow = replies.filter((r) => r.status === 503 && r.headers['x-envoy-overloaded'] === 'true').length;
    assert.equal(ok, MAX_REQUESTS, `admitted ${ok}: ${replies.map((r) => r.status).join(' ')}`);
    assert.equal(overflow, BURST - MAX_REQUESTS);
    assert.equal(await proxy.stat('cluster.slow.upstream_rq_pending_overflow'), BURST - MAX_REQUESTS);
    // The gauges show the process's count once (the main thread publishes the shared counts).
    assert.equal(await proxy.stat('cluster.slow.circuit_breakers.default.remaining_rq'), MAX_REQUESTS);
    assert.equal(await proxy.stat('cluster.slow.circuit_breakers.default.rq_open'), 0);
    assert.equal(await proxy.stat('cluster.slow.circuit_breakers.high.remaining_rq'), HIGH_MAX_REQUESTS);
    assert.equal(await proxy.stat('cluster.slow.circuit_breakers.high.rq_open'), 0);
  });
});
