// What --concurrency workers are sent after a CDS update: each rebuilt cluster's JSON as one string
// (never the bytes: a view into the whole response), parsed and compiled on the worker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DynamicConfig } from '../src/xds/dynamic-config.ts';
import { FOLLOWER_CHUNK, followerUpdates, receivedUpdate } from '../src/xds/follower-updates.ts';
import { ClusterManager } from '../src/upstream/manager.ts';
import { ListenerManager } from '../src/listener/manager.ts';
import { StatsStore } from '../src/stats/store.ts';
import { TYPE_URL } from '../src/xds/discovery.ts';
import { encodeResource } from '../src/xds/encode.ts';
import { decodeResource } from '../src/xds/decode.ts';
import type { XdsUpdate } from '../src/xds/types.ts';

function config(): { dc: DynamicConfig; clusters: ClusterManager } {
  const store = new StatsStore();
  const clusters = new ClusterManager(store);
  return { dc: new DynamicConfig(clusters, new ListenerManager(clusters, store, false), new Set(), new Set()), clusters };
}

test('a CDS update crosses to a worker as JSON text and is built there alike', async () => {
  const main = config();
  main.dc.recordClusterChanges = true;
  const cluster = (name: string): Record<string, unknown> => ({ '@type': TYPE_URL.cluster, name, type: 'EDS', eds_cluster_config: { eds_config: { ads: {} }, service_name: `svc-${name}` } });
  // The Anys are views into one larger buffer, as in a real response.
  const whole = Buffer.concat([Buffer.alloc(100_000), ...['a', 'b'].map((n) => Buffer.from(encodeResource(cluster(n)).value))]);
  let at = 100_000;
  const resources = ['a', 'b'].map((name) => {
    const len = encodeResource(cluster(name)).value.length;
    const any = { type_url: TYPE_URL.cluster, value: whole.subarray(at, at + len) };
    at += len;
    return { name, version: '1', json: decodeResource(any), any };
  });
  const u: XdsUpdate = { typeUrl: TYPE_URL.cluster, version: '1', resources, removed: [], full: true };
  assert.deepEqual(await main.dc.apply(u), []);
  const parts = [...followerUpdates(u, main.dc)];
  assert.equal(parts.length, 1);
  const sent = structuredClone(parts[0]);
  assert.ok(JSON.stringify(sent).length < 2_000, 'the message holds the clusters, not the whole response');
  assert.ok(sent.resources.every((r) => typeof (r as { text?: unknown }).text === 'string' && !('any' in r)));
  const worker = config();
  worker.dc.retainConfig = false;
  assert.deepEqual(await worker.dc.apply(receivedUpdate(sent)), []);
  assert.equal(worker.dc.warmingClusters.get('b')?.cluster.config.edsServiceName, 'svc-b');
  assert.deepEqual([...worker.dc.eds.names].sort(), ['svc-a', 'svc-b']);
  // Sent once: the change is not kept (nor its JSON) until the next update.
  assert.deepEqual([...followerUpdates(u, main.dc)][0].resources, []);
  main.clusters.closeAll();
  worker.clusters.closeAll();
});

test('a large CDS change goes to workers in chunks of FOLLOWER_CHUNK, each made when asked for', async () => {
  const main = config();
  main.dc.recordClusterChanges = true;
  const n = 2 * FOLLOWER_CHUNK + 50;
  const resources = Array.from({ length: n }, (_, i) => {
    const any = encodeResource({ '@type': TYPE_URL.cluster, name: `c${i}`, type: 'EDS', eds_cluster_config: { eds_config: { ads: {} } } });
    return { name: `c${i}`, version: '1', json: decodeResource(any), any };
  });
  assert.deepEqual(await main.dc.apply({ typeUrl: TYPE_URL.cluster, version: '1', resources, removed: [], full: true }), []);
  const parts = followerUpdates({ typeUrl: TYPE_URL.cluster, version: '1', resources, removed: [], full: true }, main.dc);
  const first = parts.next();
  assert.equal(first.done, false);
  assert.equal(first.value.resources.length, FOLLOWER_CHUNK);
  assert.equal((first.value.resources[0] as { text?: string }).text, JSON.stringify(resources[0].json));
  const rest = [...parts];
  assert.deepEqual(rest.map((p) => [p.resources.length, p.removed.length]), [[FOLLOWER_CHUNK, 0], [50, 0]]);
  main.clusters.closeAll();
});
