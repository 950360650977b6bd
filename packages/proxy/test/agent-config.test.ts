// pilot-agent's inputs besides the node: ProxyConfig layering, downward-API files, the command
// line, the rendered bootstrap (checked against Istio's golden and our bootstrap compiler), and
// the xDS credentials.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { constructProxyConfig, formatDuration, parseProxyConfig, proxyConfigProtoJson } from '../src/agent/proxy-config.ts';
import { parseDownwardApi, unquoteGo } from '../src/agent/pod-info.ts';
import { envoyLogLevel, parsePilotProxyArgs, parsePilotWaitArgs } from '../src/agent/pilot-cli.ts';
import { agentSettings, pilotSan } from '../src/agent/agent-settings.ts';
import { renderBootstrap } from '../src/agent/bootstrap-render.ts';
import { xdsHeaders } from '../src/agent/xds-credentials.ts';
import { compileBootstrap } from '../src/config/bootstrap.ts';
import { ConfigError } from '../src/core/errors.ts';
import { UsageError } from '../src/agent/cli.ts';
import { normalizeKeys } from '../src/config/normalize.ts';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const golden = JSON.parse(readFileSync(new URL('../../../../shared/fixtures/istio-istio/pkg/bootstrap/testdata/default_golden.json', import.meta.url), 'utf8')) as Json;

const base = { serviceCluster: 'istio-proxy', concurrency: 0, sidecar: true };

describe('ProxyConfig', () => {
  test('defaults (mesh.DefaultProxyConfig) with --serviceCluster', () => {
    const pc = constructProxyConfig(base);
    assert.equal(pc.discoveryAddress, 'istiod.istio-system.svc:15012');
    assert.equal(pc.controlPlaneAuthPolicy, 'MUTUAL_TLS');
    assert.equal(pc.concurrency, 2);
    assert.equal(pc.drainDuration, '45s');
    assert.equal(constructProxyConfig({ ...base, sidecar: false }).concurrency, undefined, 'gateways: one worker per core');
  });
  test('mesh file < PROXY_CONFIG < annotation; whole fields replace, proxyMetadata merges', () => {
    const pc = constructProxyConfig({
      ...base,
      meshConfig: 'defaultConfig:\n  discoveryAddress: mesh:15012\n  tracing: {zipkin: {address: z:9411}}\n  proxyMetadata: {A: mesh, B: mesh}\n',
      proxyConfigEnv: '{"discoveryAddress":"env:15012","proxyMetadata":{"B":"env"},"tracing":{"sampling":5},"holdApplicationUntilProxyStarts":true}',
      annotation: 'proxy_metadata:\n  C: anno\nconcurrency: 4\n',
    });
    assert.equal(pc.discoveryAddress, 'env:15012');
    assert.deepEqual(pc.proxyMetadata, { A: 'mesh', B: 'env', C: 'anno' });
    assert.deepEqual(pc.tracing, { sampling: 5 });
    assert.equal(pc.concurrency, 4);
    assert.equal(constructProxyConfig({ ...base, proxyConfigEnv: 'concurrency: 4', concurrency: 1 }).concurrency, 1, '--concurrency wins');
  });
  test('pod annotations sidecar.istio.io/discoveryAddress and status.sidecar.istio.io/port apply last', () => {
    const pc = constructProxyConfig({ ...base, podAnnotations: { 'sidecar.istio.io/discoveryAddress': 'x:15010', 'status.sidecar.istio.io/port': '25020' } });
    assert.equal(pc.discoveryAddress, 'x:15010');
    assert.equal(pc.statusPort, 25020);
  });
  test('bad input names the source and field', () => {
    const err = (f: () => unknown, re: RegExp): void => { assert.throws(f, (e: Error) => e instanceof ConfigError && re.test(e.message)); };
    err(() => parseProxyConfig('{"discoveryAdress":"x:1"}', 'PROXY_CONFIG'), /^PROXY_CONFIG\.discoveryAdress: unknown ProxyConfig field/);
    err(() => parseProxyConfig('drainDuration: 5m', 'PROXY_CONFIG'), /^PROXY_CONFIG\.drainDuration: expected a duration/);
    err(() => parseProxyConfig('controlPlaneAuthPolicy: TLS', 'PROXY_CONFIG'), /one of NONE, MUTUAL_TLS, INHERIT/);
    err(() => parseProxyConfig('proxyAdminPort: x', 'PROXY_CONFIG'), /expected an integer/);
    err(() => parseProxyConfig('- a', 'PROXY_CONFIG'), /must be an object/);
    err(() => constructProxyConfig({ ...base, proxyConfigEnv: 'discoveryAddress: istiod' }), /^discoveryAddress: expected host:port/);
    err(() => constructProxyConfig({ ...base, proxyConfigEnv: 'statusPort: 15000' }), /^statusPort: status port must differ/);
  });
  test('proto-JSON output: snake_case in, camelCase out, defaults dropped, durations canonical', () => {
    const pc = parseProxyConfig('drain_duration: 1.5s\ncontrol_plane_auth_policy: NONE\ninterception_mode: TPROXY\nconfig_path: ""\nconcurrency: 0', 'x');
    assert.deepEqual(proxyConfigProtoJson(pc), { drainDuration: '1.500s', interceptionMode: 'TPROXY', concurrency: 0 });
    assert.equal(formatDuration(2e9), '2s');
    assert.equal(formatDuration(1_000_001), '0.001000001s');
  });
});

test('the bootstrap loader keeps node metadata verbatim (PROXY_CONFIG stays camelCase for istiod)', () => {
  const raw = { node: { metadata: { PROXY_CONFIG: { discoveryAddress: 'x:1', proxyMetadata: { fooBar: '1' } }, someKey: { innerKey: 1 } } },
    staticResources: { clusters: [{ name: 'c', metadata: { filterMetadata: { 'istio': { camelKey: { deepKey: 1 } } } },
      typedExtensionProtocolOptions: { k: { '@type': 't', explicitHttpConfig: {} } } }] } };
  assert.deepEqual(normalizeKeys(raw), {
    node: { metadata: { PROXY_CONFIG: { discoveryAddress: 'x:1', proxyMetadata: { fooBar: '1' } }, someKey: { innerKey: 1 } } },
    static_resources: { clusters: [{ name: 'c', metadata: { filter_metadata: { istio: { camelKey: { deepKey: 1 } } } },
      typed_extension_protocol_options: { k: { '@type': 't', explicit_http_config: {} } } }] },
  });
});

describe('downward API files', () => {
  test('key="Go-quoted value" lines', () => {
    assert.deepEqual(parseDownwardApi('app="productpage"\nsecurity.istio.io/tlsMode="istio"\nempty=""\n\nnote="a\\"b\\n\\u00e9\\x41\\101"\n'), {
      app: 'productpage', 'security.istio.io/tlsMode': 'istio', empty: '', note: 'a"b\néAA',
    });
    assert.equal(unquoteGo('`raw \\n`'), 'raw \\n');
    assert.equal(unquoteGo('unquoted'), undefined);
    assert.throws(() => parseDownwardApi('bad="\\q"'), /failed to unquote/);
  });
});

describe('pilot-agent command line', () => {
  test('the injector\'s istio-proxy args', () => {
    const a = parsePilotProxyArgs(['sidecar', '--domain', 'ns.svc.cluster.local', '--proxyLogLevel=warning', '--proxyComponentLogLevel=misc:error',
      '--log_output_level=default:info', '--concurrency', '2', '--serviceCluster', 'reviews.ns']);
    assert.equal(a.type, 'sidecar');
    assert.equal(a.domain, 'ns.svc.cluster.local');
    assert.equal(a.concurrency, 2);
    assert.equal(a.serviceCluster, 'reviews.ns');
    assert.equal(a.logOutputLevel, 'default:info');
    assert.deepEqual(a.unknownFlags, []);
  });
  test('unknown flags are tolerated (pilot-agent allows them); bad values are usage errors', () => {
    const a = parsePilotProxyArgs(['--future-flag', 'v', '--other=1', 'router', '--profiling']);
    assert.equal(a.type, 'router');
    assert.deepEqual(a.unknownFlags, ['future-flag', 'other']);
    assert.throws(() => parsePilotProxyArgs(['--concurrency', 'two']), UsageError);
    assert.throws(() => parsePilotProxyArgs(['sidecar', 'extra']), UsageError);
    assert.throws(() => parsePilotProxyArgs(['--domain']), UsageError);
  });
  test('wait defaults and log levels', () => {
    assert.deepEqual(parsePilotWaitArgs([]), { timeoutSeconds: 60, requestTimeoutMillis: 500, periodMillis: 500, url: 'http://localhost:15021/healthz/ready' });
    assert.equal(envoyLogLevel('warning,misc:error'), 'warning');
    assert.equal(envoyLogLevel('misc:error,debug'), 'debug');
  });
});

describe('agent settings and the rendered bootstrap', () => {
  let dir: string;
  const cwd = process.cwd();
  const args = (extra: string[] = []) => parsePilotProxyArgs(['sidecar', '--meshConfig', './no-mesh', ...extra]);
  const env = { POD_NAME: 'productpage-v1-1', POD_NAMESPACE: 'default', INSTANCE_IP: '10.1.1.1', SERVICE_ACCOUNT: 'bookinfo', ISTIO_META_CLUSTER_ID: 'Kubernetes' };
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'skua-agent-'));
    process.chdir(dir);
    mkdirSync('var/run/secrets/istio', { recursive: true });
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=root',
      '-keyout', 'root-key.pem', '-out', 'var/run/secrets/istio/root-cert.pem'], { stdio: 'ignore' });
    mkdirSync('etc/istio/pod', { recursive: true });
    writeFileSync('etc/istio/pod/labels', 'app="productpage"\nversion="v1"\npod-template-hash="abc"\n');
  });
  after(() => { process.chdir(cwd); rmSync(dir, { recursive: true, force: true }); });

  test('TLS to istiod:15012: root cert, istiod SAN, PILOT_SAN; accepted by our bootstrap compiler', () => {
    const s = agentSettings({ args: args(), env });
    assert.equal(s.identity.id, 'sidecar~10.1.1.1~productpage-v1-1.default~default.svc.cluster.local');
    assert.deepEqual(s.xds, { host: 'istiod.istio-system.svc', port: 15012, tls: { rootCert: './var/run/secrets/istio/root-cert.pem', san: 'istiod.istio-system.svc' } });
    assert.deepEqual(s.node.metadata.PILOT_SAN, ['istiod.istio-system.svc']);
    assert.deepEqual(s.node.metadata.LABELS, { app: 'productpage', version: 'v1' });
    assert.equal(s.node.cluster, 'productpage.default');
    assert.equal(s.bootstrapPath, 'etc/istio/proxy/envoy-rev.json');
    const b = renderBootstrap(s) as Json;
    const compiled = compileBootstrap(structuredClone(b));
    assert.equal(compiled.dynamic?.delta, true);
    assert.equal(compiled.dynamic?.cdsInitialFetchTimeoutMs, 0);
    assert.equal(compiled.dynamic?.ldsInitialFetchTimeoutMs, 0);
    const xds = b.static_resources.clusters.find((c: Json) => c.name === 'xds-grpc');
    assert.equal(xds.type, 'STRICT_DNS');
    assert.deepEqual(xds.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address, { protocol: 'TCP', address: 'istiod.istio-system.svc', port_value: 15012 });
    const vc = xds.transport_socket.typed_config.common_tls_context.validation_context;
    assert.deepEqual(vc, { trusted_ca: { filename: './var/run/secrets/istio/root-cert.pem' }, match_subject_alt_names: [{ exact: 'istiod.istio-system.svc' }] });
  });

  test('the parts of Istio\'s golden bootstrap we render are the same', () => {
    const b = renderBootstrap(agentSettings({ args: args(), env })) as Json;
    assert.deepEqual(b.admin.address, golden.admin.address);
    assert.deepEqual(b.dynamic_resources, golden.dynamic_resources);
    for (const name of ['prometheus_stats', 'agent']) {
      assert.deepEqual(b.static_resources.clusters.find((c: Json) => c.name === name), golden.static_resources.clusters.find((c: Json) => c.name === name));
    }
    const xds = b.static_resources.clusters.find((c: Json) => c.name === 'xds-grpc');
    const gx = golden.static_resources.clusters.find((c: Json) => c.name === 'xds-grpc');
    for (const k of ['connect_timeout', 'circuit_breakers', 'upstream_connection_options', 'max_requests_per_connection', 'typed_extension_protocol_options']) assert.deepEqual(xds[k], gx[k], k);
    // The 15090 listener without the compressor filters our HTTP filter registry does not have.
    const g15090 = structuredClone(golden.static_resources.listeners[0]);
    const hcm = g15090.filter_chains[0].filters[0].typed_config;
    hcm.http_filters = hcm.http_filters.filter((f: Json) => !f.name.includes('compressor'));
    assert.deepEqual(b.static_resources.listeners[0], g15090);
    assert.deepEqual(b.static_resources.listeners[1], golden.static_resources.listeners[1]);
  });

  test('stats_config.stats_matcher is Istio\'s default inclusion list (golden); annotations, ProxyConfig and EXIT_ON_ZERO_ACTIVE_CONNECTIONS add to it', () => {
    const b = renderBootstrap(agentSettings({ args: args(), env })) as Json;
    assert.deepEqual(b.stats_config.stats_matcher, golden.stats_config.stats_matcher);
    assert.equal(b.stats_config.use_all_default_tags, false);
    const withPc = renderBootstrap(agentSettings({ args: args(), env: { ...env, EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true',
      PROXY_CONFIG: 'proxyStatsMatcher: {inclusionPrefixes: [cluster.outbound, "http.{pod_ip}_"], inclusionRegexps: [".*circuit_breakers.*"]}' } })) as Json;
    const patterns = withPc.stats_config.stats_matcher.inclusion_list.patterns as Json[];
    assert.deepEqual(patterns.slice(0, 3), [{ prefix: 'reporter=' }, { prefix: 'cluster.outbound' }, { prefix: 'http.10.1.1.1_' }]);
    assert.ok(patterns.some((p) => p.suffix === 'downstream_cx_active'), 'draining counts downstream_cx_active');
    assert.ok(patterns.some((p) => p.safe_regex?.regex === '.*circuit_breakers.*'));
    assert.doesNotThrow(() => compileBootstrap(structuredClone(withPc)));
  });

  test("bootstrap extensions as Istio's template: the internal listener always; workload discovery for waypoints (as the ambient golden), or with METADATA_DISCOVERY", () => {
    const ambient = JSON.parse(readFileSync(new URL('../../../../shared/fixtures/istio-istio/pkg/bootstrap/testdata/ambient_golden.json', import.meta.url), 'utf8')) as Json;
    const sidecar = renderBootstrap(agentSettings({ args: args(), env })) as Json;
    assert.deepEqual(sidecar.bootstrap_extensions, [ambient.bootstrap_extensions[1]]);
    const waypoint = renderBootstrap(agentSettings({ args: parsePilotProxyArgs(['waypoint', '--meshConfig', './no-mesh']), env })) as Json;
    assert.deepEqual(waypoint.bootstrap_extensions, ambient.bootstrap_extensions);
    const compiled = compileBootstrap(structuredClone(waypoint));
    assert.ok(compiled.extensions.workloadDiscovery && compiled.extensions.internalListener);
    const discovery = renderBootstrap(agentSettings({ args: args(), env: { ...env, PEER_METADATA_DISCOVERY: 'true' } })) as Json;
    assert.deepEqual(discovery.bootstrap_extensions, ambient.bootstrap_extensions);
  });

  test('the whole golden compiles (bootstrap extensions, pipe clusters, the compressor filters the renderer leaves out)', () => {
    assert.doesNotThrow(() => compileBootstrap(structuredClone(golden)));
  });

  test('plaintext for 15010 or controlPlaneAuthPolicy NONE; STATIC cluster for an IP; PILOT_SAN only with mTLS', () => {
    const s = agentSettings({ args: args(), env: { ...env, PROXY_CONFIG: '{"discoveryAddress":"10.0.0.9:15010","controlPlaneAuthPolicy":"NONE"}' } });
    assert.equal(s.xds.tls, undefined);
    assert.equal(s.node.metadata.PILOT_SAN, undefined);
    const xds = (renderBootstrap(s) as Json).static_resources.clusters.find((c: Json) => c.name === 'xds-grpc');
    assert.equal(xds.type, 'STATIC');
    assert.equal(xds.transport_socket, undefined);
    assert.doesNotThrow(() => compileBootstrap(renderBootstrap(s)));
  });

  test('root CA and SAN overrides: XDS_ROOT_CA, ISTIOD_SAN, localhost → istiod.istio-system.svc; missing root is an error', () => {
    assert.equal(pilotSan('localhost:15012'), 'istiod.istio-system.svc');
    const s = agentSettings({ args: args(), env: { ...env, PROXY_CONFIG: 'discoveryAddress: 127.0.0.1:15012', ISTIOD_SAN: 'istiod.example', XDS_ROOT_CA: 'SYSTEM' } });
    assert.deepEqual(s.xds.tls, { rootCert: undefined, san: 'istiod.example' });
    assert.throws(() => agentSettings({ args: args(), env: { ...env, XDS_ROOT_CA: './nope.pem' } }), /root CA file for XDS does not exist \.\/nope\.pem/);
    assert.throws(() => agentSettings({ args: args(), env: { ...env, PILOT_CERT_PROVIDER: 'none' } }), /PILOT_CERT_PROVIDER/);
  });

  test('ports and paths from env and ProxyConfig; customConfigFile is used as given', () => {
    const s = agentSettings({ args: args(['--concurrency', '3']), env: { ...env, ENVOY_STATUS_PORT: '25021', ENVOY_PROMETHEUS_PORT: '25090',
      PROXY_CONFIG: 'proxyAdminPort: 25000\nstatusPort: 25020\nconfigPath: ./run\ndrainDuration: 7s' } });
    assert.deepEqual([s.adminPort, s.statusPort, s.envoyStatusPort, s.envoyPrometheusPort, s.concurrency, s.drainTimeS], [25000, 25020, 25021, 25090, 3, 7]);
    assert.equal(s.bootstrapPath, 'run/envoy-rev.json');
    const b = renderBootstrap(s) as Json;
    assert.equal(b.static_resources.listeners[1].address.socket_address.port_value, 25021);
    assert.equal(b.static_resources.clusters.find((c: Json) => c.name === 'agent').load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value, 25020);
    const c = agentSettings({ args: args(), env: { ...env, PROXY_CONFIG: 'customConfigFile: /etc/my-envoy.yaml' } });
    assert.deepEqual([c.bootstrapPath, c.renderBootstrap], ['/etc/my-envoy.yaml', false]);
  });

  test('xDS metadata: Bearer token re-read on every call, ClusterID, XDS_HEADER_*; JWT_POLICY picks the file', () => {
    mkdirSync('var/run/secrets/tokens', { recursive: true });
    writeFileSync('var/run/secrets/tokens/istio-token', 'tok-1\n');
    const s = agentSettings({ args: args(), env: { ...env, XDS_HEADER_x_tenant: 't1' } });
    const headers = xdsHeaders(s);
    assert.deepEqual(headers(), { ClusterID: 'Kubernetes', x_tenant: 't1', authorization: 'Bearer tok-1' });
    writeFileSync('var/run/secrets/tokens/istio-token', 'tok-2');
    assert.equal(headers().authorization, 'Bearer tok-2');
    rmSync('var/run/secrets/tokens/istio-token');
    assert.equal(headers().authorization, undefined);
    assert.equal(agentSettings({ args: args(), env: { ...env, JWT_POLICY: 'first-party-jwt' } }).tokenPath, '/var/run/secrets/kubernetes.io/serviceaccount/token');
    assert.equal(agentSettings({ args: args(), env: { ...env, JWT_POLICY: 'none' } }).tokenPath, undefined);
  });
});
