import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileListener } from '../src/listener/config.ts';
import { compileCluster } from '../src/upstream/cluster-config.ts';
import { compileBootstrap } from '../src/config/bootstrap.ts';
import { compileBootstrapExtensions } from '../src/config/bootstrap-extensions.ts';
import { restoreInternalAddresses } from '../src/listener/internal-dst.ts';
import { internalPair } from '../src/listener/internal-socket.ts';
import { connectInternal, registerInternalListener, unregisterInternalListener } from '../src/listener/internal.ts';
import { FilterStateObject, TunnelAuthority, sharedWithUpstream, ORIGINAL_DST_ADDRESS_KEY } from '../src/core/filter-state.ts';
import { parseBaggage } from '../src/filters/http/connect_baggage/config.ts';

type Json = Record<string, unknown>;

const FIXTURES = '../../../../shared/fixtures/';
const DUMPS = {
  sidecar: 'istio-istio/istioctl/pkg/authz/testdata/configdump.yaml',
  waypoint: 'istio-istio/istioctl/pkg/writer/compare/testdata/configdump.json',
  waypoint2: 'istio-istio/istioctl/pkg/proxyconfig/testdata/config_dump.json',
};
const fixture = (p: string): string => fileURLToPath(new URL(FIXTURES + p, import.meta.url));

/** What this work built: a listener or cluster mentioning one of these is in the table. */
const MINE = ['internal_listener', 'set_internal_dst_address', 'io.istio.network.authn', 'io.istio.http.connect_authority', 'io.istio.http.connect_baggage',
  'set_filter_state', 'InternalUpstreamTransport', 'envoy_internal_address', 'tunneling_config'];
/**
 * Refusals that belong to other work (RBAC, ext_authz, istio stats / peer metadata, tracing, XFCC, SDS, ADS/EDS,
 * ...; peer_metadata and the filter_chain_matcher are built now, so they must compile). "a server certificate is required" is connect_terminate's SDS-named certificate.
 */
const NOT_MINE = /envoy\.filters\.http\.rbac|rbac\.v3|stats\.PluginConfig|MetadataExchange|ext_authz|grpc_stats|tracing|forward_client_cert_details|sds|EDS clusters need dynamic_resources|eds_cluster_config|rds|request_id_extension|normalize_path|a server certificate is required/i;

function dumpResources(file: string): { listeners: Json[]; clusters: Json[] } {
  const dump = JSON.parse(readFileSync(fixture(file), 'utf8')) as { configs: Json[] };
  const listeners: Json[] = [], clusters: Json[] = [];
  for (const c of dump.configs) {
    for (const dl of (c.dynamic_listeners as Json[] | undefined) ?? []) {
      const l = (dl.active_state as Json | undefined)?.listener as Json | undefined;
      if (l) listeners.push(l);
    }
    for (const dc of [...((c.dynamic_active_clusters as Json[] | undefined) ?? []), ...((c.static_clusters as Json[] | undefined) ?? [])]) {
      if (dc.cluster) clusters.push(dc.cluster as Json);
    }
  }
  return { listeners, clusters };
}

function mine(o: Json): boolean {
  const s = JSON.stringify(o);
  return MINE.some((k) => s.includes(k));
}

function outcome(fn: () => unknown): string {
  try { fn(); return 'OK'; } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.message;
  }
}

describe('istiod dumps: listeners and clusters using internal listeners / HBONE extensions', () => {
  const rows: string[] = [];
  for (const [label, file] of Object.entries(DUMPS)) {
    const { listeners, clusters } = dumpResources(file);
    test(`${label}: each compiles or fails only on work outside this change`, () => {
      const results: Array<[string, string]> = [];
      for (const [i, l] of listeners.entries()) {
        if (mine(l)) results.push([`listener ${String(l.name)}`, outcome(() => compileListener(new Msg(l, 'listener'), i))]);
      }
      for (const c of clusters) {
        if (mine(c)) results.push([`cluster ${String(c.name)}`, outcome(() => compileCluster(new Msg(c, 'cluster')))]);
      }
      for (const [what, r] of results) rows.push(`| ${label} | ${what} | ${r} |`);
      assert.ok(results.length >= 2, `${label}: found ${results.length}`);
      for (const [what, r] of results) if (r !== 'OK') assert.match(r, NOT_MINE, `${what} failed on this work: ${r}`);
    });
  }

  test('the waypoint EDS cluster compiles once its endpoints come inline (what EDS will deliver)', () => {
    const { clusters } = dumpResources(DUMPS.waypoint2);
    const dump = JSON.parse(readFileSync(fixture(DUMPS.waypoint2), 'utf8')) as { configs: Json[] };
    const eds = dump.configs.find((c) => String(c['@type']).endsWith('EndpointsConfigDump'))!;
    const cla = ((eds.dynamic_endpoint_configs as Json[])[0].endpoint_config) as Json;
    const src = clusters.find((c) => JSON.stringify(c).includes('InternalUpstreamTransport'))!;
    const { eds_cluster_config: _eds, ...rest } = src;
    const cfg = compileCluster(new Msg({ ...rest, type: 'STATIC', load_assignment: { ...cla, '@type': undefined } }, 'cluster'));
    assert.deepEqual(cfg.internalUpstream?.passthrough, [{ kind: 'host', name: 'envoy.filters.listener.original_dst' }]);
    assert.deepEqual(cfg.endpoints[0].internal, { listener: 'connect_originate', endpointId: '192.168.195.248:800' });
    assert.deepEqual(cfg.endpoints[0].metadata?.['envoy.filters.listener.original_dst'], { local: '192.168.195.248:800' });
    rows.push(`| waypoint2 | cluster ${String(src.name)} (EDS endpoints inline) | OK |`);
  });

  test('table', () => { console.log(['| dump | resource | compile |', '|---|---|---|', ...rows].join('\n')); });
});

function listenerError(l: Json): ConfigError {
  try { compileListener(new Msg(l, 'listener'), 0); } catch (e) { if (e instanceof ConfigError) return e; throw e; }
  assert.fail('expected a ConfigError');
}
function clusterError(c: Json): ConfigError {
  try { compileCluster(new Msg(c, 'cluster')); } catch (e) { if (e instanceof ConfigError) return e; throw e; }
  assert.fail('expected a ConfigError');
}

const TS = 'type.googleapis.com/udpa.type.v1.TypedStruct';
const tcp = { name: 'tcp', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: 's', cluster: 'c' } };
const internalEndpoint = (name: string): Json => ({ endpoint: { address: { envoy_internal_address: { server_listener_name: name } } } });

describe('bad configs name the field', () => {
  test('an internal listener with a socket address', () => {
    const e = listenerError({ name: 'x', internal_listener: {}, address: { socket_address: { address: '127.0.0.1', port_value: 1 } }, filter_chains: [{ filters: [tcp] }] });
    assert.equal(e.path, 'listener.address');
  });
  test('internal_listener fields Skua does not know', () => {
    assert.equal(listenerError({ name: 'x', internal_listener: { bogus: 1 }, filter_chains: [{ filters: [tcp] }] }).path, 'listener.internal_listener.bogus');
  });
  test('set_filter_state with a key that has no object factory', () => {
    const sfs = { name: 'sfs', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config',
      on_new_connection: [{ object_key: 'my.key', format_string: { text_format_source: { inline_string: 'x' } } }] } };
    const e = listenerError({ name: 'x', address: { socket_address: { address: '127.0.0.1', port_value: 1 } }, filter_chains: [{ filters: [sfs, tcp] }] });
    assert.equal(e.path, 'listener.filter_chains[0].filters[0].typed_config.on_new_connection[0].object_key');
    assert.match(e.message, /does not have an object factory/);
  });
  test('set_filter_state with an unknown shared_with_upstream value', () => {
    const sfs = { name: 'sfs', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config',
      on_new_connection: [{ object_key: 'k', factory_key: 'envoy.string', shared_with_upstream: 'ALWAYS', format_string: { text_format: '%DOWNSTREAM_PEER_URI_SAN%' } }] } };
    const e = listenerError({ name: 'x', address: { socket_address: { address: '127.0.0.1', port_value: 1 } }, filter_chains: [{ filters: [sfs, tcp] }] });
    assert.equal(e.path, 'listener.filter_chains[0].filters[0].typed_config.on_new_connection[0].shared_with_upstream');
  });
  test('a connect_authority per-route port out of range', () => {
    const hcm = { name: 'hcm', typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager', stat_prefix: 'h',
      route_config: { virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ match: { connect_matcher: {} }, route: { cluster: 'c' },
        typed_per_filter_config: { ca: { '@type': TS, type_url: 'type.googleapis.com/io.istio.http.connect_authority.Config', value: { enabled: true, port: 70000 } } } }] }] },
      http_filters: [{ name: 'ca', typed_config: { '@type': TS, type_url: 'type.googleapis.com/io.istio.http.connect_authority.Config' } },
        { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }],
    } };
    const e = listenerError({ name: 'x', address: { socket_address: { address: '127.0.0.1', port_value: 1 } }, filter_chains: [{ filters: [hcm] }] });
    assert.equal(e.path, 'listener.filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].typed_per_filter_config.ca.value.port');
  });
  test('internal_upstream passthrough of request metadata (it never reaches a connection)', () => {
    const e = clusterError({ name: 'c', load_assignment: { endpoints: [{ lb_endpoints: [internalEndpoint('l')] }] }, transport_socket: { name: 'iu', typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport',
      passthrough_metadata: [{ kind: { request: {} }, name: 'x' }] } } });
    assert.equal(e.path, 'cluster.transport_socket.typed_config.passthrough_metadata[0].kind');
  });
  test('internal endpoints in a DNS cluster', () => {
    const e = clusterError({ name: 'c', type: 'STRICT_DNS', load_assignment: { endpoints: [{ lb_endpoints: [internalEndpoint('l')] }] } });
    assert.equal(e.path, 'cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.envoy_internal_address');
  });
  test('an internal address where a socket is bound', () => {
    assert.equal(listenerError({ name: 'x', address: { envoy_internal_address: { server_listener_name: 'x' } }, filter_chains: [{ filters: [tcp] }] }).path, 'listener.address.envoy_internal_address');
  });
  test('bootstrap: internal listeners without the extension, and a bad buffer_size_kb', () => {
    const l = { name: 'x', internal_listener: {}, filter_chains: [{ filters: [tcp] }] };
    const c = { name: 'c', load_assignment: { endpoints: [{ lb_endpoints: [internalEndpoint('x')] }] } };
    assert.throws(() => compileBootstrap({ static_resources: { listeners: [l], clusters: [c] } }), (e: unknown) => e instanceof ConfigError && e.path === 'static_resources.listeners[0].internal_listener');
    const ext = { name: 'envoy.bootstrap.internal_listener', typed_config: { '@type': TS, type_url: 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener', value: { buffer_size_kb: 0 } } };
    assert.throws(() => compileBootstrap({ bootstrap_extensions: [ext], static_resources: { listeners: [l], clusters: [c] } }),
      (e: unknown) => e instanceof ConfigError && e.path === 'bootstrap_extensions[0].typed_config.value.buffer_size_kb');
    const ok = compileBootstrap({ bootstrap_extensions: [{ ...ext, typed_config: { ...ext.typed_config, value: { buffer_size_kb: 64 } } }], static_resources: { listeners: [l], clusters: [c] } });
    assert.equal(ok.extensions.internalListener?.bufferBytes, 64 * 1024);
  });
});

describe('set_internal_dst_address / original_dst on internal connections', () => {
  const cfg = (over: Json): ReturnType<typeof compileListener> => compileListener(new Msg({ name: 'main_internal', internal_listener: {}, filter_chains: [{ filters: [tcp] }], ...over }, 'l'), 0);
  const setDst = { listener_filters: [{ name: 'set_dst_address', typed_config: { '@type': TS, type_url: 'type.googleapis.com/istio.set_internal_dst_address.v1.Config' } }] };
  const origDst = { listener_filters: [{ name: 'envoy.filters.listener.original_dst', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst' } }] };
  const sock = internalPair(1024, 'envoy://main_internal/', 'envoy://internal_client_address/').server;

  test('tunnel metadata: destination becomes the local address, address the ORIGINAL_DST override', () => {
    const r = restoreInternalAddresses(cfg(setDst), sock, { endpointId: '', filterState: undefined, dynamicMetadata: { tunnel: { destination: '10.0.0.5:80', address: '10.0.0.5:15008' } } });
    assert.deepEqual(r.local, { address: '10.0.0.5', port: 80 });
    assert.equal(String(r.filterState?.get(ORIGINAL_DST_ADDRESS_KEY)), '10.0.0.5:15008');
  });
  test('the CONNECT authority connect_authority stored, with its port override', () => {
    const fs = new Map<string, unknown>([['istio.set_internal_dst_address', new TunnelAuthority('[fd00::5]:8080', 15008, 'TRANSITIVE')]]);
    const r = restoreInternalAddresses(cfg(setDst), sock, { endpointId: '', filterState: fs, dynamicMetadata: undefined });
    assert.deepEqual(r.local, { address: 'fd00::5', port: 8080 });
    assert.equal(String(r.filterState?.get(ORIGINAL_DST_ADDRESS_KEY)), '[fd00::5]:15008');
    assert.equal(fs.has(ORIGINAL_DST_ADDRESS_KEY), false, 'the upstream side\'s map is not modified');
  });
  test('original_dst reads metadata `local`, else filter state local_ip / remote_ip; junk is ignored', () => {
    let r = restoreInternalAddresses(cfg(origDst), sock, { endpointId: '', filterState: undefined, dynamicMetadata: { 'envoy.filters.listener.original_dst': { local: '192.168.195.248:800' } } });
    assert.deepEqual(r.local, { address: '192.168.195.248', port: 800 });
    const fs = new Map<string, unknown>([['envoy.filters.listener.original_dst.local_ip', new FilterStateObject('10.1.1.1:9080')], ['envoy.filters.listener.original_dst.remote_ip', new FilterStateObject('10.2.2.2:5555')]]);
    r = restoreInternalAddresses(cfg(origDst), sock, { endpointId: '', filterState: fs, dynamicMetadata: undefined });
    assert.deepEqual([r.local, r.remote], [{ address: '10.1.1.1', port: 9080 }, { address: '10.2.2.2', port: 5555 }]);
    r = restoreInternalAddresses(cfg(origDst), sock, { endpointId: '', filterState: undefined, dynamicMetadata: { 'envoy.filters.listener.original_dst': { local: 'not-an-address' } } });
    assert.equal(r.local.address, 'envoy://main_internal/');
  });
  test('sharing: ONCE objects arrive unshared, TRANSITIVE stay shared, NONE stay home', () => {
    const out = sharedWithUpstream(new Map<string, unknown>([['a', new FilterStateObject('1', 'ONCE')], ['b', new FilterStateObject('2', 'NONE')]]),
      new Map<string, unknown>([['c', new FilterStateObject('3', 'TRANSITIVE')]]));
    assert.deepEqual([...out!.keys()], ['a', 'c']);
    assert.equal((out!.get('a') as FilterStateObject).shared, 'NONE');
    assert.equal((out!.get('c') as FilterStateObject).shared, 'TRANSITIVE');
  });
  test('baggage → workload', () => {
    assert.deepEqual(parseBaggage('k8s.cluster.name=Kubernetes,k8s.namespace.name=default,k8s.deployment.name=httpbin,service.name=httpbin,service.version=v1;p=1'), {
      cluster: 'Kubernetes', namespace: 'default', workloadName: 'httpbin', workloadType: 'deployment', canonicalService: 'httpbin', canonicalRevision: 'v1', appName: '', appVersion: '',
    });
  });
});

describe('the in-process connection pair', () => {
  test('a writer waits while the reader does not read; bytes and EOF arrive in order', async () => {
    const { client, server } = internalPair(16 * 1024, 'envoy://l/', 'envoy://c/');
    client.markConnected();
    server.pause();
    let accepted = 0;
    const chunk = Buffer.alloc(4096, 1);
    while (client.write(chunk)) accepted += chunk.length;
    // The reader's buffer plus the writer's own: nothing unbounded.
    assert.ok(accepted <= 32 * 1024, `accepted ${accepted}`);
    client.end();
    let got = 0;
    server.on('data', (c: Buffer) => { got += c.length; });
    await new Promise<void>((r) => { server.once('end', () => r()); server.resume(); });
    assert.equal(got, accepted + chunk.length);
  });
  test('destroy is a reset for the peer; a missing listener refuses the connection', async () => {
    const { client, server } = internalPair(1024, 'envoy://l/', 'envoy://c/');
    const closed = new Promise<void>((r) => server.once('close', () => r()));
    client.destroy();
    await closed;
    assert.equal(server.destroyed, true);
    const c = connectInternal('nobody', { endpointId: '', filterState: undefined, dynamicMetadata: undefined });
    const err = await new Promise<Error & { code?: string }>((r) => c.once('error', r));
    assert.equal(err.code, 'ECONNREFUSED');
  });
  test('the registry hands connections to the registered accept and forgets it on unregister', async () => {
    const accept = (s: import('../src/listener/internal-socket.ts').InternalSocket): void => { s.end('hi'); };
    registerInternalListener('reg', accept);
    const c = connectInternal('reg', { endpointId: 'e1', filterState: undefined, dynamicMetadata: undefined });
    const got = await new Promise<string>((r) => { let s = ''; c.on('data', (d: Buffer) => { s += d; }); c.on('end', () => r(s)); });
    assert.equal(got, 'hi');
    unregisterInternalListener('reg', accept);
    const c2 = connectInternal('reg', { endpointId: '', filterState: undefined, dynamicMetadata: undefined });
    assert.equal((await new Promise<Error & { code?: string }>((r) => c2.once('error', r))).code, 'ECONNREFUSED');
  });
});

describe('bootstraps through the CLI (--mode validate)', () => {
  const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
  const validate = (file: string): Promise<{ code: number; out: string }> => new Promise((resolve) => {
    execFile(process.execPath, [main, '--mode', 'validate', '-c', fixture(file)], { timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err as { code?: number }).code ?? 1 : 0, out: stdout + stderr });
    });
  });
  test('Envoy\'s internal_listener_proxy.yaml is OK', async () => {
    const r = await validate('envoyproxy-envoy/configs/internal_listener_proxy.yaml');
    assert.equal(r.code, 0, r.out);
  });
  for (const name of ['default', 'ambient']) {
    test(`istio ${name}_golden.json validates whole (bootstrap extensions, pipe clusters, compressors)`, async () => {
      const file = `istio-istio/pkg/bootstrap/testdata/${name}_golden.json`;
      const r = await validate(file);
      console.log(`${name}_golden.json via CLI: ${r.out.trim()}`);
      assert.equal(r.code, 0, r.out);
      // The bootstrap_extensions list as istiod writes it: internal listeners, and for ambient WDS over ADS.
      const raw = JSON.parse(readFileSync(fixture(file), 'utf8')) as Json;
      const exts = raw.bootstrap_extensions as Json[];
      assert.deepEqual(compileBootstrapExtensions(exts.map((e, i) => new Msg(e, `bootstrap_extensions[${i}]`))), {
        internalListener: { bufferBytes: 64 * 1024 },
        workloadDiscovery: name === 'ambient' ? { path: 'bootstrap_extensions[0].typed_config' } : undefined,
      });
    });
  }
});
