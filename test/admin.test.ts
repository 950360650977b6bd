// The admin interface: /config_dump, /stats/prometheus (promtool when installed), /clusters,
// /listeners, /server_info, POST-only endpoints, /drain_listeners, /quitquitquit, and
// --concurrency 2 serving on both workers with stats merged.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { have, request, run, sleep } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, simpleHttp, vhost } from './lib/config.ts';

const ADMIN = 'type.googleapis.com/envoy.admin.v3.';

/** Checks the text exposition format; returns the samples by `name{labels}`. */
function parsePrometheus(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) { assert.ok(!types.has(type[1]), `TYPE ${type[1]} declared twice`); types.set(type[1], type[2]); continue; }
    if (line.startsWith('# HELP ')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$/.exec(line);
    assert.ok(m, `not a valid exposition line: ${line}`);
    const family = m[1].replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(m[1]) || types.get(family) === 'histogram', `sample ${m[1]} has no # TYPE`);
    samples.set(m[1] + (m[2] ?? ''), Number(m[3]));
  }
  return samples;
}

describe('admin', { timeout: 60_000 }, () => {
  let backend: Backend, proxy: RunningProxy, base: string;
  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => simpleHttp(p('http'), backend.port, { statPrefix: 'adm' }), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
    for (let i = 0; i < 5; i++) assert.equal((await request(`${base}/traffic/${i}`)).status, 200);
    assert.equal((await request(`${base}/status/503`)).status, 503);
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('/ready and /server_info', async () => {
    const ready = await proxy.admin('/ready');
    assert.equal(ready.status, 200);
    assert.equal(ready.body, 'LIVE\n');
    const info = JSON.parse((await proxy.admin('/server_info')).body) as Json;
    assert.equal(info.state, 'LIVE');
    assert.equal((info.command_line_options as Json).concurrency, 1);
  });

  test('/config_dump: bootstrap, clusters, listeners and routes dumps with their @type', async () => {
    const r = await proxy.admin('/config_dump');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /application\/json/);
    const configs = (JSON.parse(r.body) as { configs: Json[] }).configs;
    const byType = new Map(configs.map((c) => [String(c['@type']), c]));
    for (const t of ['BootstrapConfigDump', 'ClustersConfigDump', 'ListenersConfigDump', 'RoutesConfigDump']) assert.ok(byType.has(ADMIN + t), `missing ${t}`);
    const boot = byType.get(ADMIN + 'BootstrapConfigDump')?.bootstrap as Json;
    assert.ok((boot.static_resources as Json).listeners);
    const clusters = byType.get(ADMIN + 'ClustersConfigDump')?.static_clusters as Array<{ cluster: Json }>;
    assert.deepEqual(clusters.map((c) => c.cluster.name), ['backend']);
    assert.equal(clusters[0].cluster['@type'], 'type.googleapis.com/envoy.config.cluster.v3.Cluster');
    const listeners = byType.get(ADMIN + 'ListenersConfigDump')?.static_listeners as Array<{ listener: Json }>;
    assert.deepEqual(listeners.map((l) => l.listener.name), [`listener_${proxy.ports.http}`]);
    assert.equal(listeners[0].listener['@type'], 'type.googleapis.com/envoy.config.listener.v3.Listener');
    const routes = byType.get(ADMIN + 'RoutesConfigDump')?.static_route_configs as Array<{ route_config: Json }>;
    assert.deepEqual(routes.map((x) => x.route_config.name), ['local_route']);
    const only = JSON.parse((await proxy.admin('/config_dump?resource=static_clusters')).body) as { configs: Json[] };
    assert.equal(only.configs.length, 1);
  });

  test('/stats/prometheus is valid exposition text with the traffic counted', async () => {
    const r = await proxy.admin('/stats/prometheus');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/plain/);
    const samples = parsePrometheus(r.body);
    assert.equal(samples.get('envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="adm"}'), 6);
    assert.equal(samples.get('envoy_http_downstream_rq_xx{envoy_response_code_class="2",envoy_http_conn_manager_prefix="adm"}'), 5);
    assert.equal(samples.get('envoy_cluster_upstream_rq_xx{envoy_response_code_class="5",envoy_cluster_name="backend"}'), 1);
    assert.ok([...samples.keys()].some((k) => k.startsWith('envoy_http_downstream_rq_time_bucket{') && k.includes('le="+Inf"')), 'a histogram with +Inf bucket');
    assert.equal((await proxy.admin('/stats?format=prometheus')).body, r.body);
    if (await have('promtool')) {
      const check = await run('promtool', ['check', 'metrics'], 20_000, r.body);
      // Exit 3 = lint findings only; Envoy's own output draws the same ones (no HELP, counter names).
      const lint = (check.stdout + check.stderr).split('\n').filter((l) => l.trim() !== '');
      const unexpected = lint.filter((l) => !/ (no help text|counter metrics should have "_total" suffix|non-counter metrics should not have "_total" suffix)$/.test(l));
      assert.ok(check.code === 0 || check.code === 3, `promtool exit ${check.code}: ${unexpected.join('\n')}`);
      assert.deepEqual(unexpected, []);
    }
  });

  test('/stats?format=json and text', async () => {
    assert.equal(await proxy.stat('http.adm.downstream_rq_total'), 6);
    assert.equal(await proxy.stat('cluster.backend.upstream_rq_total'), 6);
    const text = (await proxy.admin('/stats?filter=^http\\.adm\\.downstream_rq_total$')).body;
    assert.equal(text.trim(), 'http.adm.downstream_rq_total: 6');
  });

  test('/clusters (text and ?format=json) lists the host with its stats', async () => {
    const json = JSON.parse((await proxy.admin('/clusters?format=json')).body) as { cluster_statuses: Array<{ name: string; host_statuses: Json[] }> };
    const c = json.cluster_statuses.find((x) => x.name === 'backend');
    assert.ok(c);
    assert.equal(c.host_statuses.length, 1);
    const h = c.host_statuses[0] as { address: { socket_address: { address: string; port_value: number } }; health_status: Json; stats: Array<{ name: string; value?: string }> };
    assert.deepEqual(h.address.socket_address, { address: '127.0.0.1', port_value: backend.port });
    assert.equal(h.health_status.eds_health_status, 'HEALTHY');
    assert.equal(h.stats.find((s) => s.name === 'rq_total')?.value, '6', `host stats: ${JSON.stringify(h.stats)}`);
    const text = (await proxy.admin('/clusters')).body;
    assert.match(text, new RegExp(`^backend::127\\.0\\.0\\.1:${backend.port}::health_flags::healthy$`, 'm'));
  });

  test('/listeners', async () => {
    const json = JSON.parse((await proxy.admin('/listeners?format=json')).body) as { listener_statuses: Array<{ name: string; local_address: { socket_address: { port_value: number } } }> };
    assert.equal(json.listener_statuses[0].name, `listener_${proxy.ports.http}`);
    assert.equal(json.listener_statuses[0].local_address.socket_address.port_value, proxy.ports.http);
  });

  test('mutating endpoints need POST; unknown paths are 404', async () => {
    assert.equal((await proxy.admin('/quitquitquit')).status, 405);
    assert.equal((await proxy.admin('/nope')).status, 404);
    assert.equal((await proxy.admin('/logging?level=debug', 'POST')).status, 200);
    assert.match((await proxy.admin('/logging', 'POST')).body, /debug/);
    assert.equal((await proxy.admin('/logging?level=warning', 'POST')).status, 200);
    assert.doesNotThrow(() => process.kill(proxy.pid, 0));
  });
});

describe('admin lifecycle', { timeout: 60_000 }, () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend(); });
  after(() => cleanup(() => backend?.close()));

  test('POST /drain_listeners stops accepting; POST /quitquitquit exits the process with 0', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'] });
    t.after(() => proxy.stop({ allowExited: true }));
    assert.equal((await request(`http://127.0.0.1:${proxy.ports.http}/`)).status, 200);
    assert.equal((await proxy.admin('/drain_listeners', 'POST')).status, 200);
    let refused = false;
    for (let i = 0; i < 20 && !refused; i++) {
      refused = await request(`http://127.0.0.1:${proxy.ports.http}/`, { timeoutMs: 1000 }).then(() => false, () => true);
      if (!refused) await sleep(100);
    }
    assert.ok(refused, 'the listener still accepts after /drain_listeners');
    assert.equal((await proxy.admin('/ready')).status, 503, '/ready reports DRAINING');
    assert.equal((await proxy.admin('/quitquitquit', 'POST')).status, 200);
    const exit = await Promise.race([proxy.exited, sleep(5000).then(() => undefined)]);
    assert.ok(exit, 'still running 5 s after /quitquitquit');
    assert.equal(exit.code, 0);
  });

  test('--concurrency 2: both workers serve (one pooled upstream connection each), stats are merged', async (t) => {
    // A domain of its own: with dynamic ports another test's stray client could reach this listener;
    // its requests then end as 404 and leave the 2xx and upstream counts below untouched.
    const proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([routeTo('backend')], ['multi.test'])], { statPrefix: 'multi' }))])],
      [cluster('backend', [backend.port])],
    ), { ports: ['http'], args: ['--concurrency', '2'] });
    t.after(() => proxy.stop());
    const before = backend.connections;
    const n = 60;
    for (let i = 0; i < n; i++) {
      assert.equal((await request(`http://127.0.0.1:${proxy.ports.http}/w/${i}`, { agent: false, headers: { host: 'multi.test' } })).status, 200);
    }
    // Each new downstream connection lands on a worker chosen by the kernel (SO_REUSEPORT); each
    // worker keeps its own upstream pool, so sequential requests make exactly one upstream
    // connection per worker that served traffic.
    assert.equal(backend.connections - before, 2, `upstream connections: ${backend.connections - before}`);
    assert.equal(await proxy.stat('http.multi.downstream_rq_2xx'), n);
    assert.equal(await proxy.stat('cluster.backend.upstream_rq_total'), n);
    const prom = parsePrometheus((await proxy.admin('/stats/prometheus')).body);
    assert.equal(prom.get('envoy_http_downstream_rq_xx{envoy_response_code_class="2",envoy_http_conn_manager_prefix="multi"}'), n);
    const info = JSON.parse((await proxy.admin('/server_info')).body) as { command_line_options: Json };
    assert.equal(info.command_line_options.concurrency, 2);
  });
});
