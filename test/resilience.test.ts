// Upstream resilience through the CLI with real backends:
// (a) a backend killed under load is ejected by outlier detection (consecutive 5xx, connect failures
//     counted as 503); only the requests that reached it before the ejection fail, and with a retry
//     policy none do;
// (b) circuit-breaker overflow (max_connections 1 + max_pending_requests 1, and max_requests 1)
//     answers 503 with `x-envoy-overloaded: true`, flag UO in the access log, and counts it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { parseAccessLog, request, sleep } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

const OVERFLOW_BODY = 'upstream connect error or disconnect/reset before headers. reset reason: overflow';

interface LoadResult { ok: number; failed: number; byBackend: Map<string, number>; statuses: Map<number, number> }

/**
 * `concurrency` keep-alive clients issuing GETs until `total` requests are done; `during(i)` runs
 * after request i is issued (used to kill a backend mid-run).
 */
async function load(url: string, total: number, concurrency: number, during?: (i: number) => Promise<void> | void): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const r: LoadResult = { ok: 0, failed: 0, byBackend: new Map(), statuses: new Map() };
  let issued = 0;
  const worker = async (): Promise<void> => {
    while (issued < total) {
      const i = issued++;
      await during?.(i);
      try {
        const res = await request(`${url}?i=${i}`, { agent, timeoutMs: 5000 });
        r.statuses.set(res.status, (r.statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200) {
          r.ok++;
          const b = (JSON.parse(res.text) as EchoReply).backend;
          r.byBackend.set(b, (r.byBackend.get(b) ?? 0) + 1);
        } else r.failed++;
      } catch {
        r.failed++;
        r.statuses.set(0, (r.statuses.get(0) ?? 0) + 1);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return r;
}

/** istiod's default breakers (everything 2^32 − 1: max_retries 3 would overflow under this load) plus `od`. */
function outlierCluster(ports: number[], od: Json): Json {
  const max = 4294967295;
  return cluster('backend', ports, { extra: {
    outlier_detection: od,
    circuit_breakers: { thresholds: [{ max_connections: max, max_pending_requests: max, max_requests: max, max_retries: max, track_remaining: true }] },
  } });
}

describe('a backend killed under load: outlier detection ejects it', { timeout: 90_000 }, () => {
  const OD = { consecutive_5xx: 3, interval: '1s', base_ejection_time: '30s', max_ejection_percent: 50 };
  const CONCURRENCY = 8;
  let backends: Backend[] = [];
  let proxy: RunningProxy;
  let base: string;

  before(async () => {
    backends = [await startHttpBackend('b0'), await startHttpBackend('b1'), await startHttpBackend('b2')];
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([
        routeTo('backend', '/retry', { retry_policy: { retry_on: 'connect-failure,reset,5xx', num_retries: 2 } }),
        routeTo('backend', '/'),
      ])]))])],
      [outlierCluster(backends.map((b) => b.port), OD)],
    ), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), ...backends.map((b) => () => b.close())));

  test('no retries: only the requests that hit the dead backend before its ejection fail', async () => {
    const warm = await load(`${base}/warm`, 60, CONCURRENCY);
    assert.equal(warm.failed, 0);
    assert.equal(warm.byBackend.size, 3, 'all three backends serve before the kill');

    const dead = backends[1];
    const deadHost = `127.0.0.1:${dead.port}`;
    const r = await load(`${base}/load`, 600, CONCURRENCY, async (i) => { if (i === 150) await dead.close(); });
    const served = r.byBackend.get('b1') ?? 0;
    // Which requests fail: those in flight on b1 when it died (at most CONCURRENCY) plus the
    // consecutive_5xx (3) connect failures that eject it; keep-alive races can add a few.
    console.log(`# killed b1 after 150 of 600 requests at concurrency ${CONCURRENCY}: ${r.failed} failed, statuses ${JSON.stringify([...r.statuses])}, per backend ${JSON.stringify([...r.byBackend])}`);
    assert.ok(r.failed >= 1, 'the kill is visible');
    assert.ok(r.failed <= OD.consecutive_5xx + CONCURRENCY + 2, `${r.failed} failures: more than the ejection threshold plus the requests in flight`);
    assert.ok(served < 150, `b1 served ${served} requests; it stops receiving traffic`);

    assert.equal(await proxy.stat('cluster.backend.outlier_detection.ejections_active'), 1);
    assert.ok((await proxy.stat('cluster.backend.outlier_detection.ejections_enforced_consecutive_5xx') ?? 0) >= 1);
    assert.ok((await proxy.stat('cluster.backend.outlier_detection.ejections_enforced_total') ?? 0) >= 1);
    assert.equal(await proxy.stat('cluster.backend.membership_healthy'), 2);
    const clusters = (await proxy.admin('/clusters')).body;
    assert.match(clusters, new RegExp(`^backend::${deadHost.replace(/\./g, '\\.')}::health_flags::/failed_outlier_check$`, 'm'));
    assert.match(clusters, new RegExp(`^backend::127\\.0\\.0\\.1:${backends[0].port}::health_flags::healthy$`, 'm'));
    const json = JSON.parse((await proxy.admin('/clusters?format=json')).body) as { cluster_statuses: Array<{ host_statuses: Array<{ address: { socket_address: { port_value: number } }; health_status: Record<string, unknown> }> }> };
    const hs = json.cluster_statuses[0].host_statuses.find((h) => h.address.socket_address.port_value === dead.port);
    assert.equal(hs?.health_status.failed_outlier_check, true);

    // Once ejected, the dead backend gets nothing: a fresh run is clean.
    const after = await load(`${base}/after`, 200, CONCURRENCY);
    assert.equal(after.failed, 0, `after the ejection: ${JSON.stringify([...after.statuses])}`);
    assert.equal(after.byBackend.get('b1'), undefined);
  });

  test('with retry_on connect-failure,reset,5xx: a second kill under load costs no request', async () => {
    // b1 is ejected (30 s) from the first test; kill b2 as well: b0 is left, and retries carry the rest.
    const dead = backends[2];
    const r = await load(`${base}/retry`, 400, CONCURRENCY, async (i) => { if (i === 100) await dead.close(); });
    console.log(`# killed b2 under load with retries: ${r.failed} of 400 failed, statuses ${JSON.stringify([...r.statuses])}`);
    assert.equal(r.failed, 0);
    assert.ok((await proxy.stat('cluster.backend.upstream_rq_retry') ?? 0) >= 1, 'retries happened');
    assert.equal(await proxy.stat('cluster.backend.upstream_rq_retry_overflow'), 0);
    // b2 cannot be ejected: b1 already is, and 2 of 3 is above max_ejection_percent 50.
    assert.ok((await proxy.stat('cluster.backend.outlier_detection.ejections_overflow') ?? 0) >= 1);
  });
});

describe('circuit breakers: overflow answers 503 UO with x-envoy-overloaded and counts it', { timeout: 60_000 }, () => {
  let backend: Backend;
  let proxy: RunningProxy;
  let base: string;

  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([
        routeTo('limited-rq', '/rq'),
        routeTo('limited', '/'),
      ])], { accessLog: true }))])],
      [
        cluster('limited', [backend.port], { extra: { circuit_breakers: { thresholds: [{ max_connections: 1, max_pending_requests: 1, track_remaining: true }] } } }),
        cluster('limited-rq', [backend.port], { extra: { circuit_breakers: { thresholds: [{ max_requests: 1 }] } } }),
      ],
    ), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('max_connections 1 + max_pending_requests 1, 6 concurrent requests to a slow backend', async () => {
    // Warm the single connection so the burst finds it established.
    assert.equal((await request(`${base}/warm`)).status, 200);
    const n = 6;
    const burst = Array.from({ length: n }, (_, i) => request(`${base}/slow?delay=600`, { headers: { 'x-request-id': `cb-${i}` } }));
    await sleep(200);
    // Mid-burst: one request on the one connection, one pending, the breakers open.
    assert.equal(await proxy.stat('cluster.limited.circuit_breakers.default.cx_open'), 1);
    assert.equal(await proxy.stat('cluster.limited.circuit_breakers.default.rq_pending_open'), 1);
    assert.equal(await proxy.stat('cluster.limited.circuit_breakers.default.remaining_pending'), 0);
    assert.equal(await proxy.stat('cluster.limited.upstream_rq_pending_active'), 1);
    const res = await Promise.all(burst);
    const ok = res.filter((r) => r.status === 200);
    const over = res.filter((r) => r.status === 503);
    console.log(`# ${n} concurrent, max_connections 1, max_pending_requests 1: ${ok.length} × 200, ${over.length} × 503`);
    assert.equal(ok.length, 2, 'one on the connection, one queued behind it');
    assert.equal(over.length, n - 2);
    for (const r of over) {
      assert.equal(r.headers['x-envoy-overloaded'], 'true');
      assert.equal(r.text, OVERFLOW_BODY);
    }
    assert.equal(await proxy.stat('cluster.limited.upstream_rq_pending_overflow'), n - 2);
    assert.ok((await proxy.stat('cluster.limited.upstream_cx_overflow') ?? 0) >= 1, 'the queued request could not open a second connection');
    assert.equal(await proxy.stat('cluster.limited.upstream_cx_total'), 1);
    const overIds = new Set<string>();
    for (let i = 0; i < n; i++) {
      const line = parseAccessLog(await proxy.waitForStdout(new RegExp(`"cb-${i}"`)));
      assert.ok(line);
      if (line.status === 503) { assert.equal(line.flags, 'UO'); overIds.add(`cb-${i}`); } else assert.equal(line.flags, '-');
    }
    assert.equal(overIds.size, n - 2);
    assert.equal(await proxy.stat('cluster.limited.circuit_breakers.default.rq_pending_open'), 0);
  });

  test('max_requests 1: a second concurrent request overflows', async () => {
    const first = request(`${base}/rq?delay=400`);
    await sleep(100);
    const second = await request(`${base}/rq`, { headers: { 'x-request-id': 'rq-over' } });
    assert.equal(second.status, 503);
    assert.equal(second.headers['x-envoy-overloaded'], 'true');
    assert.equal(second.text, OVERFLOW_BODY);
    assert.equal((await first).status, 200);
    assert.equal(parseAccessLog(await proxy.waitForStdout(/"rq-over"/))?.flags, 'UO');
    assert.equal(await proxy.stat('cluster.limited-rq.upstream_rq_pending_overflow'), 1);
    assert.equal(await proxy.stat('cluster.limited-rq.circuit_breakers.default.rq_open'), 0);
  });
});
