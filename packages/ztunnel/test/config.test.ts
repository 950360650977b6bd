// ztunnel's environment: names, defaults and precedence as ztunnel reads them; the mesh config
// file (ztunnel's own test fixture mesh_config.yaml) under PROXY_CONFIG; the WDS node identity;
// errors that name the variable.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { authHeaders, loadConfig, xdsNode } from '../src/config.ts';

const MESH_FIXTURE = new URL('../../../../shared/fixtures/istio-ztunnel/src/test_helpers/mesh_config.yaml', import.meta.url);
const dirs: string[] = [];
function cwdWithMesh(): string {
  const dir = mkdtempSync(join(tmpdir(), 'skua-zt-cfg-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'etc/istio/config'), { recursive: true });
  copyFileSync(MESH_FIXTURE, join(dir, 'etc/istio/config/mesh'));
  return dir;
}
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

describe('ztunnel config', () => {
  test('defaults', () => {
    const c = loadConfig({}, tmpdir());
    assert.equal(c.xdsAddress, 'https://localhost:15012');
    assert.equal(c.caAddress, 'https://localhost:15012');
    assert.equal(c.clusterId, 'Kubernetes');
    assert.equal(c.proxyMode, 'shared');
    assert.equal(c.packetMark, 0x539);
    assert.equal(c.inpodUds, '/var/run/ztunnel/ztunnel.sock');
    assert.deepEqual([c.adminPort, c.statsPort, c.readinessPort, c.inboundPort, c.inboundPlaintextPort, c.outboundPort, c.dnsPort], [15000, 15020, 15021, 15008, 15006, 15001, 15053]);
    assert.deepEqual([...c.illegalPorts].sort(), [15001, 15006, 15008]);
    assert.equal(c.poolMaxStreamsPerConnection, 100);
    assert.equal(c.poolUnusedReleaseTimeoutMs, 300_000);
    assert.equal(c.streamWindow, 4 * 1024 * 1024);
    assert.equal(c.connectionWindow, 16 * 1024 * 1024);
    assert.equal(c.terminationDeadlineMs, 5000);
    assert.equal(c.secretTtlSec, 86400);
    assert.equal(c.dnsProxy, true);
    assert.deepEqual(c.auth, { kind: 'none' });
    assert.equal(loadConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1' }, tmpdir()).xdsAddress, 'https://istiod.istio-system.svc:15012');
  });

  test("the mesh config file (ztunnel's fixture) and PROXY_CONFIG over it; ISTIO_META_* into the metadata", () => {
    const cwd = cwdWithMesh();
    const c = loadConfig({}, cwd);
    assert.equal(c.statsPort, 15888);
    assert.equal(c.adminPort, 15099);
    assert.deepEqual(c.proxyMetadata, { FOO: 'foo', FOOBAR: 'foobar' });
    const d = loadConfig({
      PROXY_CONFIG: '{"discoveryAddress":"istiod-rev0.istio-system-2:15012","proxyAdminPort":15999,"proxyMetadata":{"ISTIO_META_BAR":"bar","ISTIO_META_FOOBAR":"foobar-overwritten","NO_PREFIX":"no-prefix"}}',
      ISTIO_META_INCLUDE_THIS: 'foobar-env', NOT_INCLUDE: 'x', ISTIO_META_CLUSTER_ID: 'test-cluster', CLUSTER_ID: 'ignored',
      XDS_HEADER_HEADER_FOO: 'foo', CA_HEADER_HEADER_BAZ: 'baz',
    }, cwd);
    assert.equal(d.adminPort, 15999);
    assert.equal(d.statsPort, 15888);
    assert.equal(d.xdsAddress, 'istiod-rev0.istio-system-2:15012');
    assert.equal(d.clusterId, 'test-cluster');
    assert.deepEqual(d.proxyMetadata, { FOO: 'foo', FOOBAR: 'foobar-overwritten', BAR: 'bar', NO_PREFIX: 'no-prefix', INCLUDE_THIS: 'foobar-env', CLUSTER_ID: 'test-cluster' });
    assert.deepEqual(d.xdsHeaders, { header_foo: 'foo' });
    assert.deepEqual(d.caHeaders, { header_baz: 'baz' });
  });

  test('termination deadline, tokens, local config, empty addresses', () => {
    assert.equal(loadConfig({ TERMINATION_GRACE_PERIOD_SECONDS: '30' }, tmpdir()).terminationDeadlineMs, 25_000);
    assert.equal(loadConfig({ TERMINATION_GRACE_PERIOD_SECONDS: '5' }, tmpdir()).terminationDeadlineMs, 4000);
    assert.equal(loadConfig({ TERMINATION_GRACE_PERIOD_SECONDS: '30', CONNECTION_TERMINATION_DEADLINE: '2s' }, tmpdir()).terminationDeadlineMs, 2000);
    const dir = cwdWithMesh();
    writeFileSync(join(dir, 'token'), 'jwt-1\n');
    const c = loadConfig({ AUTH_TOKEN: join(dir, 'token'), CLUSTER_ID: 'c1', LOCAL_XDS_PATH: '/x.yaml', XDS_ADDRESS: '', CA_ADDRESS: '' }, dir);
    assert.deepEqual(c.auth, { kind: 'file', path: join(dir, 'token') });
    assert.deepEqual(authHeaders(c, { extra: 'y' }), { extra: 'y', authorization: 'Bearer jwt-1', clusterid: 'c1' });
    assert.deepEqual(c.localXds, { kind: 'file', path: '/x.yaml' });
    assert.equal(c.xdsAddress, undefined);
    assert.equal(c.caAddress, undefined);
    assert.deepEqual(loadConfig({ AUTH_TOKEN: 'static-jwt' }, tmpdir()).auth, { kind: 'static', token: 'static-jwt' });
    assert.equal(loadConfig({ PROXY_MODE: 'dedicated', PROXY_WORKLOAD_INFO: 'ns/pod/sa' }, tmpdir()).packetMark, undefined);
  });

  test('bad values name the variable', () => {
    const bad: Array<[Record<string, string>, RegExp]> = [
      [{ PROXY_MODE: 'node' }, /PROXY_MODE must be one of dedicated, shared/],
      [{ PROXY_MODE: 'dedicated' }, /PROXY_MODE=dedicated requires PROXY_WORKLOAD_INFO/],
      [{ PROXY_MODE: 'dedicated', PROXY_WORKLOAD_INFO: 'a/b' }, /PROXY_WORKLOAD_INFO must match the format/],
      [{ LOCAL_XDS_PATH: '/a', LOCAL_XDS: 'workloads: []' }, /only one of LOCAL_XDS_PATH or LOCAL_XDS/],
      [{ SECRET_TTL: 'forever' }, /SECRET_TTL: expected a duration/],
      [{ POOL_MAX_STREAMS_PER_CONNECTION: '-1' }, /POOL_MAX_STREAMS_PER_CONNECTION: expected an integer/],
      [{ ENABLE_ORIG_SRC: 'yes' }, /ENABLE_ORIG_SRC: expected true or false/],
      [{ XDS_ADDRESS: 'not a uri' }, /XDS_ADDRESS: expected a URI/],
      [{ PROXY_CONFIG: '{"statsPort": 99999}' }, /PROXY_CONFIG\.statsPort: must be a port number/],
      [{ XDS_ON_DEMAND: 'true' }, /XDS_ON_DEMAND=true: on-demand WDS is not supported/],
    ];
    for (const [env, re] of bad) assert.throws(() => loadConfig(env, tmpdir()), re, JSON.stringify(env));
  });

  test("the WDS node: ztunnel's id and metadata", () => {
    const env = { POD_NAME: 'ztunnel-abcde', POD_NAMESPACE: 'istio-system', INSTANCE_IP: '10.244.2.5', NODE_NAME: 'node-1', ISTIO_META_FOO: 'bar', ISTIO_METAJSON_LABELS: '{"app":"ztunnel"}' };
    const node = xdsNode(loadConfig(env, tmpdir()), env);
    assert.deepEqual(node, {
      id: 'ztunnel~10.244.2.5~ztunnel-abcde.istio-system~istio-system.svc.cluster.local',
      metadata: { NAME: 'ztunnel-abcde', NAMESPACE: 'istio-system', INSTANCE_IPS: '10.244.2.5', NODE_NAME: 'node-1', FOO: 'bar', LABELS: { app: 'ztunnel' } },
    });
  });
});
