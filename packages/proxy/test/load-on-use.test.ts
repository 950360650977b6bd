/**
 * Load on use (issue 13: an idle proxy holds only what its config uses): the filter registries load a
 * filter's module only when a config names it, and their keys agree with the modules they load; a
 * static skua-proxy loads neither gRPC (ADS, ext_authz), the xDS decoders and protobufjs, nor
 * pilot-agent's parts (prom-client); once its compile cache is warm, it does not load type
 * stripping's compiler (amaro).
 */
import { test } from 'node:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { HTTP_FILTER_ENTRIES, HTTP_FILTERS_BY_NAME, HTTP_FILTERS_BY_URL } from '../src/filters/http/registry.ts';
import { NETWORK_FILTER_ENTRIES, NETWORK_FILTERS_BY_NAME, NETWORK_FILTERS_BY_URL, NETWORK_TERMINAL_ENTRIES } from '../src/filters/network/registry.ts';
import { HCM_TERMINAL } from '../src/filters/network/http_connection_manager/terminal.ts';
import { TCP_PROXY_TERMINAL } from '../src/filters/network/tcp_proxy/terminal.ts';
import { networkTerminal } from '../src/listener/terminal.ts';

const SRC = new URL('../src/', import.meta.url).href;

test('every lazy HTTP filter entry loads the extension its keys name', () => {
  assert.equal(HTTP_FILTER_ENTRIES.length, 14);
  for (const e of HTTP_FILTER_ENTRIES) {
    const ext = HTTP_FILTERS_BY_URL.get(e.typeUrl);
    assert.equal(ext?.typeUrl, e.typeUrl, e.typeUrl);
    assert.equal(ext?.legacyName, e.legacyName, e.typeUrl);
    assert.equal(HTTP_FILTERS_BY_NAME.get(e.legacyName), ext, 'same object by name and by URL');
  }
  assert.equal(HTTP_FILTERS_BY_URL.get('type.googleapis.com/no.such.Filter'), undefined);
});

test('every lazy network filter entry loads the extension its keys name', () => {
  assert.equal(NETWORK_FILTER_ENTRIES.length, 5);
  for (const e of NETWORK_FILTER_ENTRIES) {
    const ext = NETWORK_FILTERS_BY_URL.get(e.typeUrl);
    assert.equal(ext?.typeUrl, e.typeUrl, e.typeUrl);
    assert.equal(ext?.legacyName, e.legacyName, e.typeUrl);
    assert.equal(NETWORK_FILTERS_BY_NAME.get(e.legacyName), ext, 'same object by name and by URL');
  }
  assert.equal(NETWORK_FILTERS_BY_NAME.get('no.such.filter'), undefined);
});

test('the lazily registered terminals carry the keys of the modules they load (HCM, tcp_proxy)', () => {
  assert.deepEqual(NETWORK_TERMINAL_ENTRIES.map((e) => [e.typeUrl, e.legacyName]), [HCM_TERMINAL, TCP_PROXY_TERMINAL].map((e) => [e.typeUrl, e.legacyName]));
  for (const e of NETWORK_TERMINAL_ENTRIES) {
    assert.equal(networkTerminal(e.typeUrl), e, 'registered by type URL');
    assert.equal(networkTerminal(e.legacyName!), e, 'and by legacy name');
  }
});

test("a listener of a program's own terminal (ztunnel's pods) loads neither HCM nor tcp_proxy nor the upstream stack", () => {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, ctx, next) { loaded.push(url); return next(url, ctx); } });
    const { plainListener } = await import(${JSON.stringify(`${SRC}api/listener.ts`)});
    const { ActiveListener } = await import(${JSON.stringify(`${SRC}api/listener.ts`)});
    const { StatsStore } = await import(${JSON.stringify(`${SRC}api/core.ts`)});
    const l = new ActiveListener(plainListener({ name: 'pod', address: '127.0.0.1', port: 0, statPrefix: 'pod',
      terminal: { kind: 'mine', live: () => ({ onConnection: (s) => s.destroy() }) } }), undefined, new StatsStore());
    await l.listen(false);
    l.close();
    process.stdout.write(JSON.stringify(loaded));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: new URL('..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'pipe'] });
  const loaded = (JSON.parse(out) as string[]).filter((u) => u.startsWith(SRC)).map((u) => u.slice(SRC.length));
  assert.ok(loaded.includes('listener/active.ts'), 'the listener is loaded (sanity)');
  for (const dir of ['http/', 'upstream/', 'filters/network/http_connection_manager/', 'filters/network/tcp_proxy/']) {
    assert.deepEqual(loaded.filter((u) => u.startsWith(dir)), [], `${dir} not loaded`);
  }
});

/** In a fresh process: compile `yaml` as a bootstrap and list the modules under src/ that were loaded. */
function modulesLoadedCompiling(yaml: string): string[] {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, ctx, next) { loaded.push(url); return next(url, ctx); } });
    const { compileBootstrap } = await import(${JSON.stringify(`${SRC}config/bootstrap.ts`)});
    const { parse } = await import('yaml');
    compileBootstrap(parse(${JSON.stringify(yaml)}));
    process.stdout.write(JSON.stringify(loaded));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: new URL('..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'pipe'] });
  return (JSON.parse(out) as string[]).filter((u) => u.startsWith(SRC)).map((u) => u.slice(SRC.length));
}

const hcm = (httpFilters: string): string => `
static_resources:
  listeners:
  - name: l
    address: { socket_address: { address: 127.0.0.1, port_value: 1 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: x
          route_config: { virtual_hosts: [{ name: v, domains: ["*"], routes: [{ match: { prefix: "/" }, direct_response: { status: 200 } }] }] }
          http_filters:${httpFilters}
          - { name: envoy.filters.http.router, typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router } }
`;

test('a config with only the router loads no HTTP or network filter module', () => {
  const loaded = modulesLoadedCompiling(hcm(''));
  assert.ok(loaded.includes('filters/network/http_connection_manager/config.ts'), 'the HCM is loaded (sanity)');
  for (const dir of ['ext_authz', 'jwt_authn', 'cors', 'fault', 'compressor', 'rbac', 'peer_metadata', 'istio_stats', 'metadata_exchange']) {
    assert.deepEqual(loaded.filter((u) => u.startsWith(`filters/http/${dir}/`)), [], `filters/http/${dir} not loaded`);
  }
  for (const file of ['rbac/config.ts', 'istio_authn/config.ts', 'metadata_exchange/filter.ts', 'set_filter_state/config.ts']) {
    assert.ok(!loaded.includes(`filters/network/${file}`), `filters/network/${file} not loaded`);
  }
});

test('a config naming a filter loads that filter and not the others', () => {
  const loaded = modulesLoadedCompiling(hcm(`
          - { name: envoy.filters.http.cors, typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors } }`));
  assert.ok(loaded.includes('filters/http/cors/config.ts'));
  assert.deepEqual(loaded.filter((u) => u.startsWith('filters/http/ext_authz/') || u.startsWith('filters/http/jwt_authn/')), []);
});

const ADS_BOOTSTRAP = `
node: { id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", cluster: a.ns }
dynamic_resources:
  ads_config: { api_type: GRPC, transport_api_version: V3, grpc_services: [{ envoy_grpc: { cluster_name: xds-grpc } }] }
  cds_config: { ads: {}, resource_api_version: V3 }
  lds_config: { ads: {}, resource_api_version: V3 }
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: xds-grpc
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 15010 } } } }] }]
`;

test("an ADS bootstrap's field check reads names only: no protobufjs reflection for the Bootstrap's ~60 imports", () => {
  const loaded = modulesLoadedCompiling(ADS_BOOTSTRAP);
  assert.ok(loaded.includes('config/proto-schema.ts'), 'the field-name check is loaded (sanity)');
  assert.deepEqual(loaded.filter((u) => u === 'xds/protos.ts' || u === 'config/schema-protobufjs.ts'), []);
  // The check still refuses an unknown field of a dynamic bootstrap, naming it.
  assert.throws(() => modulesLoadedCompiling(ADS_BOOTSTRAP.replace('  cds_config:', '  cds_confg: {}\n  cds_config:')), /cds_confg/);
});

test('skua-proxy over a static bootstrap loads no gRPC, ADS client, xDS decoder, protobufjs or pilot-agent module', () => {
  const hook = `import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, ctx, next) { loaded.push(url); return next(url, ctx); } });
    process.on('exit', () => { process.stderr.write('LOADED ' + JSON.stringify(loaded) + '\\n'); });`;
  const main = new URL('../src/main.ts', import.meta.url).pathname;
  const run = spawnSync(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(hook)}`, main, '--mode', 'validate', '--config-yaml', hcm('')], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /OK/);
  const line = run.stderr.split('\n').find((l) => l.startsWith('LOADED '));
  assert.ok(line, run.stderr);
  const loaded = JSON.parse(line.slice('LOADED '.length)) as string[];
  assert.ok(loaded.some((u) => u.endsWith('/src/server.ts')), 'the server module is loaded (sanity)');
  assert.ok(loaded.some((u) => u.endsWith('/src/config/proto-schema.ts')), 'the field-name check is loaded (sanity)');
  // protobufjs/src/common.js (its well-known types, no dependencies) is the one file of protobufjs it reads.
  for (const part of ['@grpc/grpc-js', 'prom-client', '/src/xds/ads-client.ts', '/src/agent/run-agent.ts', '/src/server-xds.ts',
    '/src/xds/dynamic-config.ts', '/src/xds/discovery.ts', '/src/xds/decode.ts', '/src/xds/protos.ts', '/src/config/schema-protobufjs.ts',
    'protobufjs/index.js', 'protobufjs/src/index-minimal.js', '/long/']) {
    assert.deepEqual(loaded.filter((u) => u.includes(part)), [], `${part} not loaded`);
  }
});

test('bin/skua-proxy.js keeps a compile cache: a second start does not load the type-stripping compiler', () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-cc-'));
  try {
    const hook = `process.on('exit', () => { process.stderr.write('AMARO ' + process.moduleLoadList.some((m) => m.includes('amaro')) + '\\n'); });`;
    const bin = new URL('../bin/skua-proxy.js', import.meta.url).pathname;
    // The default cache directory is <tmpdir>/node-compile-cache: TMPDIR puts it in this test's directory.
    const env = { ...process.env, TMPDIR: dir, NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined };
    const start = (): string => {
      const run = spawnSync(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(hook)}`, bin, '--mode', 'validate', '--config-yaml', hcm('')], { encoding: 'utf8', env });
      assert.equal(run.status, 0, run.stderr);
      return run.stderr;
    };
    assert.match(start(), /AMARO true/, 'the first start strips types');
    assert.ok(readdirSync(join(dir, 'node-compile-cache')).length > 0, 'the cache was written');
    assert.match(start(), /AMARO false/, 'the second start reads the cache');
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test("warm-compile-cache.js fills the cache an ADS sidecar's start reads: V8 accepts every entry it finds", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-cc-ads-'));
  try {
    const bin = new URL('../bin/', import.meta.url).pathname;
    const env = { ...process.env, NODE_COMPILE_CACHE: join(dir, 'cache'), NODE_DISABLE_COMPILE_CACHE: undefined, NODE_OPTIONS: '--max-semi-space-size=4' };
    execFileSync(process.execPath, [join(bin, 'warm-compile-cache.js')], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    // No control plane answers: the start loads the ADS client, the xDS decoders and protobufjs, then waits.
    const file = join(dir, 'ads.yaml');
    writeFileSync(file, ADS_BOOTSTRAP.replace('port_value: 15010', 'port_value: 1'));
    const proxy = spawn(process.execPath, [join(bin, 'skua-proxy.js'), '-c', file, '-l', 'warn'], { env: { ...env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    proxy.stderr.setEncoding('utf8');
    proxy.stderr.on('data', (d: string) => { log += d; });
    try {
      const deadline = Date.now() + 30_000;
      while (!/V8 code cache for ESM \S+\/src\/xds\/decode\.ts was/.test(log)) {
        assert.ok(Date.now() < deadline && proxy.exitCode === null, `the ADS start did not load xds/decode.ts:\n${log.slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      proxy.kill('SIGKILL');
    }
    const rejected = log.split('\n').filter((l) => l.includes(' was rejected'));
    const accepted = log.split('\n').filter((l) => l.includes(' was accepted'));
    assert.ok(accepted.length > 150, `${accepted.length} entries accepted`);
    assert.deepEqual(rejected, [], 'entries V8 rejected (a V8 flag changed at run time changes the key)');
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('the config fuzz target imports every lazily loaded filter module (Jazzer cannot require .ts)', () => {
  const target = readFileSync(new URL('../../../fuzz/targets/config.ts', import.meta.url), 'utf8');
  const imported = target.match(/^import '\.\.\/\.\.\/packages\/proxy\/src\/filters\/[^']+';$/gm) ?? [];
  assert.equal(imported.length, HTTP_FILTER_ENTRIES.length + NETWORK_FILTER_ENTRIES.length + NETWORK_TERMINAL_ENTRIES.length);
});

test("no module imports node:http's ESM namespace, which loads Node's bundled undici and web streams", () => {
  // Static: a value import from 'node:http' anywhere in the packages' sources (types are erased).
  const offenders: string[] = [];
  const walk = (dir: URL): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const u = new URL(e.name + (e.isDirectory() ? '/' : ''), dir);
      if (e.isDirectory()) walk(u);
      else if (e.name.endsWith('.ts') && /^import (?!type )[^;]*from 'node:http';/m.test(readFileSync(u, 'utf8'))) offenders.push(u.pathname);
    }
  };
  for (const pkg of ['proxy', 'ztunnel', 'waypoint', 'controlplane']) walk(new URL(`../../${pkg}/src/`, import.meta.url));
  assert.deepEqual(offenders, [], 'import from src/core/node-http.ts instead');
  // At run time: the server, admin, pilot-agent and HTTP/1.1 modules together.
  const script = `
    for (const m of ['server.ts', 'admin/server.ts', 'agent/run-agent.ts', 'agent/status-server.ts', 'agent/app-probers.ts', 'http/h1/server.ts']) await import(${JSON.stringify(SRC)} + m);
    process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => /deps\\/undici|webstreams/.test(m))));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: new URL('..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'pipe'] });
  assert.deepEqual(JSON.parse(out), []);
});
