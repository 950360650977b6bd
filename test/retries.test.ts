// Route retry_policy with Envoy's semantics, against real backends that fail on purpose.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { cleanup, freePort, startProxy, type RunningProxy } from './lib/proxy.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

/** A backend that answers `failures` requests per key with `status` (or a reset), then 200 with its name. */
function flakyBackend(name: string): Promise<{ port: number; server: Server; hits: () => number }> {
  const seen = new Map<string, number>();
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    const key = String(req.headers['x-key'] ?? '');
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    const failures = Number(req.headers['x-fail-times'] ?? 0);
    const how = String(req.headers['x-fail-how'] ?? '503');
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      if (n <= failures) {
        if (how === 'reset') { req.socket.destroy(); return; }
        if (how === 'slow') { setTimeout(() => res.writeHead(200, { 'x-backend': name, 'x-attempt': String(n) }).end('slow'), 1000); return; }
        res.writeHead(Number(how), { 'x-backend': name }).end('failed');
        return;
      }
      res.writeHead(200, { 'x-backend': name, 'x-attempt': String(n) }).end(`${name} ok ${body}`);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    resolve({ port: typeof a === 'object' && a ? a.port : 0, server, hits: () => hits });
  }));
}

describe('retry_policy', { timeout: 60_000 }, () => {
  let a: Awaited<ReturnType<typeof flakyBackend>>, b: Awaited<ReturnType<typeof flakyBackend>>;
  let proxy: RunningProxy, base: string;

  before(async () => {
    a = await flakyBackend('a');
    b = await flakyBackend('b');
    const dead = await freePort();
    const retry5xx = { retry_policy: { retry_on: '5xx', num_retries: 2, retry_back_off: { base_interval: '0.005s' } } };
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([
        routeTo('one', '/5xx', retry5xx),
        routeTo('one', '/codes', { retry_policy: { retry_on: 'retriable-status-codes', retriable_status_codes: [418], num_retries: 1 } }),
        routeTo('one', '/reset', { retry_policy: { retry_on: 'reset', num_retries: 1 } }),
        routeTo('one', '/none'),
        routeTo('withdead', '/connect', { retry_policy: {
          retry_on: 'connect-failure', num_retries: 3,
          retry_host_predicate: [{ name: 'envoy.retry_host_predicates.previous_hosts', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate' } }],
          host_selection_retry_max_attempts: 5,
        } }),
        routeTo('one', '/idle', { timeout: '5s', idle_timeout: '0.2s' }),
        routeTo('one', '/pertry', { timeout: '3s', retry_policy: { retry_on: '5xx', num_retries: 1, per_try_timeout: '0.2s' } }),
        routeTo('one', '/'),
      ], ['*'], 'main')], { statPrefix: 'retries', accessLog: true }))]),
    ], [
      cluster('one', [a.port]),
      cluster('withdead', [dead, b.port], { connectTimeout: '0.5s' }),
    ]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });

  after(() => cleanup(() => proxy?.stop(), () => a?.server.close(), () => b?.server.close()));

  test('a 503 is retried and the client sees the success; the attempts are counted', async () => {
    const r = await request(`${base}/5xx`, { headers: { 'x-key': 'k1', 'x-fail-times': '2' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-attempt'], '3');
    assert.equal(await proxy.stat('cluster.one.upstream_rq_retry'), 2);
    assert.equal(await proxy.stat('cluster.one.upstream_rq_retry_success'), 1);
  });

  test('retries exhausted: the last upstream response goes downstream', async () => {
    const r = await request(`${base}/5xx`, { headers: { 'x-key': 'k2', 'x-fail-times': '5' } });
    assert.equal(r.status, 503);
    assert.equal(r.body.toString(), 'failed');
    assert.ok((await proxy.stat('cluster.one.upstream_rq_retry_limit_exceeded') ?? 0) >= 1);
  });

  test('no retry_policy: no retry', async () => {
    const before = a.hits();
    const r = await request(`${base}/none`, { headers: { 'x-key': 'k3', 'x-fail-times': '1' } });
    assert.equal(r.status, 503);
    assert.equal(a.hits() - before, 1);
  });

  test('retriable_status_codes retries only the listed codes', async () => {
    assert.equal((await request(`${base}/codes`, { headers: { 'x-key': 'k4', 'x-fail-times': '1', 'x-fail-how': '418' } })).status, 200);
    assert.equal((await request(`${base}/codes`, { headers: { 'x-key': 'k5', 'x-fail-times': '1', 'x-fail-how': '500' } })).status, 500);
  });

  test('x-envoy-retry-on and x-envoy-max-retries from the request turn retries on', async () => {
    const r = await request(`${base}/none`, { headers: { 'x-key': 'k6', 'x-fail-times': '1', 'x-envoy-retry-on': '5xx', 'x-envoy-max-retries': '1' } });
    assert.equal(r.status, 200);
  });

  test('an upstream reset before the response is retried with retry_on reset', async () => {
    const r = await request(`${base}/reset`, { headers: { 'x-key': 'k7', 'x-fail-times': '1', 'x-fail-how': 'reset' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-attempt'], '2');
  });

  test('a POST body is replayed on the retry', async () => {
    const r = await request(`${base}/5xx`, { method: 'POST', body: 'payload-123', headers: { 'x-key': 'k8', 'x-fail-times': '1' } });
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'a ok payload-123');
  });

  test('connect-failure with previous_hosts moves to the live host every time', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await request(`${base}/connect`, { headers: { 'x-key': `c${i}` } });
      assert.equal(r.status, 200, `request ${i}`);
      assert.equal(r.headers['x-backend'], 'b');
    }
  });

  test('per_try_timeout: a slow first attempt times out and is retried; a final timeout is 504 UT', async () => {
    const ok = await request(`${base}/pertry`, { headers: { 'x-key': 'p1', 'x-fail-times': '1', 'x-fail-how': 'slow' } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['x-attempt'], '2');
    const t0 = Date.now();
    const late = await request(`${base}/pertry`, { headers: { 'x-key': 'p2', 'x-fail-times': '5', 'x-fail-how': 'slow' } });
    assert.equal(late.status, 504);
    assert.equal(late.body.toString(), 'upstream request timeout');
    assert.ok(Date.now() - t0 < 900, 'two 200 ms tries, not the backend\'s 1 s');
    await proxy.waitForStdout(/"GET \/pertry HTTP\/1\.1" 504 UT /);
  });

  test('route idle_timeout: no progress for the idle time → 408 stream timeout (flag SI), long before the route timeout', async () => {
    const t0 = Date.now();
    const r = await request(`${base}/idle`, { headers: { 'x-key': 'i1', 'x-fail-times': '1', 'x-fail-how': 'slow' } });
    assert.equal(r.status, 408);
    assert.equal(r.body.toString(), 'stream timeout');
    assert.ok(Date.now() - t0 < 900, `took ${Date.now() - t0} ms`);
    await proxy.waitForStdout(/"GET \/idle HTTP\/1\.1" 408 SI /);
  });

  test('per-code upstream stats as Envoy names them, with the Prometheus tag', async () => {
    assert.ok((await proxy.stat('cluster.one.upstream_rq_200') ?? 0) > 0);
    assert.ok((await proxy.stat('cluster.one.upstream_rq_503') ?? 0) > 0);
    const prom = (await proxy.admin('/stats/prometheus')).body;
    assert.match(prom, /envoy_cluster_upstream_rq\{envoy_response_code="503",envoy_cluster_name="one"\} \d+/);
    assert.match(prom, /envoy_cluster_upstream_rq_time_bucket\{envoy_cluster_name="one",le="\+Inf"\} \d+/);
  });
});
