// Node identity and metadata as pilot-agent builds them from the environment, checked against
// Istio's rendered bootstraps (pkg/bootstrap/testdata/{default,ambient}_golden.json).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { buildNode, rawMetadata, serviceNode, type NodeMetadataOptions } from '../src/agent/node-metadata.ts';
import { checkProxyConfig, defaultProxyConfig } from '../src/agent/proxy-config.ts';
import { hostAddresses, parseProxyType, proxyIdentity } from '../src/agent/identity.ts';
import { ConfigError } from '../src/core/errors.ts';

const testdata = (name: string): string =>
  readFileSync(new URL(`../../../../shared/fixtures/istio-istio/pkg/bootstrap/testdata/${name}`, import.meta.url), 'utf8');

/** The .proxycfg inputs are proto text (`key: value`, `{seconds: 2}`): enough of a reader for them. */
function readProxyCfg(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([a-z_]+):\s*(.+?)\s*$/.exec(line.replace(/#.*$/, ''));
    if (!m) continue;
    const v = m[2];
    const secs = /^\{\s*seconds:\s*(\d+)\s*\}$/.exec(v);
    out[m[1]] = secs ? `${secs[1]}s` : v.startsWith('"') ? JSON.parse(v) : /^\d+$/.test(v) ? Number(v) : v;
  }
  return out;
}

/**
 * What Istio's bootstrap test feeds GetNodeMetaData besides the .proxycfg, all test-only:
 * ISTIO_VERSION "binary-1.0" (a test build's version), four INSTANCE_IPS, a spiffe:// PILOT_SAN
 * (a real agent sends the discovery host), OUTLIER_LOG_PATH, WORKLOAD_IDENTITY_SOCKET_FILE
 * "test.sock" (default "socket"), ENVOY_SKIP_DEPRECATED_LOGS off (pilot-agent's default is on,
 * which adds "ENVOY_SKIP_DEPRECATED_LOGS":"true"), and PROXY_CONFIG's configPath /
 * customConfigFile / statusPort. The node id is given verbatim ("foo~bar" is not a pod.ns~domain).
 */
function goldenInputs(name: 'default' | 'ambient', env: Record<string, string>): NodeMetadataOptions {
  const pc = checkProxyConfig(readProxyCfg(testdata(`${name}.proxycfg`)), 'proxycfg');
  return {
    id: 'sidecar~1.2.3.4~foo~bar', env: { ISTIO_META_ISTIO_VERSION: 'binary-1.0', ...env },
    proxyConfig: { ...pc, configPath: `/tmp/bootstrap/${name}`, customConfigFile: 'envoy_bootstrap.json', statusPort: 15020 },
    instanceIps: ['10.3.3.3', '10.4.4.4', '10.5.5.5', '10.6.6.6'], version: '0.1.0',
    envoyStatusPort: 15021, envoyPrometheusPort: 15090,
    pilotSan: ['spiffe://cluster.local/ns/istio-system/sa/istio-pilot-service-account'], outlierLogPath: '/dev/stdout',
    workloadIdentitySocketFile: 'test.sock', envoySkipDeprecatedLogs: false,
  };
}

describe('node from the environment vs Istio golden bootstraps', () => {
  for (const [name, env] of [['default', {}], ['ambient', { ISTIO_META_ENABLE_HBONE: 'true' }]] as const) {
    test(`${name}_golden.json node`, () => {
      const golden = JSON.parse(testdata(`${name}_golden.json`)) as { node: unknown };
      assert.deepEqual(buildNode(goldenInputs(name, env)), golden.node);
    });
  }
  test('the ambient golden differs only by ENABLE_HBONE, which turns METADATA_DISCOVERY on', () => {
    const node = buildNode(goldenInputs('ambient', { ISTIO_META_ENABLE_HBONE: '1' }));
    assert.equal(node.metadata.ENABLE_HBONE, 'true');
    assert.equal(node.metadata.METADATA_DISCOVERY, 'true');
    const forcedOff = buildNode({ ...goldenInputs('ambient', { ISTIO_META_ENABLE_HBONE: 'true' }), metadataDiscovery: false });
    assert.equal(forcedOff.metadata.METADATA_DISCOVERY, 'false');
  });
});

function node(env: Record<string, string>, extra: Partial<NodeMetadataOptions> = {}): ReturnType<typeof buildNode> {
  return buildNode({
    id: 'sidecar~10.0.0.1~p.ns~ns.svc.cluster.local', env, proxyConfig: defaultProxyConfig(), instanceIps: ['10.0.0.1'],
    version: '0.1.0', envoyStatusPort: 15021, envoyPrometheusPort: 15090, ...extra,
  });
}

describe('node metadata edge cases', () => {
  test('injector env: ISTIO_META_* strings, typed ports, POD_PORTS re-encoded, pod attributes', () => {
    const n = node({
      POD_NAME: 'reviews-v1-7d9', POD_NAMESPACE: 'bookinfo', SERVICE_ACCOUNT: 'bookinfo-reviews', INSTANCE_IP: '10.0.0.1',
      ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local', ISTIO_META_INTERCEPTION_MODE: 'REDIRECT',
      ISTIO_META_WORKLOAD_NAME: 'reviews-v1', ISTIO_META_OWNER: 'kubernetes://apis/apps/v1/namespaces/bookinfo/deployments/reviews-v1',
      ISTIO_META_APP_CONTAINERS: 'reviews', ISTIO_META_POD_PORTS: '[\n {"protocol":"TCP","containerPort":9080,"name":"http","hostIP":"x"}\n]',
      ISTIO_META_NODE_NAME: 'node-1', ISTIO_META_DNS_CAPTURE: 'true', ISTIO_META_custom_key: 'kept as given',
      TRUST_DOMAIN: 'cluster.local',
    });
    const m = n.metadata;
    assert.equal(m.NAME, 'reviews-v1-7d9');
    assert.equal(m.NAMESPACE, 'bookinfo');
    assert.equal(m.SERVICE_ACCOUNT, 'bookinfo-reviews');
    assert.equal(m.WORKLOAD_NAME, 'reviews-v1');
    assert.equal(m.POD_PORTS, '[{"name":"http","containerPort":9080,"protocol":"TCP"}]');
    assert.equal(m.ENVOY_STATUS_PORT, 15021);
    assert.equal(m.ENVOY_PROMETHEUS_PORT, 15090);
    assert.equal(m.INSTANCE_IPS, '10.0.0.1');
    assert.equal(m.DNS_CAPTURE, 'true');
    assert.equal(m.custom_key, 'kept as given');
    assert.equal(m.ISTIO_VERSION, '0.1.0');
    assert.equal(m.TRUST_DOMAIN, undefined, 'only ISTIO_META_* becomes metadata');
    assert.equal((m.PROXY_CONFIG as Record<string, unknown>).discoveryAddress, 'istiod.istio-system.svc:15012');
    assert.equal(n.cluster, 'reviews-v1.bookinfo', 'no app label: <workload>.<namespace>');
  });

  test('StringBool fields: Go ParseBool spellings normalise; false is dropped and the raw string passes through', () => {
    assert.equal(node({ ISTIO_META_DNS_CAPTURE: 'T' }).metadata.DNS_CAPTURE, 'true');
    assert.equal(node({ ISTIO_META_DNS_CAPTURE: '0' }).metadata.DNS_CAPTURE, '0');
    assert.throws(() => node({ ISTIO_META_DNS_CAPTURE: 'yes' }), (e: Error) => e instanceof ConfigError && e.message.startsWith('node.metadata.DNS_CAPTURE:'));
  });

  test('a typed field given the wrong JSON type stops the agent, naming the key', () => {
    assert.throws(() => node({ ISTIO_META_ENVOY_STATUS_PORT: '15021' }), /node\.metadata\.ENVOY_STATUS_PORT: expected an integer/);
    assert.throws(() => node({ ISTIO_META_POD_PORTS: 'not json' }), /node\.metadata\.POD_PORTS: not JSON/);
    assert.throws(() => node({ ISTIO_META_POD_PORTS: '[{"containerPort":"80"}]' }), /POD_PORTS\[0\]\.containerPort/);
    assert.throws(() => node({ ISTIO_METAJSON_X: '{"LABELS":"app"}' }), /node\.metadata\.LABELS: expected a map of strings/);
  });

  test('ISTIO_METAJSON_*: the object merges in (name ignored); bad JSON and non-objects are skipped', () => {
    const m = node({
      ISTIO_META_NETWORK: 'from-meta', ISTIO_METAJSON_ANYTHING: '{"NETWORK":"net-1","extra":{"a":[1,2]},"ENVOY_STATUS_PORT":1}',
      ISTIO_METAJSON_BROKEN: '{nope', ISTIO_METAJSON_LIST: '[1,2]',
    }).metadata;
    assert.equal(m.NETWORK, 'net-1', 'METAJSON is applied after ISTIO_META_');
    assert.deepEqual(m.extra, { a: [1, 2] });
    assert.equal(m.ENVOY_STATUS_PORT, 15021, 'the agent sets the port after reading the env');
  });

  test('ISTIO_METAJSON_LABELS sets LABELS and STATIC_LABELS (its keys also land at the top level, as in Istio)', () => {
    const n = node({ POD_NAMESPACE: 'ns', ISTIO_METAJSON_LABELS: '{"app":"ratings","version":"v1","n":3}' });
    assert.deepEqual(n.metadata.LABELS, { app: 'ratings', version: 'v1' });
    assert.deepEqual(n.metadata.STATIC_LABELS, { app: 'ratings', version: 'v1' });
    assert.equal(n.metadata.app, 'ratings');
    assert.equal(n.cluster, 'ratings.ns');
  });

  test('pod labels file: merged over static labels, pod-template-hash dropped, locality from istio-locality', () => {
    const n = node({ POD_NAMESPACE: 'ns', ISTIO_METAJSON_LABELS: '{"static":"s"}' }, {
      podLabels: { app: 'details', 'pod-template-hash': '5f6d', 'istio-locality': 'us-east1.us-east1-b.rack7' },
      podAnnotations: { 'sidecar.istio.io/status': '{}' },
    });
    assert.deepEqual(n.metadata.LABELS, { static: 's', app: 'details', 'istio-locality': 'us-east1/us-east1-b/rack7' });
    assert.deepEqual(n.locality, { region: 'us-east1', zone: 'us-east1-b', sub_zone: 'rack7' });
    assert.deepEqual(n.metadata.ANNOTATIONS, { 'sidecar.istio.io/status': '{}' });
    assert.equal(n.cluster, 'details.ns');
  });

  test('precedence: proxyMetadata ISTIO_META_* < env ISTIO_META_* < POD_NAME/POD_NAMESPACE/SERVICE_ACCOUNT', () => {
    const pc = { ...defaultProxyConfig(), proxyMetadata: { ISTIO_META_MESH_ID: 'pm-mesh', ISTIO_META_NETWORK: 'pm-net', OTHER: 'x' } };
    const n = node({ ISTIO_META_MESH_ID: 'env-mesh', ISTIO_META_NAME: 'meta-name', POD_NAME: 'pod-name' }, { proxyConfig: pc });
    assert.equal(n.metadata.MESH_ID, 'env-mesh');
    assert.equal(n.metadata.NETWORK, 'pm-net');
    assert.equal(n.metadata.OTHER, undefined);
    assert.equal(n.metadata.NAME, 'pod-name');
    assert.deepEqual((n.metadata.PROXY_CONFIG as Record<string, unknown>).proxyMetadata, pc.proxyMetadata);
  });

  test('keys match typed fields case-insensitively (Go encoding/json), the raw spelling is kept too', () => {
    const m = node({ ISTIO_META_cluster_id: 'c1' }).metadata;
    assert.equal(m.CLUSTER_ID, 'c1');
    assert.equal(m.cluster_id, 'c1');
  });

  test('rawMetadata keeps only ISTIO_META_ and ISTIO_METAJSON_ inputs', () => {
    assert.deepEqual(rawMetadata({ ISTIO_META_A: '1', ISTIO_METAJSON_B: '{"b":2}', ISTIO_METAX: 'no', POD_NAME: 'p' }, {}), { A: '1', b: 2 });
  });

  test('service cluster: explicit serviceCluster wins; tracingServiceName CANONICAL_NAME_AND_NAMESPACE', () => {
    assert.equal(node({}, { proxyConfig: { ...defaultProxyConfig(), serviceCluster: 'mine' } }).cluster, 'mine');
    assert.equal(node({}).cluster, 'istio-proxy');
    const pc: Record<string, unknown> = { ...defaultProxyConfig(), tracingServiceName: 'CANONICAL_NAME_AND_NAMESPACE' };
    delete pc.serviceCluster;
    assert.equal(node({ POD_NAMESPACE: 'ns' }, { proxyConfig: pc, podLabels: { 'service.istio.io/canonical-name': 'cs' } }).cluster, 'cs.ns');
  });
});

describe('node id', () => {
  const ifaces = { eth0: [{ address: '10.9.9.9', family: 'IPv4' as const, internal: false, netmask: '', mac: '', cidr: null }],
    lo: [{ address: '127.0.0.1', family: 'IPv4' as const, internal: true, netmask: '', mac: '', cidr: null }] };
  test('sidecar / router / waypoint: <type>~<ip>~<pod>.<ns>~<ns>.svc.cluster.local', () => {
    for (const type of ['sidecar', 'router', 'waypoint'] as const) {
      const id = proxyIdentity({ type, env: { INSTANCE_IP: '10.1.2.3', POD_NAME: 'p-1', POD_NAMESPACE: 'ns' }, domain: '', interfaces: ifaces });
      assert.equal(id.id, `${type}~10.1.2.3~p-1.ns~ns.svc.cluster.local`);
      assert.deepEqual(id.ipAddresses, ['10.1.2.3', '10.9.9.9']);
    }
  });
  test('--domain replaces the whole DNS domain', () => {
    const id = proxyIdentity({ type: 'sidecar', env: { INSTANCE_IP: '10.1.2.3', POD_NAME: 'p', POD_NAMESPACE: 'ns' }, domain: 'ns.svc.corp.example', interfaces: ifaces });
    assert.equal(id.id, 'sidecar~10.1.2.3~p.ns~ns.svc.corp.example');
  });
  test('missing POD_NAME / POD_NAMESPACE / INSTANCE_IP: empty parts and the host address, as pilot-agent', () => {
    assert.equal(proxyIdentity({ type: 'sidecar', env: {}, domain: '', interfaces: ifaces }).id, 'sidecar~10.9.9.9~.~.svc.cluster.local');
    const none = proxyIdentity({ type: 'router', env: { INSTANCE_IP: 'not-an-ip', POD_NAMESPACE: 'gw' }, domain: '', interfaces: { lo: ifaces.lo } });
    assert.equal(none.id, 'router~127.0.0.1~.gw~gw.svc.cluster.local');
    assert.deepEqual(none.ipAddresses, ['127.0.0.1', '::1']);
  });
  test('link-local and excluded interfaces are not proxy addresses', () => {
    const more = { ...ifaces, eth1: [{ address: 'fe80::1', family: 'IPv6' as const, internal: false, netmask: '', mac: '', cidr: null, scopeid: 2 }],
      eth2: [{ address: '10.7.7.7', family: 'IPv4' as const, internal: false, netmask: '', mac: '', cidr: null }] };
    assert.deepEqual(hostAddresses(more, ['eth2']), ['10.9.9.9']);
  });
  test('proxy types: ztunnel and unknown types are refused', () => {
    assert.equal(parseProxyType(undefined), 'sidecar');
    assert.throws(() => parseProxyType('ztunnel'), /skua-ztunnel/);
    assert.throws(() => parseProxyType('ingress'), /Invalid proxy Type: ingress/);
    assert.throws(() => serviceNode('side~car', '1.1.1.1', 'p', 'n', 'd'), ConfigError);
  });
});
