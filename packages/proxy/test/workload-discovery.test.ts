// The workload index behind istio.workload.BootstrapExtension: addresses from WDS bytes (IPv4, IPv6,
// IPv4-mapped lookups), an address moving between workloads, SotW full-state removal through the
// DynamicConfig sink, and the extension's config errors. Real traffic: test/peer-metadata.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { WorkloadIndex } from '../src/telemetry/istio/workload-peers.ts';
import { compileBootstrapExtensions } from '../src/config/bootstrap-extensions.ts';
import { compileBootstrap } from '../src/config/bootstrap.ts';
import { DynamicConfig } from '../src/xds/dynamic-config.ts';
import { ClusterManager } from '../src/upstream/manager.ts';
import { ListenerManager } from '../src/listener/manager.ts';
import { StatsStore } from '../src/stats/store.ts';
import { TYPE_URL } from '../src/xds/discovery.ts';

const b64 = (bytes: number[]): string => Buffer.from(bytes).toString('base64');
const w = (uid: string, addresses: string[], name = uid): Record<string, unknown> => ({ uid, name, namespace: 'ns', workload_name: name, canonical_name: name, canonical_revision: 'v1', cluster_id: 'c1', addresses });

describe('workload index', () => {
  test('IPv4 and IPv6 bytes; IPv4-mapped spellings find the IPv4 workload; the facts telemetry reads', () => {
    const idx = new WorkloadIndex();
    idx.apply('a', w('a', [b64([10, 0, 0, 5])]));
    idx.apply('b', w('b', [b64([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])]));
    assert.equal(idx.lookup('10.0.0.5', false)?.workloadName, 'a');
    assert.equal(idx.lookup('::ffff:10.0.0.5', false)?.workloadName, 'a');
    assert.equal(idx.lookup('2001:db8::1', false)?.workloadName, 'b');
    assert.equal(idx.lookup('10.0.0.6', false), undefined);
    const p = idx.lookup('10.0.0.5', true)!;
    assert.deepEqual([p.namespace, p.canonicalName, p.canonicalRevision, p.clusterId, p.shared, String(p)],
      ['ns', 'a', 'v1', 'c1', 'ONCE', 'k8s.cluster.name=c1,k8s.namespace.name=ns,k8s.deployment.name=a,service.name=a,service.version=v1,app.name=a,app.version=v1']);
    assert.equal(idx.lookup('10.0.0.5', true), p, 'the same object each time (stats caches key on it)');
  });

  test('an address that moves to another workload, and a removed workload', () => {
    const idx = new WorkloadIndex();
    idx.apply('a', w('a', [b64([10, 0, 0, 5])]));
    idx.apply('b', w('b', [b64([10, 0, 0, 5])]));
    assert.equal(idx.lookup('10.0.0.5', false)?.workloadName, 'b');
    idx.remove('a');
    assert.equal(idx.lookup('10.0.0.5', false)?.workloadName, 'b', 'removing the old owner leaves the new one');
    idx.remove('b');
    assert.equal(idx.lookup('10.0.0.5', false), undefined);
    assert.equal(idx.size, 0);
  });

  test('a SotW (full state) update removes workloads it no longer lists', async () => {
    const store = new StatsStore();
    const clusters = new ClusterManager(store);
    const dc = new DynamicConfig(clusters, new ListenerManager(clusters, store, false), new Set(), new Set());
    const idx = new WorkloadIndex();
    dc.setSink(TYPE_URL.workload, { wildcard: true, apply: (n, j) => idx.apply(n, j), remove: (n) => idx.remove(n) });
    assert.deepEqual(dc.interest(TYPE_URL.workload).wildcard, true);
    const r = (uid: string, ip: number) => ({ name: uid, version: '1', json: w(uid, [b64([10, 0, 0, ip])]) });
    await dc.apply({ typeUrl: TYPE_URL.workload, version: '1', resources: [r('a', 1), r('b', 2)], removed: [], full: true });
    assert.equal(idx.size, 2);
    await dc.apply({ typeUrl: TYPE_URL.workload, version: '2', resources: [r('b', 2)], removed: [], full: true });
    assert.equal(idx.lookup('10.0.0.1', false), undefined);
    assert.equal(idx.lookup('10.0.0.2', false)?.workloadName, 'b');
  });
});

describe('istio.workload.BootstrapExtension config', () => {
  const ext = (value: Record<string, unknown>) => new Msg({ name: 'metadata_discovery', typed_config: { '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct', type_url: 'type.googleapis.com/istio.workload.BootstrapExtension', value } }, 'bootstrap_extensions[0]');
  test('ADS only; once; and it needs dynamic_resources', () => {
    assert.deepEqual(compileBootstrapExtensions([ext({ config_source: { ads: {} } })]).workloadDiscovery, { path: 'bootstrap_extensions[0].typed_config' });
    assert.throws(() => compileBootstrapExtensions([ext({ config_source: { path_config_source: { path: '/x' } } })]), /bootstrap_extensions\[0\]\.typed_config\.value\.config_source: only `ads: \{\}` config sources are supported for workload discovery/);
    assert.throws(() => compileBootstrapExtensions([ext({ config_source: { ads: {} } }), ext({ config_source: { ads: {} } })]), /given twice/);
    assert.throws(() => compileBootstrapExtensions([ext({})]), /config_source: is required/);
    assert.throws(() => compileBootstrap({ bootstrap_extensions: [ext({ config_source: { ads: {} } }).raw] }), /bootstrap_extensions\[0\]\.typed_config: workload discovery over ADS needs dynamic_resources\.ads_config/);
  });
});
