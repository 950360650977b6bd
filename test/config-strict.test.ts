// Strict config validation end to end (issue 9, defect 8): the real binary's --mode validate on
// misspelled YAML/JSON/camelCase bootstraps, --allow-unknown-static-fields on a serving proxy
// (server.static_unknown_fields), and over xDS: a TypedStruct with a misspelled field is NACKed
// naming the resource and field while the last good listener keeps serving; unknown binary field
// numbers are counted (server.dynamic_unknown_fields) or, with --reject-unknown-dynamic-fields, NACKed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cleanup, runProxyCli, startProxy, validate, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { simpleHttp, T } from './lib/config.ts';
import { startTestAds, type EncodedResource, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { encodeResource, structPlain, toPlainMessage, typeForUrl, TYPE_URL } from '../packages/proxy/src/api/xds.ts';

const HCM_NAME = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const F0 = 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config';

/** The three misspellings of the issue, each in its own copy of a valid bootstrap. */
function misspelled(which: 'cluster' | 'route' | 'hcm'): Json {
  const b = simpleHttp(10000, 8080) as { static_resources: { listeners: Json[]; clusters: Json[] } };
  const sr = b.static_resources;
  const hcm = (((sr.listeners[0].filter_chains as Json[])[0].filters as Json[])[0].typed_config as Json);
  if (which === 'cluster') { delete sr.clusters[0].connect_timeout; sr.clusters[0].conect_timeout = '1s'; }
  if (which === 'route') ((((hcm.route_config as Json).virtual_hosts as Json[])[0].routes as Json[])[0].route as Json).retry_polcy = { retry_on: '5xx' };
  if (which === 'hcm') hcm.stream_idle_timout = '1s';
  return b;
}

const EXPECTED = {
  cluster: 'static_resources.clusters[0].conect_timeout: unknown field of envoy.config.cluster.v3.Cluster',
  route: `${F0}.route_config.virtual_hosts[0].routes[0].route.retry_polcy: unknown field of envoy.config.route.v3.RouteAction`,
  hcm: `${F0}.stream_idle_timout: unknown field of ${HCM_NAME}`,
};

describe('--mode validate refuses misspelled fields below the top level', () => {
  test('the valid bootstrap validates', async () => {
    const r = await validate(simpleHttp(10000, 8080));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /OK/);
  });

  for (const format of ['yaml', 'json'] as const) {
    for (const which of ['cluster', 'route', 'hcm'] as const) {
      test(`${format}: ${EXPECTED[which].split(':')[0].split('.').pop()}`, async () => {
        const r = await validate(misspelled(which), { format });
        assert.equal(r.code, 1, `stdout: ${r.stdout}`);
        assert.match(r.stderr, new RegExp(`^error initializing configuration '[^']+': ${EXPECTED[which].replace(/[.[\]]/g, '\\$&')}\n$`));
      });
    }
  }

  test('camelCase JSON: the path is printed in snake_case', async () => {
    const b = simpleHttp(10000, 8080) as { static_resources: { clusters: Json[] } };
    b.static_resources.clusters[0] = { ...b.static_resources.clusters[0], connect_timeout: undefined, conectTimeout: '1s', lbPolicy: 'ROUND_ROBIN' };
    const r = await validate(JSON.parse(JSON.stringify(b)) as Json, { format: 'json' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /static_resources\.clusters\[0\]\.conect_timeout: unknown field of envoy\.config\.cluster\.v3\.Cluster/);
  });

  test('--config-yaml alone, and merged over -c', async () => {
    const alone = await runProxyCli(['--mode', 'validate', '--config-yaml', 'static_resources: { clusters: [{ name: a, conect_timeout: 1s }] }']);
    assert.equal(alone.code, 1);
    assert.match(alone.stderr, /'--config-yaml': static_resources\.clusters\[0\]\.conect_timeout: unknown field/);
    const dir = mkdtempSync(path.join(tmpdir(), 'skua-strict-'));
    try {
      const file = path.join(dir, 'b.json');
      writeFileSync(file, JSON.stringify(simpleHttp(10000, 8080)));
      const merged = await runProxyCli(['--mode', 'validate', '-c', file, '--config-yaml', 'admin: { adress: {} }']);
      assert.equal(merged.code, 1);
      assert.match(merged.stderr, /admin\.adress: unknown field of envoy\.config\.bootstrap\.v3\.Admin/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--allow-unknown-static-fields: validates, with one warning per unknown field', async () => {
    const b = misspelled('cluster');
    (((((b.static_resources as Json).listeners as Json[])[0].filter_chains as Json[])[0].filters as Json[])[0].typed_config as Json).stream_idle_timout = '1s';
    const r = await validate(b, { args: ['--allow-unknown-static-fields'] });
    assert.equal(r.code, 0, r.stderr);
    const warnings = r.stderr.split('\n').filter((l) => l.includes('--allow-unknown-static-fields'));
    assert.equal(warnings.length, 2, r.stderr);
    assert.match(warnings.join('\n'), /clusters\[0\]\.conect_timeout: unknown field of envoy\.config\.cluster\.v3\.Cluster/);
  });
});

describe('serving', () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend('app'); });
  after(() => cleanup(() => backend?.close()));

  test('--allow-unknown-static-fields serves traffic and counts server.static_unknown_fields', async (t) => {
    const proxy = await startProxy((p) => {
      const b = simpleHttp(p('http'), backend.port) as { static_resources: { clusters: Json[] } };
      b.static_resources.clusters[0].conect_timeout = '1s';
      return b;
    }, { ports: ['http'], args: ['--allow-unknown-static-fields'] });
    t.after(() => proxy.stop());
    const r = await request(`http://127.0.0.1:${proxy.ports.http}/x`);
    assert.equal(r.status, 200);
    assert.equal(await proxy.stat('server.static_unknown_fields'), 1);
    assert.equal(await proxy.stat('server.dynamic_unknown_fields'), 0);
    const info = JSON.parse((await proxy.admin('/server_info')).body) as { command_line_options: Json };
    assert.equal(info.command_line_options.allow_unknown_static_fields, true);
    assert.equal(info.command_line_options.reject_unknown_dynamic_fields, false);
  });
});

// ---- over xDS (a test ADS server that can send bytes encode.ts would refuse) ----

function encode(url: string, plain: Json): Uint8Array {
  const t = typeForUrl(url)!;
  return t.encode(t.fromObject(plain)).finish();
}

function appCluster(port: number): Json {
  return {
    '@type': TYPE_URL.cluster, name: 'app', type: 'STATIC', connect_timeout: '1s',
    load_assignment: { cluster_name: 'app', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
  };
}

function hcmValue(extra: Json = {}): Json {
  return {
    stat_prefix: 'l1', ...extra,
    route_config: { name: 'r', virtual_hosts: [{ name: 'vh', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'app' } }] }] },
    http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
  };
}

/** Listener l1 whose HCM comes inside an xds.type.v3.TypedStruct (as Istio sends extension configs). */
function typedStructListener(port: number, hcmExtra: Json): EncodedResource {
  const plain = toPlainMessage('envoy.config.listener.v3.Listener', {
    name: 'l1', address: { socket_address: { address: '127.0.0.1', port_value: port } }, filter_chains: [{ filters: [{ name: 'hcm' }] }],
  });
  const tsUrl = 'type.googleapis.com/xds.type.v3.TypedStruct';
  ((plain.filter_chains as Json[])[0].filters as Json[])[0].typed_config = { type_url: tsUrl, value: encode(tsUrl, { type_url: T.hcm, value: structPlain(hcmValue(hcmExtra)) }) };
  return { name: 'l1', resource: { type_url: TYPE_URL.listener, value: encode(TYPE_URL.listener, plain) } };
}

/** The app cluster with a field number its descriptor does not have (a newer control plane's field). */
function clusterWithUnknownField(port: number): EncodedResource {
  const any = encodeResource(appCluster(port));
  const extra = Buffer.from([0xc0, 0x3e, 0x01]); // field 1000, varint (tag 8000 = 0xc0 0x3e), value 1
  return { name: 'app', resource: { type_url: TYPE_URL.cluster, value: Buffer.concat([any.value, extra]) } };
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function nackFor(ads: TestAds, typeUrl: string): string | undefined {
  for (const s of ads.streams) for (const r of s.requests) if (r.type_url === typeUrl && r.error_detail?.message) return r.error_detail.message;
  return undefined;
}

describe('over xDS (Delta ADS)', () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend('app'); });
  after(() => cleanup(() => backend?.close()));

  test('a misspelled field in a TypedStruct is NACKed naming resource and field; the last good listener serves; unknown field numbers are counted', async (t) => {
    const ads = await startTestAds();
    let proxy: RunningProxy | undefined;
    t.after(() => cleanup(() => proxy?.stop(), () => ads.close()));
    let listenPort = 0;
    proxy = await startProxy((p) => {
      listenPort = p('l1');
      ads.set(TYPE_URL.cluster, [appCluster(backend.port)]);
      ads.setEncoded(TYPE_URL.listener, [typedStructListener(listenPort, { stream_idle_timeout: '30s' })]);
      return adsBootstrap(ads.port, true);
    }, { ports: ['l1'] });
    const url = `http://127.0.0.1:${listenPort}/`;
    await eventually('l1 to serve', async () => (await request(url)).status === 200);

    ads.setEncoded(TYPE_URL.listener, [typedStructListener(listenPort, { stream_idle_timout: '30s' })]);
    const nack = await eventually('the LDS NACK', async () => nackFor(ads, TYPE_URL.listener));
    assert.equal(nack, `l1: filter_chains[0].filters[0].typed_config.value.stream_idle_timout: unknown field of ${HCM_NAME}`);
    assert.equal(await proxy.stat('listener_manager.lds.update_rejected'), 1);
    const still = await request(url);
    assert.equal(still.status, 200, 'the last good listener keeps serving');
    assert.equal(still.text.length > 0, true);

    ads.setEncoded(TYPE_URL.cluster, [clusterWithUnknownField(backend.port)]);
    await eventually('server.dynamic_unknown_fields', async () => (await proxy!.stat('server.dynamic_unknown_fields')) === 1);
    assert.equal(nackFor(ads, TYPE_URL.cluster), undefined, 'an unknown field number is not a NACK by default');
    assert.match(proxy.stderr(), /unknown field number 1000 of envoy\.config\.cluster\.v3\.Cluster/);
    assert.equal((await request(url)).status, 200);
  });

  test('--reject-unknown-dynamic-fields: an unknown field number is a NACK naming it', async (t) => {
    const ads = await startTestAds();
    let proxy: RunningProxy | undefined;
    t.after(() => cleanup(() => proxy?.stop(), () => ads.close()));
    ads.set(TYPE_URL.listener, []);
    ads.set(TYPE_URL.cluster, [appCluster(backend.port)]);
    proxy = await startProxy(() => adsBootstrap(ads.port, true), { args: ['--reject-unknown-dynamic-fields'] });
    ads.setEncoded(TYPE_URL.cluster, [clusterWithUnknownField(backend.port)]);
    const nack = await eventually('the CDS NACK', async () => nackFor(ads, TYPE_URL.cluster));
    assert.equal(nack, 'app: unknown field number 1000 of envoy.config.cluster.v3.Cluster');
    assert.equal(await proxy.stat('server.dynamic_unknown_fields'), 0);
    assert.equal(await proxy.stat('cluster_manager.cds.update_rejected'), 1);
    const info = JSON.parse((await proxy.admin('/server_info')).body) as { command_line_options: Json };
    assert.equal(info.command_line_options.reject_unknown_dynamic_fields, true);
  });
});
