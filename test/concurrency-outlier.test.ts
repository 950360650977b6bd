// --concurrency 2: outlier detection is one per cluster across both worker threads, as Envoy's detector
// is. consecutive_5xx counts a host's errors whatever worker saw them, and an ejection takes the host out
// of every worker's balancing at once. Requests on new connections, which the kernel spreads over both
// workers (SO_REUSEPORT): with per-worker detection the third 503 would not eject (it takes three on
// one worker), and the other worker would go on sending to the failing host. Gauges of state every
// thread holds alike (membership, active clusters) show the process's value, not one per thread added up;
// /clusters' per-host counters add both threads' requests.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

const CONSECUTIVE_5XX = 3;

describe('--concurrency 2: shared outlier detection', { timeout: 60_000 }, () => {
  let good: Backend, bad: Server, badPort = 0, badHits = 0, proxy: RunningProxy, base: string;
  before(async () => {
    good = await startHttpBackend();
    bad = createServer((_req, res) => { badHits++; res.writeHead(503, { 'content-length': '0' }).end(); });
    await new Promise<void>((resolve) => bad.listen(0, '127.0.0.1', resolve));
    badPort = (bad.address() as AddressInfo).port;
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([routeTo('od')], ['od.test'])], { statPrefix: 'od' }))])],
      [{ ...cluster('od', [good.port, badPort]), outlier_detection: {
        consecutive_5xx: CONSECUTIVE_5XX, max_ejection_percent: 50, interval: '60s', base_ejection_time: '60s',
      } }],
    ), { ports: ['http'], args: ['--concurrency', '2'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => good?.close(), () => new Promise<void>((resolve) => bad.close(() => resolve()))));

  const get = async (i: number): Promise<number> =>
    (await request(`${base}/r/${i}`, { agent: false, headers: { host: 'od.test' } })).status;

  test(`${CONSECUTIVE_5XX} errors in the whole process eject the host; then no worker sends to it`, async () => {
    const goodBefore = good.connections;
    let i = 0, errors = 0;
    while (errors < CONSECUTIVE_5XX && i < 200) if ((await get(i++)) === 503) errors++;
    assert.equal(errors, CONSECUTIVE_5XX, `${i} requests saw ${errors} errors`);
    assert.equal(await proxy.stat('cluster.od.outlier_detection.ejections_enforced_consecutive_5xx'), 1,
      'the third error ejects, whichever workers the three came through');
    const hitsAtEjection = badHits;
    const statuses: number[] = [];
    for (let k = 0; k < 40; k++) statuses.push(await get(i++));
    assert.deepEqual(statuses.filter((s) => s !== 200), [], 'no worker picks the ejected host');
    assert.equal(badHits, hitsAtEjection);
    assert.equal(good.connections - goodBefore, 2, 'both worker threads served (one upstream connection each)');
    // The gauge shows the process's ejections once; /clusters on the main thread shows the flag.
    assert.equal(await proxy.stat('cluster.od.outlier_detection.ejections_active'), 1);
    assert.equal(await proxy.stat('cluster.od.outlier_detection.ejections_enforced_total'), 1);
    // Membership is the cluster's, not one copy per thread added up.
    assert.equal(await proxy.stat('cluster.od.membership_total'), 2);
    assert.equal(await proxy.stat('cluster.od.membership_healthy'), 1);
    assert.equal(await proxy.stat('cluster_manager.active_clusters'), 1);
    const clusters = (await proxy.admin('/clusters')).body;
    assert.match(clusters, /od::127\.0\.0\.1:\d+::health_flags::\/failed_outlier_check/);
    // Per-host counters are the process's: both threads' requests add up.
    const rqTotal = [...clusters.matchAll(/^od::127\.0\.0\.1:(\d+)::rq_total::(\d+)$/gm)].map((m): [number, number] => [Number(m[1]), Number(m[2])]);
    assert.deepEqual(new Map(rqTotal), new Map([[good.port, i - hitsAtEjection], [badPort, hitsAtEjection]]), `sent ${i}`);
    const json = JSON.parse((await proxy.admin('/clusters?format=json')).body) as { cluster_statuses: Array<{ name: string; host_statuses: Array<{ address: { socket_address: { port_value: number } }; stats: Array<{ name: string; value: string }> }> }> };
    const goodStats = json.cluster_statuses.find((c) => c.name === 'od')!.host_statuses.find((h) => h.address.socket_address.port_value === good.port)!.stats;
    assert.equal(goodStats.find((x) => x.name === 'rq_success')?.value, String(i - hitsAtEjection));
  });
});
