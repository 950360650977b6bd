// The ztunnel state: ztunnel's own local config fixture (examples/localhost.yaml) loads with its
// indexes; WDS resources encoded to protobuf and decoded as the ADS client does are applied,
// updated and removed; bad resources are refused by name and field while the rest applies; a
// bad local file leaves the last good state serving.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { decodeResource, encodeResource, TYPE_URL } from '../src/core.ts';
import { ProxyState } from '../src/state/store.ts';
import { loadLocalConfig, WdsHandler } from '../src/state/updater.ts';
import { parseLocalConfig } from '../src/state/local-config.ts';

type Json = Record<string, unknown>;
const LOCALHOST = readFileSync(new URL('../../../../shared/fixtures/istio-ztunnel/examples/localhost.yaml', import.meta.url), 'utf8');
const ip = (s: string): string => Buffer.from(s.split('.').map(Number)).toString('base64');

/** What the ADS client hands the handler: protobuf bytes decoded back to proto-JSON. */
function wire(json: Json): Json {
  return decodeResource(encodeResource(json));
}

function wdsWorkload(name: string, addr: string, extra: Json = {}): Json {
  return {
    '@type': TYPE_URL.address,
    workload: {
      uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', addresses: [ip(addr)], tunnel_protocol: 'HBONE',
      service_account: 'sleep', node: 'node-1', network: 'net1',
      services: { 'default/echo.default.svc.cluster.local': { ports: [{ service_port: 80, target_port: 8080 }] } }, ...extra,
    },
  };
}
const SERVICE = {
  '@type': TYPE_URL.address,
  service: { name: 'echo', namespace: 'default', hostname: 'echo.default.svc.cluster.local', addresses: [{ network: 'net1', address: ip('10.96.0.20') }], ports: [{ service_port: 80, target_port: 8080 }] },
};

function update(typeUrl: string, resources: Json[], removed: string[] = []) {
  return {
    typeUrl, version: '1', full: false, removed,
    resources: resources.map((r) => {
      const json = wire(r);
      const w = json.workload as Json | undefined;
      const s = json.service as Json | undefined;
      const name = w ? String(w.uid) : s ? `${String(s.namespace)}/${String(s.hostname)}` : `${String(json.namespace)}/${String(json.name)}`;
      return { name, version: '1', json };
    }),
  };
}

describe('local config (LOCAL_XDS_PATH)', () => {
  test("string matches in serde_yaml's tagged form (`!Exact ...`, which istio/ztunnel requires) read like the map form", () => {
    const yaml = 'policies:\n- name: p\n  namespace: default\n  scope: Global\n  action: Allow\n  rules:\n  - - - principals: [!Exact "spiffe://td/ns/a/sa/b", !Prefix "spiffe://td/ns/c/", {Suffix: "/sa/d"}]\n';
    const [policy] = parseLocalConfig(yaml).policies;
    assert.deepEqual(policy.rules[0][0][0].principals, [{ exact: 'spiffe://td/ns/a/sa/b' }, { prefix: 'spiffe://td/ns/c/' }, { suffix: '/sa/d' }]);
  });
  test("ztunnel's examples/localhost.yaml loads with workloads, services, VIPs, endpoints and its policy", () => {
    const state = new ProxyState();
    loadLocalConfig(state, LOCALHOST);
    const local = state.workloadByAddress('', '127.0.0.1');
    assert.equal(local?.uid, 'cluster1//v1/Pod/default/local');
    assert.equal(local?.protocol, 'HBONE');
    assert.equal(local?.identity, 'spiffe://cluster.local/ns/default/sa/default');
    assert.equal(state.workloadByAddress('', '127.0.0.2')?.protocol, 'TCP');
    const svc = state.bestServiceByVip('', '127.10.0.1', 'default');
    assert.equal(svc?.hostname, 'example.com');
    assert.deepEqual([...(svc?.ports ?? [])], [[80, 8080]]);
    assert.deepEqual(svc?.subjectAltNames, ['spiffe://cluster.local/ns/default/sa/local']);
    // example2.com's VIP lives on network "remote": not found on the default network.
    assert.equal(state.bestServiceByVip('', '127.10.0.2', 'default'), undefined);
    assert.equal(state.bestServiceByVip('remote', '127.10.0.2', 'default')?.hostname, 'example2.com');
    assert.deepEqual(state.endpointsOf(svc!).map((e) => e.workloadUid).sort(), ['cluster1//v1/Pod/default/local', 'cluster1//v1/Pod/default/local-tcp']);
    assert.deepEqual(state.workloadsWithIdentity('spiffe://cluster.local/ns/default/sa/default').map((w) => w.name).sort(), ['local', 'local-tcp']);
    assert.equal(state.workloadsOnNetwork('').length, 2);
    assert.deepEqual(state.policiesFor(local!).map((p) => p.key), ['default/deny-9999']);
    const p = state.policy('default/deny-9999');
    assert.equal(p?.action, 'Allow');
    assert.deepEqual(p?.rules[0][0][0].notDestinationPorts, [9999]);
  });

  test('a bad file names the field and the last good state keeps serving', () => {
    const state = new ProxyState();
    loadLocalConfig(state, LOCALHOST);
    assert.throws(() => loadLocalConfig(state, LOCALHOST.replace('protocol: TCP', 'protocol: UDP')), /workloads\[1\]\.protocol: must be one of TCP, HBONE, got "UDP"/);
    assert.throws(() => loadLocalConfig(state, LOCALHOST.replace('serviceAccount: default\n  workloadIps: ["127.0.0.2"]', 'serviceAcount: default\n  workloadIps: ["127.0.0.2"]')), /workloads\[1\]\.serviceAcount: unknown field/);
    assert.throws(() => loadLocalConfig(state, LOCALHOST.replace('- 9999', '- 99999')), /policies\[0\]\.rules\[0\]\[0\]\[0\]\.notDestinationPorts\[0\]: must be a port number/);
    assert.throws(() => loadLocalConfig(state, 'workloads:\n- namespace: a\n  workloadIps: ["10.0.0.300"]\n'), /workloads\[0\]\.workloadIps\[0\]: not an IP address/);
    assert.throws(() => loadLocalConfig(state, 'policies:\n- name: p\n  namespace: a\n  rules: [[[{sourceIps: ["10.0.0.0/40"]}]]]\n'), /policies\[0\]\.rules\[0\]\[0\]\[0\]\.sourceIps\[0\]: malformed CIDR range/);
    assert.equal(state.workloadByAddress('', '127.0.0.2')?.name, 'local-tcp');
    assert.ok(state.policy('default/deny-9999'));
  });
});

describe('WDS updates', () => {
  test('workloads, services and policies from Delta responses: add, update, remove', () => {
    const state = new ProxyState();
    let synced = 0;
    const h = new WdsHandler(state, () => synced++);
    assert.deepEqual(h.interest(TYPE_URL.address), { wildcard: true, names: new Set() });
    assert.deepEqual(h.applyNow(update(TYPE_URL.address, [wdsWorkload('sleep-1', '10.244.0.11'), SERVICE])), []);
    const w = state.workloadByAddress('net1', '10.244.0.11');
    assert.equal(w?.identity, 'spiffe://cluster.local/ns/default/sa/sleep');
    assert.equal(w?.clusterId, 'Kubernetes');
    assert.equal(w?.workloadType, 'deployment');
    assert.equal(w?.capacity, 1);
    const svc = state.bestServiceByVip('net1', '10.96.0.20', undefined)!;
    assert.deepEqual(state.endpointsOf(svc).map((e) => e.workloadUid), ['Kubernetes//Pod/default/sleep-1']);
    assert.equal(synced, 0);
    const policy = { '@type': TYPE_URL.authorization, name: 'deny-all', namespace: 'default', scope: 'NAMESPACE', action: 'DENY', rules: [{ clauses: [] }] };
    assert.deepEqual(h.applyNow(update(TYPE_URL.authorization, [policy])), []);
    assert.equal(synced, 1);
    assert.deepEqual(state.policiesFor(w!).map((p) => p.key), ['default/deny-all']);

    // An unhealthy endpoint leaves the service's endpoints (ONLY_HEALTHY is the default).
    h.applyNow(update(TYPE_URL.address, [wdsWorkload('sleep-1', '10.244.0.11', { status: 'UNHEALTHY' })]));
    assert.deepEqual(state.endpointsOf(svc), []);
    // Moved to a new IP: the old address is no longer indexed.
    h.applyNow(update(TYPE_URL.address, [wdsWorkload('sleep-1', '10.244.0.12')]));
    assert.equal(state.workloadByAddress('net1', '10.244.0.11'), undefined);
    assert.equal(state.workloadByAddress('net1', '10.244.0.12')?.name, 'sleep-1');

    h.applyNow(update(TYPE_URL.address, [], ['Kubernetes//Pod/default/sleep-1', 'default/echo.default.svc.cluster.local']));
    h.applyNow(update(TYPE_URL.authorization, [], ['default/deny-all']));
    assert.equal(state.workloadsByUid.size, 0);
    assert.equal(state.servicesByKey.size, 0);
    assert.equal(state.allPolicies().length, 0);
  });

  test('a bad resource is refused by name and field; the others in the batch apply', () => {
    const state = new ProxyState();
    const h = new WdsHandler(state);
    const legacy = wdsWorkload('old', '10.244.0.13', { tunnel_protocol: 'LEGACY_ISTIO_MTLS' });
    const badIp = wdsWorkload('bad', '10.244.0.14', { addresses: [Buffer.from([1, 2, 3]).toString('base64')] });
    const rej = h.applyNow(update(TYPE_URL.address, [legacy, badIp, wdsWorkload('good', '10.244.0.15')]));
    assert.deepEqual(rej, [
      { name: 'Kubernetes//Pod/default/old', message: 'workload.tunnel_protocol: unsupported tunnel protocol: legacy istio mtls' },
      { name: 'Kubernetes//Pod/default/bad', message: 'workload.addresses[0]: an IP address is 4 or 16 bytes, got 3' },
    ]);
    assert.equal(state.workloadByAddress('net1', '10.244.0.15')?.name, 'good');
    const badPolicy = { '@type': TYPE_URL.authorization, name: 'p', namespace: 'default', rules: [{ clauses: [{ matches: [{ source_ips: [{ address: ip('10.0.0.0'), length: 33 }] }] }] }] };
    assert.match(h.applyNow(update(TYPE_URL.authorization, [badPolicy]))[0].message, /rules\[0\]\.clauses\[0\]\.matches\[0\]\.source_ips\[0\]\.length: must be an integer in \[0, 32\]/);
  });

  test('services sharing a VIP: the client namespace wins, then a canonical one; NAMESPACE visibility hides others', () => {
    const state = new ProxyState();
    const h = new WdsHandler(state);
    const svc = (ns: string, extra: Json = {}): Json => ({
      '@type': TYPE_URL.address,
      service: { name: 'db', namespace: ns, hostname: 'db.example.com', addresses: [{ address: ip('240.0.0.1') }], ports: [{ service_port: 5432, target_port: 5432 }], ...extra },
    });
    h.applyNow(update(TYPE_URL.address, [svc('a'), svc('b', { canonical: true }), svc('c', { visibility: 'NAMESPACE' })]));
    assert.equal(state.bestServiceByVip('', '240.0.0.1', 'a')?.namespace, 'a');
    assert.equal(state.bestServiceByVip('', '240.0.0.1', 'x')?.namespace, 'b');
    assert.equal(state.bestServiceByVip('', '240.0.0.1', 'c')?.namespace, 'c');
    assert.equal(state.bestServiceByHostname('db.example.com', 'x')?.namespace, 'b');
    h.applyNow(update(TYPE_URL.address, [], ['a/db.example.com', 'b/db.example.com']));
    assert.equal(state.bestServiceByVip('', '240.0.0.1', 'x'), undefined);
    // CIDR VIPs (a prefix length shorter than the address): the most specific one wins.
    const range = (name: string, base: string, length: number): Json => ({
      '@type': TYPE_URL.address, service: { name, namespace: 'x', hostname: `${name}.example.com`, addresses: [{ address: ip(base), length }], ports: [{ service_port: 80, target_port: 80 }] },
    });
    h.applyNow(update(TYPE_URL.address, [range('wide', '10.200.0.0', 16), range('narrow', '10.200.3.0', 24)]));
    assert.equal(state.bestServiceByVip('', '10.200.3.4', 'x')?.name, 'narrow');
    assert.equal(state.bestServiceByVip('', '10.200.9.4', 'x')?.name, 'wide');
    assert.equal(state.bestServiceByVip('', '10.201.0.1', 'x'), undefined);
  });
});
