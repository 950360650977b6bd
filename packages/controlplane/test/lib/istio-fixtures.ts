// Shared by the istio-* tests: the fixtures, Bookinfo's platform YAML in the light Pod form, and
// applying translated config through the proxy's own xDS layer (decode + compile, nothing bound).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { decodeResource, TYPE_URL } from '@skua/proxy/xds';
import { DynamicConfig, ClusterManager, ListenerManager, StatsStore } from '@skua/proxy/envoy';
import type { XdsResource } from '@skua/proxy/xds';
import { meshGroups } from '../../src/mesh/source.ts';
import type { MeshConfig } from '../../src/mesh/translate.ts';

type Json = Record<string, unknown>;

export const FIX = fileURLToPath(new URL('../../../../../shared/fixtures/', import.meta.url));

export function fixture(rel: string): string {
  return readFileSync(FIX + rel, 'utf8');
}

export function byName(list: readonly Json[], name: string): Json {
  const r = list.find((x) => (x.name ?? x.cluster_name) === name);
  assert.ok(r, `${name} in ${list.map((x) => x.name ?? x.cluster_name).join(', ')}`);
  return r;
}

function service(name: string, namespace = 'default', port = 9080, selector = `{ app: ${name} }`): string {
  return `apiVersion: v1\nkind: Service\nmetadata: { name: ${name}, namespace: ${namespace} }\nspec: { ports: [{ port: ${port}, name: http }], selector: ${selector} }\n`;
}

/** `none`: interceptionMode NONE (listeners bind the pod address; outbound ones 127.0.9.<last octet>). */
function pod(name: string, ip: string, labels: string, sa: string, none: boolean, namespace = 'default', gateway = false): string {
  const annotations = [gateway ? 'inject.istio.io/templates: gateway' : '', none ? 'sidecar.istio.io/interceptionMode: NONE' : '', none && !gateway ? `sidecar.skua.io/outboundIP: 127.0.9.${ip.split('.')[3]}` : ''].filter(Boolean);
  return `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n  namespace: ${namespace}\n  labels: ${labels}\n  annotations: { ${annotations.join(', ')} }\n`
    + `spec: { serviceAccountName: ${sa}, containers: [{ name: app, ports: [{ containerPort: 9080, name: http, ${none ? `hostIP: ${ip}, hostPort: 19080` : ''} }] }] }\nstatus: { podIP: ${ip} }\n`;
}

/** Bookinfo (platform/kube/bookinfo.yaml and bookinfo-versions.yaml's Services) with one pod per workload and an ingress gateway pod. */
export function bookinfoPlatform(none = false): string {
  return [
    service('productpage'), service('details'), service('reviews'), service('ratings'),
    service('reviews-v1', 'default', 9080, '{ app: reviews, version: v1 }'), service('reviews-v2', 'default', 9080, '{ app: reviews, version: v2 }'),
    pod('productpage-v1-6b7f-x1', '10.244.0.11', '{ app: productpage, version: v1 }', 'bookinfo-productpage', none),
    pod('details-v1-5f4d-x1', '10.244.0.12', '{ app: details, version: v1 }', 'bookinfo-details', none),
    pod('reviews-v1-7d9b-x1', '10.244.0.21', '{ app: reviews, version: v1 }', 'bookinfo-reviews', none),
    pod('reviews-v2-6c5b-x1', '10.244.0.22', '{ app: reviews, version: v2 }', 'bookinfo-reviews', none),
    pod('reviews-v3-5b9c-x1', '10.244.0.23', '{ app: reviews, version: v3 }', 'bookinfo-reviews', none),
    pod('ratings-v1-7c8d-x1', '10.244.0.31', '{ app: ratings, version: v1 }', 'bookinfo-ratings', none),
    pod('istio-ingressgateway-5d7f-gw1', '10.244.0.41', '{ app: istio-ingressgateway, istio: ingressgateway }', 'istio-ingressgateway-service-account', none, 'istio-system', true),
  ].join('---\n');
}

export const BOOKINFO_PLATFORM = bookinfoPlatform();

/**
 * Encodes every proxy's resources as the control plane serves them and applies them as that proxy
 * would; fails naming any resource the proxy refuses (under iptables capture the inbound clusters'
 * 127.0.0.6 bind is a known refusal).
 */
export async function acceptedByProxy(config: MeshConfig): Promise<void> {
  const groups = meshGroups('istio', config);
  for (const nodeId of config.sidecars.keys()) {
    const store = new StatsStore();
    const clusters = new ClusterManager(store);
    const dynamic = new DynamicConfig(clusters, new ListenerManager(clusters, store, false), new Set(), new Set());
    let count = 0;
    for (const typeUrl of [TYPE_URL.cluster, TYPE_URL.endpoint, TYPE_URL.listener, TYPE_URL.route]) {
      const decoded: XdsResource[] = [];
      for (const g of groups) {
        if (!g.nodes.all && !g.nodes.exact.has(nodeId)) continue;
        for (const r of g.byType.get(typeUrl)?.values() ?? []) decoded.push({ name: r.name, version: r.version, json: decodeResource(r.any) });
      }
      count += decoded.length;
      for (const x of await dynamic.apply({ typeUrl, version: 'v1', resources: decoded, removed: [], full: false })) {
        if (x.name.startsWith('inbound|') && x.message === 'upstream_bind_config: is not supported yet') continue;
        assert.fail(`${nodeId}: ${x.name}: ${x.message}`);
      }
    }
    assert.ok(count > 10, `${nodeId}: ${count} resources`);
    for (const c of clusters.all()) c.close();
  }
}
