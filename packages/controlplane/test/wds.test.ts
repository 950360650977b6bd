// WDS for ztunnel: the control plane serves istio.workload.Address (workloads by uid, services by
// namespace/hostname) and istio.security.Authorization (namespace/name) from watched files over
// Delta ADS, to a real grpc-js Delta client subscribing as ztunnel does. Adds, updates and
// removals follow file edits; SotW never serves these types.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { Snapshot } from '../src/ads/snapshot.ts';
import { AdsServer } from '../src/ads/server.ts';
import { FileSource, groupOf } from '../src/files.ts';
import { TYPE_URL, decodeResource } from '@skua/proxy/xds';
import { DeltaClient, sotwProbe } from './lib/delta-client.ts';

type Json = Record<string, unknown>;
const ADDRESS = TYPE_URL.address;
const AUTHZ = TYPE_URL.authorization;
const ip = (s: string): string => Buffer.from(s.split('.').map(Number)).toString('base64');
const ZTUNNEL_NODE = {
  id: 'ztunnel~10.244.2.5~ztunnel-abcde.istio-system~istio-system.svc.cluster.local',
  metadata: { NAMESPACE: 'istio-system', NODE_NAME: 'node-1', CLUSTER_ID: 'Kubernetes', ISTIO_VERSION: '1.28.0', NAME: 'ztunnel-abcde' },
};
const AMBIENT_TESTDATA = new URL('../../../../shared/fixtures/istio-istio/pilot/pkg/serviceregistry/ambient/testdata/', import.meta.url);

function workload(name: string, addr: string, extra: Json = {}): Json {
  return {
    '@type': ADDRESS,
    workload: {
      uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', addresses: [ip(addr)], tunnel_protocol: 'HBONE',
      trust_domain: 'cluster.local', service_account: 'sleep', node: 'node-1', workload_name: name,
      services: { 'default/echo.default.svc.cluster.local': { ports: [{ service_port: 80, target_port: 8080 }] } }, ...extra,
    },
  };
}
const SERVICE = {
  '@type': ADDRESS,
  service: { name: 'echo', namespace: 'default', hostname: 'echo.default.svc.cluster.local', addresses: [{ address: ip('10.96.0.20') }], ports: [{ service_port: 80, target_port: 8080, app_protocol: 'HTTP11' }] },
};
const POLICY = { '@type': AUTHZ, name: 'allow-sleep', namespace: 'default', scope: 'NAMESPACE', rules: [{ clauses: [{ matches: [{ principals: [{ exact: 'spiffe://cluster.local/ns/default/sa/sleep' }] }] }] }] };
const LISTENER = { '@type': TYPE_URL.listener, name: 'l', address: { socket_address: { address: '127.0.0.1', port_value: 1 } } };

describe('WDS over Delta ADS', () => {
  let dir: string, files: FileSource, snapshot: Snapshot, server: AdsServer, port: number, client: DeltaClient;
  const logs: string[] = [];
  const write = (name: string, resources: Json[]): void => {
    writeFileSync(join(dir, `.${name}.tmp`), JSON.stringify({ resources }));
    renameSync(join(dir, `.${name}.tmp`), join(dir, `${name}.json`));
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'skua-wds-'));
    write('wds', [workload('sleep-1', '10.244.0.11'), workload('sleep-2', '10.244.0.12'), SERVICE, POLICY, LISTENER]);
    snapshot = new Snapshot();
    files = new FileSource(dir);
    snapshot.set(files.scan());
    files.watch((groups) => snapshot.set(groups), 20);
    server = new AdsServer(snapshot, (l) => logs.push(l));
    port = await server.listen('127.0.0.1:0');
    client = new DeltaClient(port, ZTUNNEL_NODE);
    client.subscribe(ADDRESS, []);
    client.subscribe(AUTHZ, ['*']);
  });
  after(async () => {
    client?.close();
    files?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a ztunnel-like wildcard subscriber gets workloads by uid, services by namespace/hostname, policies by namespace/name', async () => {
    await client.waitFor(() => client.names(ADDRESS).length === 3 && client.names(AUTHZ).length === 1, 'the initial WDS state');
    assert.deepEqual(client.names(ADDRESS), ['Kubernetes//Pod/default/sleep-1', 'Kubernetes//Pod/default/sleep-2', 'default/echo.default.svc.cluster.local']);
    assert.deepEqual(client.names(AUTHZ), ['default/allow-sleep']);
    assert.deepEqual(client.get(ADDRESS, 'default/echo.default.svc.cluster.local'), SERVICE);
    assert.deepEqual(client.get(ADDRESS, 'Kubernetes//Pod/default/sleep-1'), workload('sleep-1', '10.244.0.11'));
    assert.deepEqual(client.get(AUTHZ, 'default/allow-sleep'), POLICY);
    // Only the subscribed types: the listener in the same file is not pushed to this stream.
    assert.deepEqual([...new Set(client.responses.map((r) => r.type_url))].sort(), [AUTHZ, ADDRESS].sort());
    assert.ok(server.proxies.size >= 1 && [...server.proxies].some((p) => p.nodeId === ZTUNNEL_NODE.id && p.delta));
  });

  test('a file edit pushes only what changed; a deleted workload and policy are named as removed', async () => {
    const before = client.responses.length;
    write('wds', [workload('sleep-1', '10.244.0.11', { status: 'UNHEALTHY' }), SERVICE, POLICY, LISTENER]);
    await client.waitFor(() => client.names(ADDRESS).length === 2, 'sleep-2 removed');
    await client.waitFor(() => (client.get(ADDRESS, 'Kubernetes//Pod/default/sleep-1')?.workload as Json | undefined)?.status === 'UNHEALTHY', 'sleep-1 updated');
    const pushed = client.responses.slice(before).filter((r) => r.type_url === ADDRESS);
    assert.deepEqual(pushed.flatMap((r) => r.resources.map((x) => x.name)), ['Kubernetes//Pod/default/sleep-1']);
    assert.deepEqual(pushed.flatMap((r) => r.removed_resources), ['Kubernetes//Pod/default/sleep-2']);
    // The unchanged policy was not re-sent.
    assert.equal(client.responses.slice(before).filter((r) => r.type_url === AUTHZ).length, 0);

    write('wds', [workload('sleep-1', '10.244.0.11', { status: 'UNHEALTHY' }), SERVICE, LISTENER]);
    await client.waitFor(() => client.names(AUTHZ).length === 0, 'the policy removed');
    assert.deepEqual(client.responses.at(-1)?.removed_resources, ['default/allow-sleep']);
  });

  test('SotW streams are not served WDS types (ztunnel speaks Delta only)', async () => {
    assert.equal(await sotwProbe(port, ZTUNNEL_NODE, ADDRESS), 0);
    assert.ok(logs.some((l) => /asked for type\.googleapis\.com\/istio\.workload\.Address over SotW: not served/.test(l)), logs.join('\n'));
  });
});

describe('WDS resource files', () => {
  test("istiod's Authorization goldens (groups/rules/matches spelling) load with their names", () => {
    for (const [file, name, groups] of [['allow-full.yaml', 'cfg/allow', 10], ['deny-groups.yaml', '/groups-deny', 7]] as const) {
      const json = parse(readFileSync(new URL(file, AMBIENT_TESTDATA), 'utf8')) as Json;
      assert.equal((json.groups as unknown[]).length, groups);
      const g = groupOf(file, [{ '@type': AUTHZ, ...json }]);
      const r = g.byType.get(AUTHZ)?.get(name);
      assert.ok(r, `${file} named ${name}`);
      const back = decodeResource(r.any);
      const rules = back.rules as { clauses: { matches: Json[] }[] }[];
      assert.equal(rules.length, groups);
      assert.deepEqual(rules[0].clauses, (json.groups as { rules: unknown[] }[])[0].rules.map((x) => camelToSnakeDeep(x)));
    }
  });

  test('an Address without a uid or hostname is refused naming the resource', () => {
    assert.throws(() => groupOf('f', [{ '@type': ADDRESS, workload: { name: 'x' } }]), /resources\[0\] \(type\.googleapis\.com\/istio\.workload\.Address\) has no name/);
  });
});

/** The goldens are camelCase proto-JSON; decoding prints proto field names. */
function camelToSnakeDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(camelToSnakeDeep);
  if (v === null || typeof v !== 'object') return v;
  const out: Json = {};
  for (const [k, x] of Object.entries(v as Json)) out[k === 'serviceAccount' ? k : k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = camelToSnakeDeep(x);
  return out;
}
