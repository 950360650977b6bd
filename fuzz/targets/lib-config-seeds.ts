/**
 * Real configs the config target mutates, read from shared/fixtures once per process: Envoy's
 * example bootstraps, Istio's bootstrap golden files, and the listeners, clusters, route tables and
 * endpoint assignments of istiod's config dumps.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseYaml } from '../../test/lib/yaml.ts';
import { normalizeKeys } from '../../packages/proxy/src/config/normalize.ts';

export type SeedKind = 'bootstrap' | 'listener' | 'cluster' | 'route' | 'endpoints';
export interface Seed { readonly kind: SeedKind; readonly name: string; readonly json: Record<string, unknown> }

const FIXTURES = [path.resolve(import.meta.dirname, '../../../shared/fixtures'), path.resolve(import.meta.dirname, '../../../../shared/fixtures'), '/work/shared/fixtures']
  .find((d) => existsSync(d)) ?? '';

const BOOTSTRAPS = [
  'envoyproxy-envoy/configs/envoy-demo.yaml', 'envoyproxy-envoy/configs/envoyproxy_io_proxy.yaml',
  'envoyproxy-envoy/configs/encapsulate_in_http2_connect.yaml', 'envoyproxy-envoy/configs/terminate_http2_connect.yaml',
  'envoyproxy-envoy/configs/internal_listener_proxy.yaml', 'envoyproxy-examples/fault-injection/envoy.yaml',
  'envoyproxy-examples/rbac/envoy.yaml', 'envoyproxy-examples/route-mirror/envoy.yaml', 'envoyproxy-examples/dynamic-config-cp/envoy.yaml',
  'istio-istio/pkg/bootstrap/testdata/default_golden.json', 'istio-istio/pkg/bootstrap/testdata/ambient_golden.json',
];
const DUMPS = [
  'istio-istio/istioctl/pkg/authz/testdata/configdump.yaml',
  'istio-istio/istioctl/pkg/describe/testdata/describe/http_config.json',
  'istio-istio/istioctl/pkg/proxyconfig/testdata/config_dump.json',
  'istio-istio/istioctl/pkg/writer/compare/testdata/configdump.json',
  'istio-istio/istioctl/pkg/writer/envoy/configdump/testdata/endpoint/configdump.json',
];

type Json = Record<string, unknown>;

function read(rel: string): unknown {
  const text = readFileSync(path.join(FIXTURES, rel), 'utf8');
  return normalizeKeys(rel.endsWith('.json') ? JSON.parse(text) : parseYaml(text));
}

/** Every resource of a config dump, by the field that holds it. */
function fromDump(doc: unknown, out: Seed[], name: string): void {
  const configs = ((doc as Json).configs as Json[] | undefined) ?? [doc as Json];
  for (const c of configs) {
    const add = (kind: SeedKind, r: unknown): void => { if (r && typeof r === 'object') out.push({ kind, name, json: stripType(r as Json) }); };
    for (const l of [...(c.static_listeners as Json[] ?? []), ...(c.dynamic_listeners as Json[] ?? [])]) add('listener', (l.active_state as Json | undefined)?.listener ?? l.listener);
    for (const k of [...(c.static_clusters as Json[] ?? []), ...(c.dynamic_active_clusters as Json[] ?? [])]) add('cluster', k.cluster);
    for (const r of [...(c.static_route_configs as Json[] ?? []), ...(c.dynamic_route_configs as Json[] ?? [])]) add('route', r.route_config);
    for (const e of [...(c.static_endpoint_configs as Json[] ?? []), ...(c.dynamic_endpoint_configs as Json[] ?? [])]) add('endpoints', e.endpoint_config);
  }
}

function stripType(j: Json): Json {
  const { '@type': _drop, ...rest } = j;
  return rest;
}

let cache: Seed[] | undefined;

export function seeds(): Seed[] {
  if (cache) return cache;
  if (!FIXTURES) throw new Error('shared/fixtures not found beside the repository');
  const out: Seed[] = [];
  for (const b of BOOTSTRAPS) out.push({ kind: 'bootstrap', name: b, json: read(b) as Json });
  for (const d of DUMPS) fromDump(read(d), out, d);
  cache = out;
  return out;
}
