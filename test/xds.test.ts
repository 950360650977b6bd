// xDS end to end: skua-proxy driven by skua-controlplane over ADS (SotW and Delta), both real
// processes: LDS → RDS, CDS → EDS warming, live updates, a NACKed resource with the last good
// config still serving, and the control plane killed and restarted under load.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startControlPlane, adsBootstrap, type RunningControlPlane } from './lib/controlplane.ts';
import { cleanup, freePort, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { makeCert, startHttpBackend, type Backend, type TestCert } from './lib/backends.ts';
import { connect as tlsConnect } from 'node:tls';
import { hasResponses, parseResponses, rawExchange, request, run, sleep } from './lib/client.ts';
import { T } from './lib/config.ts';

const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const ROUTE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const CLA = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

function listenerRes(name: string, port: number, routeName: string, extraFilters: Json[] = []): Json {
  return {
    '@type': LISTENER, name, address: { socket_address: { address: '127.0.0.1', port_value: port } },
    filter_chains: [{ filters: [...extraFilters, {
      name: 'envoy.filters.network.http_connection_manager',
      typed_config: {
        '@type': T.hcm, stat_prefix: name,
        rds: { route_config_name: routeName, config_source: { ads: {}, resource_api_version: 'V3' } },
        http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
      },
    }] }],
  };
}

function routeRes(name: string, cluster: string, responseHeader = 'v1'): Json {
  return {
    '@type': ROUTE, name,
    virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster } }],
      response_headers_to_add: [{ header: { key: 'x-route-version', value: responseHeader } }] }],
  };
}

function edsCluster(name: string): Json {
  return { '@type': CLUSTER, name, type: 'EDS', connect_timeout: '1s', eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' } } };
}

function cla(name: string, ports: number[]): Json {
  return { '@type': CLA, cluster_name: name, endpoints: [{ lb_endpoints: ports.map((p) => ({ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: p } } } })) }] };
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

for (const delta of [false, true]) {
  describe(`xDS over ADS (${delta ? 'Delta' : 'SotW'})`, () => {
    let cp: RunningControlPlane, proxy: RunningProxy, a: Backend, b: Backend, port: number;
    before(async () => {
      a = await startHttpBackend('a');
      b = await startHttpBackend('b');
      port = await freePort();
      cp = await startControlPlane({
        clusters: [edsCluster('backend')],
        endpoints: [cla('backend', [a.port])],
        listeners: [listenerRes('http', port, 'r1')],
        routes: [routeRes('r1', 'backend')],
      });
      proxy = await startProxy(() => adsBootstrap(cp.port, delta));
    });
    after(() => cleanup(() => proxy?.stop(), () => cp?.stop(), () => a?.close(), () => b?.close()));

    test('the listener from LDS serves routes from RDS to endpoints from EDS', async () => {
      const r = await request(`http://127.0.0.1:${port}/hello`);
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-route-version'], 'v1');
      assert.equal(a.requests.at(-1)?.url, '/hello');
      assert.equal(await proxy.stat('control_plane.connected_state'), 1);
      assert.ok((await proxy.stat('listener_manager.lds.update_success'))! >= 1);
      assert.ok((await proxy.stat('cluster_manager.cds.update_success'))! >= 1);
      assert.ok((await proxy.stat('http.http.rds.r1.update_success'))! >= 1, 'Envoy names RDS stats http.<stat_prefix>.rds.<route_config_name>.*');
    });

    test('config_dump shows dynamic listeners, clusters, routes and endpoints with versions', async () => {
      const dump = JSON.parse((await proxy.admin('/config_dump?include_eds')).body) as { configs: Json[] };
      const byType = (t: string): Json => dump.configs.find((c) => String(c['@type']).endsWith(t)) as Json;
      const listeners = byType('ListenersConfigDump').dynamic_listeners as Json[];
      const http = listeners.find((l) => l.name === 'http') as Json;
      assert.ok((http.active_state as Json).version_info);
      assert.equal(((http.active_state as Json).listener as Json)['@type'], LISTENER);
      const clusters = byType('ClustersConfigDump').dynamic_active_clusters as Json[];
      assert.equal(((clusters[0].cluster as Json).name), 'backend');
      const routes = byType('RoutesConfigDump').dynamic_route_configs as Json[];
      assert.equal(((routes[0].route_config as Json).name), 'r1');
      const eps = byType('EndpointsConfigDump').dynamic_endpoint_configs as Json[];
      assert.equal(((eps[0].endpoint_config as Json).cluster_name), 'backend');
    });

    test('an RDS and an EDS change apply without dropping the listener', async () => {
      cp.write('routes', [routeRes('r1', 'backend', 'v2')]);
      cp.write('endpoints', [cla('backend', [b.port])]);
      await eventually('route v2 and endpoint b', async () => {
        const r = await request(`http://127.0.0.1:${port}/after`);
        return r.headers['x-route-version'] === 'v2' && b.requests.some((q) => q.url === '/after');
      });
    });

    test('a bad listener is NACKed naming the resource and field; the last good config keeps serving', async () => {
      const bad = listenerRes('http', port, 'r1', [{ name: 'x', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo' } }]);
      cp.write('listeners', [bad]);
      await eventually('a NACK', async () => ((await proxy.stat('listener_manager.lds.update_rejected')) ?? 0) >= 1);
      await eventually('the NACK reaches the control plane', async () => /NACKed Listener: http: filter_chains\[0\]\.filters\[0\]\.typed_config: unsupported network filter type\.googleapis\.com\/envoy\.extensions\.filters\.network\.echo\.v3\.Echo/.test(cp.log()));
      const r = await request(`http://127.0.0.1:${port}/still`);
      assert.equal(r.status, 200);
      const dump = JSON.parse((await proxy.admin('/config_dump?resource=dynamic_listeners')).body) as { configs: Json[] };
      const http = dump.configs.find((c) => c.name === 'http') as Json;
      assert.match(String((http.error_state as Json).details), /unsupported network filter/);
      assert.ok(http.active_state, 'the last good listener is still active');
      cp.write('listeners', [listenerRes('http', port, 'r1')]);
      await eventually('the error state clears', async () => {
        const d = JSON.parse((await proxy.admin('/config_dump?resource=dynamic_listeners')).body) as { configs: Json[] };
        return !(d.configs.find((c) => c.name === 'http') as Json).error_state;
      });
    });

    test('control plane killed and restarted under load: zero failed requests, config re-synced', async () => {
      let ok = 0, failed = 0, stop = false;
      const load = (async () => {
        while (!stop) {
          const r = await request(`http://127.0.0.1:${port}/load`).catch(() => undefined);
          if (r?.status === 200) ok++; else failed++;
        }
      })();
      try {
        await sleep(300);
        await cp.kill();
        await eventually('the proxy sees the control plane gone', async () => (await proxy.stat('control_plane.connected_state')) === 0);
        await sleep(500);
        cp.write('routes', [routeRes('r1', 'backend', 'v3')]);
        await cp.restart();
        await eventually('re-sync after restart', async () => (await request(`http://127.0.0.1:${port}/x`)).headers['x-route-version'] === 'v3', 20_000);
      } finally {
        // A failed wait must not leave the load running for the rest of the file.
        stop = true;
        await load;
      }
      assert.equal(failed, 0, `${failed} of ${ok + failed} requests failed`);
      assert.ok(ok > 20, `only ${ok} requests completed`);
    });

    test('removal: a cluster gone → 503 NC on its route; a listener gone → its port closes', async () => {
      cp.write('clusters', []);
      await eventually('503 no cluster', async () => (await request(`http://127.0.0.1:${port}/nc`)).status === 503);
      cp.write('listeners', []);
      await eventually('the port closes', async () => { try { await request(`http://127.0.0.1:${port}/gone`); return false; } catch { return true; } });
      const dump = JSON.parse((await proxy.admin('/config_dump')).body) as { configs: Json[] };
      const listeners = dump.configs.find((c) => String(c['@type']).endsWith('ListenersConfigDump')) as Json;
      assert.deepEqual(listeners.dynamic_listeners, []);
    });
  });
}

describe('HCM normalize_path and merge_slashes over RDS (as istiod sets them)', () => {
  let cp: RunningControlPlane, proxy: RunningProxy, a: Backend, port: number;
  before(async () => {
    a = await startHttpBackend('a');
    port = await freePort();
    const l = listenerRes('norm', port, 'r-norm');
    const tc = ((((l.filter_chains as Json[])[0].filters as Json[])[0]).typed_config as Json);
    Object.assign(tc, { normalize_path: true, merge_slashes: true, path_with_escaped_slashes_action: 'REJECT_REQUEST' });
    cp = await startControlPlane({ all: [edsCluster('backend'), cla('backend', [a.port]), l, routeRes('r-norm', 'backend')] });
    proxy = await startProxy(() => adsBootstrap(cp.port, true));
  });
  after(() => cleanup(() => proxy?.stop(), () => cp?.stop(), () => a?.close()));

  test('the backend sees the normalised path; escaped slashes are refused with 400', async () => {
    // Raw request lines: an HTTP client library would normalise the URL itself.
    const send = async (target: string): Promise<number> => {
      const raw = await rawExchange(port, `GET ${target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`, hasResponses(1));
      return parseResponses(raw).responses[0].status;
    };
    assert.equal(await send('//x/./y/../%7Ez?q=1'), 200);
    assert.equal(a.requests.at(-1)?.url, '/x/~z?q=1');
    assert.equal(await send('/a%2Fb'), 400);
  });
});

describe('xDS with --concurrency 2: workers apply the updates the main thread receives', () => {
  let cp: RunningControlPlane, proxy: RunningProxy, a: Backend, port: number;
  before(async () => {
    a = await startHttpBackend('a');
    port = await freePort();
    cp = await startControlPlane({ all: [edsCluster('backend'), cla('backend', [a.port]), listenerRes('http', port, 'r1'), routeRes('r1', 'backend')] });
    proxy = await startProxy(() => adsBootstrap(cp.port, true), { args: ['--concurrency', '2'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => cp?.stop(), () => a?.close()));

  // Each request is a new connection, so SO_REUSEPORT spreads them over both threads.
  const versions = async (n: number): Promise<Set<string>> => {
    const seen = new Set<string>();
    for (let i = 0; i < n; i++) {
      const r = await request(`http://127.0.0.1:${port}/c${i}`);
      seen.add(`${r.status}:${String(r.headers['x-route-version'])}`);
    }
    return seen;
  };

  test('every connection is served, and a route update reaches every thread', async () => {
    // Both threads bound the LDS listener (two SO_REUSEPORT sockets on the port).
    await eventually('two listening sockets', async () => (await run('ss', ['-Hltn', `sport = :${port}`])).stdout.trim().split('\n').length === 2);
    await eventually('both threads serve v1', async () => { const s = await versions(30); return s.size === 1 && s.has('200:v1'); });
    cp.write('all', [edsCluster('backend'), cla('backend', [a.port]), listenerRes('http', port, 'r1'), routeRes('r1', 'backend', 'v2')]);
    await eventually('both threads serve v2', async () => { const s = await versions(30); return s.size === 1 && s.has('200:v2'); });
  });
});

describe('initial_fetch_timeout: with no control plane the proxy goes live after the timeout', () => {
  let proxy: RunningProxy;
  after(() => cleanup(() => proxy?.stop()));
  test('ready without xDS, disconnected', async () => {
    const dead = await freePort();
    const b = adsBootstrap(dead, true);
    const dr = b.dynamic_resources as Json;
    (dr.lds_config as Json).initial_fetch_timeout = '1s';
    (dr.cds_config as Json).initial_fetch_timeout = '1s';
    const t0 = Date.now();
    proxy = await startProxy(() => b);
    assert.ok(Date.now() - t0 >= 900, 'not before the timeout');
    assert.equal(await proxy.stat('control_plane.connected_state'), 0);
  });
});

describe('SDS over ADS: a listener certificate named by sds_config {ads: {}} is subscribed to, served and rotated', () => {
  let cp: RunningControlPlane, proxy: RunningProxy, a: Backend, port: number, c1: TestCert, c2: TestCert;
  const SECRET = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret';
  const secret = (c: TestCert): Json => ({ '@type': SECRET, name: 'server-cert', tls_certificate: { certificate_chain: { inline_string: c.cert }, private_key: { inline_string: c.key } } });
  before(async () => {
    a = await startHttpBackend('a');
    c1 = await makeCert('one.example');
    c2 = await makeCert('two.example');
    port = await freePort();
    const l = listenerRes('tls', port, 'r1');
    (l.filter_chains as Json[])[0].transport_socket = { name: 'envoy.transport_sockets.tls', typed_config: {
      '@type': T.downstreamTls, common_tls_context: { tls_certificate_sds_secret_configs: [{ name: 'server-cert', sds_config: { ads: {}, resource_api_version: 'V3' } }] },
    } };
    cp = await startControlPlane({ all: [edsCluster('backend'), cla('backend', [a.port]), l, routeRes('r1', 'backend')], secrets: [secret(c1)] });
    proxy = await startProxy(() => adsBootstrap(cp.port, true));
  });
  after(() => cleanup(() => proxy?.stop(), () => cp?.stop(), () => a?.close(), () => c1?.remove(), () => c2?.remove()));

  const servedCn = (): Promise<string> => new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => { resolve(String(s.getPeerCertificate().subject?.CN)); s.destroy(); });
    s.on('error', reject);
  });

  test('the secret pushed over ADS is the listener certificate, and a new version rotates it', async () => {
    await eventually('the first certificate', async () => (await servedCn()) === 'one.example');
    cp.write('secrets', [secret(c2)]);
    await eventually('the rotated certificate', async () => (await servedCn()) === 'two.example');
  });
});

describe('ECDS: an HTTP filter with config_discovery takes its TypedExtensionConfig, warms without it, follows updates', () => {
  let cp: RunningControlPlane, proxy: RunningProxy, a: Backend, port: number, port2: number;
  const FAULT = 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault';
  const ext = (name: string, status: number): Json => ({
    '@type': 'type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig', name,
    typed_config: { '@type': FAULT, abort: { http_status: status, percentage: { numerator: 100, denominator: 'HUNDRED' } } },
  });
  const ecdsListener = (name: string, p: number, filterName: string): Json => {
    const l = listenerRes(name, p, 'r1');
    const tc = ((((l.filter_chains as Json[])[0].filters as Json[])[0]).typed_config as Json);
    (tc.http_filters as Json[]).unshift({ name: filterName, config_discovery: { config_source: { ads: {}, resource_api_version: 'V3' }, type_urls: [FAULT] } });
    return l;
  };
  const base = (): Json[] => [edsCluster('backend'), cla('backend', [a.port]), routeRes('r1', 'backend'), ecdsListener('ecds', port, 'fault-1')];
  before(async () => {
    a = await startHttpBackend('a');
    port = await freePort();
    port2 = await freePort();
    cp = await startControlPlane({ all: base(), ext: [ext('fault-1', 418)] });
    proxy = await startProxy(() => adsBootstrap(cp.port, true));
  });
  after(() => cleanup(() => proxy?.stop(), () => cp?.stop(), () => a?.close()));

  const listenerState = async (name: string): Promise<Json | undefined> => {
    const dump = JSON.parse((await proxy.admin('/config_dump?resource=dynamic_listeners')).body) as { configs: Json[] };
    return dump.configs.find((c) => c.name === name);
  };

  test('the filter runs with the delivered config; an update rebuilds the listener', async () => {
    await eventually('the fault from ECDS', async () => (await request(`http://127.0.0.1:${port}/e`)).status === 418);
    cp.write('ext', [ext('fault-1', 429)]);
    await eventually('the updated fault', async () => (await request(`http://127.0.0.1:${port}/e`)).status === 429);
    const d = JSON.parse((await proxy.admin('/config_dump')).body) as { configs: Json[] };
    const ecds = d.configs.find((c) => String(c['@type']).endsWith('EcdsConfigDump')) as Json;
    assert.equal(((ecds.ecds_filters as Json[])[0].ecds_filter as Json).name, 'fault-1');
  });

  test('a listener whose extension config has not arrived warms, and goes active when it does', async () => {
    cp.write('all', [...base(), ecdsListener('ecds2', port2, 'fault-2')]);
    await eventually('ecds2 warming', async () => { const l = await listenerState('ecds2'); return !!l?.warming_state && !l.active_state; });
    await assert.rejects(request(`http://127.0.0.1:${port2}/w`), 'a warming listener is not bound');
    cp.write('ext', [ext('fault-1', 429), ext('fault-2', 451)]);
    await eventually('ecds2 active', async () => (await request(`http://127.0.0.1:${port2}/w`)).status === 451);
  });
});
