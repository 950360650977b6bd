// Every istiod-generated config in the fixtures, loaded by the control plane's file loader
// (encoded to protobuf Anys as it would serve them), decoded by the proxy's xDS layer and
// applied to a real DynamicConfig (listeners are not bound): each resource is ACKed, or
// NACKed with a message naming the field and the extension not built yet. Prints the table.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { loadFile } from '../src/files.ts';
import { decodeResource, TYPE_URL } from '@skua/proxy/xds';
import { DynamicConfig, ClusterManager, ListenerManager, StatsStore, compileBootstrap } from '@skua/proxy/envoy';
import type { XdsResource } from '@skua/proxy/xds';

const FIXTURES = fileURLToPath(new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/', import.meta.url));
const FILES = [
  'authz/testdata/configdump.yaml',
  'proxyconfig/testdata/config_dump.json',
  'writer/compare/testdata/configdump.json',
  'describe/testdata/describe/http_config.json',
  'writer/envoy/configdump/testdata/endpoint/configdump.json',
  'writer/envoy/configdump/testdata/routes/istio-gateway-http-route-prefix/configdump.json',
  'writer/envoy/configdump/testdata/routes/k8s-gateway-http-route-path-prefix/configdump.json',
  'writer/envoy/configdump/testdata/secret/istio/config_dump.json',
  'writer/envoy/configdump/testdata/ecds/configdump.json',
];
/** istiod's waypoint dumps: every resource must be accepted (the matcher tree, peer metadata, WDS discovery). */
const WAYPOINT_DUMPS = new Set(['proxyconfig/testdata/config_dump.json', 'writer/compare/testdata/configdump.json']);
/** pilot-agent's rendered bootstraps (sidecar and ambient), compiled as the proxy loads them. */
const BOOTSTRAPS = ['default_golden.json', 'ambient_golden.json'];
const BOOTSTRAP_DIR = fileURLToPath(new URL('../../../../shared/fixtures/istio-istio/pkg/bootstrap/testdata/', import.meta.url));
const ORDER = [TYPE_URL.cluster, TYPE_URL.endpoint, TYPE_URL.route, TYPE_URL.secret, TYPE_URL.extension, TYPE_URL.listener];

interface Row { file: string; type: string; name: string; result: string }

async function applyFile(file: string): Promise<Row[]> {
  const group = loadFile(FIXTURES + file);
  const store = new StatsStore();
  const clusters = new ClusterManager(store);
  const dynamic = new DynamicConfig(clusters, new ListenerManager(clusters, store, false), new Set(), new Set());
  const rows: Row[] = [];
  for (const typeUrl of ORDER) {
    const resources = group.byType.get(typeUrl);
    if (!resources) continue;
    const decoded: XdsResource[] = [...resources.values()].map((r) => ({ name: r.name, version: r.version, json: decodeResource(r.any) }));
    const rejected = new Map((await dynamic.apply({ typeUrl, version: 'v1', resources: decoded, removed: [], full: false })).map((x) => [x.name, x.message]));
    for (const r of decoded) rows.push({ file, type: typeUrl.slice(typeUrl.lastIndexOf('.') + 1), name: r.name, result: rejected.get(r.name) ?? 'ACK' });
  }
  for (const c of clusters.all()) c.close();
  return rows;
}

describe('istiod-generated fixtures through the control plane and the proxy xDS layer', () => {
  const rows: Row[] = [];
  for (const f of FILES) {
    test(`${f}: every resource is ACKed or NACKed precisely`, async () => {
      const r = await applyFile(f);
      assert.ok(r.length > 0, 'the file has resources');
      for (const row of r) {
        if (row.result === 'ACK') continue;
        // A precise NACK names a field path and says what is missing.
        assert.match(row.result, /^[\w.[\]\-"@]+: .*(unsupported|not supported|is required|are not supported)/, `${row.name}: ${row.result}`);
      }
      if (WAYPOINT_DUMPS.has(f)) for (const row of r) assert.equal(row.result, 'ACK', `waypoint ${row.type} ${row.name}`);
      rows.push(...r);
    });
  }
  for (const f of BOOTSTRAPS) {
    test(`bootstrap ${f}: compiles, or refuses precisely`, () => {
      let result = 'ACK';
      try { compileBootstrap(JSON.parse(readFileSync(BOOTSTRAP_DIR + f, 'utf8')) as Record<string, unknown>); } catch (e) { result = (e as Error).message; }
      // Pipe clusters, the internal listener and (ambient) workload discovery extensions, the compressors.
      assert.equal(result, 'ACK', f);
      rows.push({ file: `pkg/bootstrap/testdata/${f}`, type: 'Bootstrap', name: f.replace('_golden.json', ''), result });
    });
  }
  test('table', () => {
    const acked = rows.filter((r) => r.result === 'ACK').length;
    console.log(`| file | type | resource | result |\n|---|---|---|---|\n${rows.map((r) => `| ${r.file.split('/testdata/')[0]} | ${r.type} | ${r.name} | ${r.result.replace(/\|/g, '\\|')} |`).join('\n')}`);
    console.log(`ACK ${acked} / ${rows.length}`);
    const reasons = new Map<string, number>();
    for (const r of rows) if (r.result !== 'ACK') { const k = r.result.replace(/^[^:]*: /, ''); reasons.set(k, (reasons.get(k) ?? 0) + 1); }
    console.log([...reasons].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${n}× ${k}`).join('\n'));
    // Routes and endpoints must all be accepted (internal-listener endpoint addresses included).
    for (const r of rows) {
      if (r.type !== 'ClusterLoadAssignment' && r.type !== 'RouteConfiguration') continue;
      assert.equal(r.result, 'ACK', `${r.file} ${r.name}`);
    }
  });
});
