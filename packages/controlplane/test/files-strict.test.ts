// skua-controlplane's file loader refuses a misspelled field naming the file, the resource and the
// field's path in that file (a resources list, a config dump, a YAML stream, a TypedStruct value),
// and the file's last good content keeps serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FileSource, type FileProblem } from '../src/files.ts';

const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';

function cluster(name: string, timeoutKey = 'connect_timeout'): Record<string, unknown> {
  return { '@type': CLUSTER, name, type: 'EDS', [timeoutKey]: '2s', eds_cluster_config: { eds_config: { ads: {} } } };
}

test('misspelled fields: file, resource and path in the file; the last good content keeps serving', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-cp-strict-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string, mtime: number): string => {
    const f = path.join(dir, name);
    writeFileSync(f, text);
    utimesSync(f, mtime, mtime); // a distinct mtime per write: the source re-reads changed files only
    return f;
  };
  const src = new FileSource(dir);
  const list = file('list.json', JSON.stringify({ resources: [cluster('a'), cluster('b')] }), 1000);
  const dump = file('dump.json', JSON.stringify({ configs: [{ '@type': 'type.googleapis.com/envoy.admin.v3.BootstrapConfigDump' },
    { '@type': 'type.googleapis.com/envoy.admin.v3.ClustersConfigDump', dynamic_active_clusters: [{ cluster: cluster('c') }] }] }), 1000);
  const problems = (): readonly FileProblem[] => src.problems;
  let groups = src.scan();
  assert.deepEqual(problems(), []);
  const names = (): string[] => groups.flatMap((g) => [...(g.byType.get(CLUSTER)?.keys() ?? [])]).sort();
  assert.deepEqual(names(), ['a', 'b', 'c']);

  file('list.json', JSON.stringify({ resources: [cluster('a'), cluster('b', 'conect_timeout')] }), 2000);
  file('dump.json', JSON.stringify({ configs: [{ '@type': 'type.googleapis.com/envoy.admin.v3.BootstrapConfigDump' },
    { '@type': 'type.googleapis.com/envoy.admin.v3.ClustersConfigDump', dynamic_active_clusters: [{ cluster: cluster('c', 'connectTimeot') }] }] }), 2000);
  const tsListener = { '@type': LISTENER, name: 'l1', filter_chains: [{ filters: [{ name: 'hcm', typed_config: {
    '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct', type_url: HCM, value: { stat_prefix: 'x', stream_idle_timout: '1s' } } }] }] };
  const stream = file('stream.yaml', `${JSON.stringify(cluster('d'))}\n---\n${JSON.stringify(tsListener)}\n`, 2000);
  groups = src.scan();
  assert.deepEqual(problems().map((p) => `${p.file} ${p.message}`).sort(), [
    `${dump} c: configs[1].dynamic_active_clusters[0].cluster.connectTimeot: unknown field of envoy.config.cluster.v3.Cluster`,
    `${list} b: resources[1].conect_timeout: unknown field of envoy.config.cluster.v3.Cluster`,
    `${stream} l1: documents[1].filter_chains[0].filters[0].typed_config.value.stream_idle_timout: unknown field of envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`,
  ]);
  // The two files that were good before keep their last good content; the new bad file serves nothing.
  assert.deepEqual(names(), ['a', 'b', 'c']);
});
