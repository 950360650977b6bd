// Waypoints from Istio YAML (Istio's own samples: samples/ambient-argo reviews-waypoint.yaml, the
// GAMMA route-reviews-90-10.yaml), decided without I/O and compared with istiod's waypoint dumps in
// the fixtures (istioctl's compare/testdata/configdump.json and proxyconfig/testdata/config_dump.json):
// the three listeners, the inbound-vip clusters and endpoints, the filters in istiod's order; the
// AuthorizationPolicies attached by targetRefs land on the waypoint only (peer principal from filter
// state); WDS points the bound services at the waypoint; every resource is accepted by the proxy.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { readText } from '../src/istio/documents.ts';
import { buildMesh, collect, resourcesOf } from '../src/istio/build/build.ts';
import { translateMesh } from '../src/mesh/translate.ts';
import { parseMesh } from '../src/mesh/model.ts';
import { acceptedByProxy, BOOKINFO_PLATFORM, byName, fixture } from './lib/istio-fixtures.ts';

type Json = Record<string, unknown>;
const j = (x: unknown): Json => JSON.parse(JSON.stringify(x)) as Json;
const WP = 'waypoint~10.244.0.50~bookinfo-reviews-5c8d-wp1.default~default.svc.cluster.local';

/** istiod's waypoint dump (the trimmed one with all three listeners) and the full one (clusters, endpoints). */
function dump(rel: string): { listeners: Json[]; clusters: Json[]; endpoints: Json[] } {
  const configs = (JSON.parse(fixture(`istio-istio/istioctl/pkg/${rel}`)) as { configs: Json[] }).configs;
  const all = (k: string, inner: string): Json[] => configs.flatMap((c) => ((c[k] ?? []) as Json[]).map((x) => ((x.active_state as Json | undefined)?.[inner] ?? x[inner]) as Json));
  return { listeners: all('dynamic_listeners', 'listener'), clusters: all('dynamic_active_clusters', 'cluster'), endpoints: all('dynamic_endpoint_configs', 'endpoint_config') };
}
const COMPARE = dump('writer/compare/testdata/configdump.json');
const FULL = dump('proxyconfig/testdata/config_dump.json');
/** A matcher tree's port level under its first IP range. */
const portTreeOf = (m: Json, i: number): Json => {
  const ranges = ((((m.matcher_tree as Json).custom_match as Json).typed_config as Json).range_matchers as Json[]);
  return (((ranges[i].on_match as Json).matcher as Json).matcher_tree as Json);
};

const WAYPOINT_POD = `apiVersion: v1
kind: Pod
metadata: { name: bookinfo-reviews-5c8d-wp1, namespace: default, labels: { gateway.networking.k8s.io/gateway-name: bookinfo-reviews } }
spec: { serviceAccountName: bookinfo-reviews-waypoint }
status: { podIP: 10.244.0.50 }
`;
const REVIEWS_GET = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: { name: reviews-get, namespace: default }
spec:
  targetRefs: [{ kind: Service, group: "", name: reviews }]
  rules: [{ from: [{ source: { principals: ["cluster.local/ns/default/sa/bookinfo-productpage"] } }], to: [{ operation: { methods: [GET] } }] }]
`;
const DENY_POST = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: { name: no-post, namespace: default }
spec:
  targetRefs: [{ kind: Gateway, group: gateway.networking.k8s.io, name: bookinfo-reviews }]
  action: DENY
  rules: [{ to: [{ operation: { methods: [POST] } }] }]
`;
/** Bookinfo in ambient: pods without sidecars, HBONE; reviews (and reviews-v1/v2 for the split) bound to the waypoint. */
function ambientBookinfo(bindVersions: boolean): string {
  let y = BOOKINFO_PLATFORM.replace(/annotations: \{ *\}/g, 'annotations: { sidecar.istio.io/inject: "false" }')
    .replace(/labels: \{ app: (\w+), version: (\w+) \}/g, 'labels: { app: $1, version: $2, istio.io/dataplane-mode: ambient }')
    .replace('metadata: { name: reviews, namespace: default }', 'metadata: { name: reviews, namespace: default, labels: { istio.io/use-waypoint: bookinfo-reviews } }');
  if (bindVersions) for (const v of ['reviews-v1', 'reviews-v2']) y = y.replace(`metadata: { name: ${v}, namespace: default }`, `metadata: { name: ${v}, namespace: default, labels: { istio.io/use-waypoint: bookinfo-reviews } }`);
  return y;
}

function build(bindVersions: boolean, ...extra: string[]) {
  const texts = [ambientBookinfo(bindVersions), fixture('istio-istio/samples/ambient-argo/application/reviews-waypoint.yaml'), WAYPOINT_POD, ...extra];
  const docs = texts.flatMap((t, i) => readText(t, `f${i}.yaml`));
  assert.deepEqual(docs.flatMap((d) => d.problems).filter((p) => p.level !== 'Info'), [], 'the YAML is valid, and waypoints and targetRefs are applied (no SKUA0001)');
  const { mesh, problems } = buildMesh(collect(resourcesOf(docs)));
  const out = translateMesh(mesh);
  return { mesh, problems, out, wp: out.sidecars.get(WP)! };
}

describe('waypoint config from Istio YAML, shaped like istiod\'s dumps', () => {
  test('the waypoint pod is node waypoint~…; its listeners are istiod\'s three; connect_terminate and connect_originate equal the fixture\'s', () => {
    const { wp, problems } = build(false);
    assert.deepEqual(problems.filter((p) => p.level === 'Error'), []);
    assert.ok(wp, 'a waypoint node');
    const listeners = wp.filter((r) => String(r['@type']).endsWith('Listener'));
    assert.deepEqual(listeners.map((l) => l.name), COMPARE.listeners.map((l) => l.name));
    assert.deepEqual(j(byName(wp, 'connect_terminate')), COMPARE.listeners[0]);
    assert.deepEqual(j(byName(wp, 'connect_originate')), COMPARE.listeners[2]);
  });

  test('main_internal: internal, original_dst + http_inspector, a matcher on VIP then port naming inbound-vip chains with istiod\'s waypoint filters', () => {
    const { wp, mesh } = build(false, fixture('istio-istio/samples/bookinfo/gateway-api/route-reviews-90-10.yaml'));
    const ours = byName(wp, 'main_internal');
    const theirs = COMPARE.listeners[1];
    assert.deepEqual([ours.internal_listener, ours.traffic_direction], [theirs.internal_listener, theirs.traffic_direction]);
    assert.deepEqual((ours.listener_filters as Json[]).map((f) => f.name), (theirs.listener_filters as Json[]).map((f) => f.name));
    const tree = (m: Json): Json => (m.matcher_tree as Json);
    assert.deepEqual(tree(ours.filter_chain_matcher as Json).input, tree(theirs.filter_chain_matcher as Json).input);
    const ranges = ((tree(ours.filter_chain_matcher as Json).custom_match as Json).typed_config as Json).range_matchers as Json[];
    const reviews = mesh.services.find((s) => s.name === 'reviews')!;
    assert.deepEqual(ranges.map((r) => r.ranges), [[{ address_prefix: reviews.vip, prefix_len: 32 }]]);
    const portTree = portTreeOf(ours.filter_chain_matcher as Json, 0);
    const theirPortTree = portTreeOf(theirs.filter_chain_matcher as Json, 1);
    assert.deepEqual(portTree.input, theirPortTree.input);
    // istiod (2024+) names a chain after its cluster, `inbound-vip|<port>|http|<host>` (the 2024-03 dump: `inbound-vip|<port>||<host>-http`).
    assert.deepEqual(Object.keys((portTree.exact_match_map as Json).map as Json), ['9080']);
    const chain = (ours.filter_chains as Json[])[0];
    assert.equal(chain.name, 'inbound-vip|9080|http|reviews.default.svc.cluster.local');
    const hcm = ((chain.filters as Json[])[0].typed_config) as Json;
    const theirHcm = (((theirs.filter_chains as Json[])[0].filters as Json[])[0].typed_config) as Json;
    assert.deepEqual(hcm.http_filters, theirHcm.http_filters, 'no policies: exactly istiod\'s filters and typed configs');
    for (const k of ['stat_prefix', 'server_name', 'use_remote_address', 'upgrade_configs', 'stream_idle_timeout', 'normalize_path', 'request_id_extension', 'path_with_escaped_slashes_action']) {
      assert.deepEqual(hcm[k], k === 'stat_prefix' ? 'inbound_0.0.0.0_9080' : theirHcm[k], k);
    }
    // The GAMMA route (Service parentRef, 90/10) is applied at the waypoint: reviews-v1/v2 are not bound to it, so their outbound clusters.
    const vh = ((hcm.route_config as Json).virtual_hosts as Json[])[0];
    assert.equal(vh.name, 'inbound|http|9080');
    const route = (vh.routes as Json[])[0];
    assert.deepEqual(((route.route as Json).weighted_clusters as Json).clusters, [
      { name: 'outbound|9080||reviews-v1.default.svc.cluster.local', weight: 90 }, { name: 'outbound|9080||reviews-v2.default.svc.cluster.local', weight: 10 },
    ]);
  });

  test('without a route the default inbound route of istiod\'s dump; with the versions bound, the split goes to their inbound-vip clusters', () => {
    const plain = build(false).wp;
    const hcm = (((byName(plain, 'main_internal').filter_chains as Json[])[0].filters as Json[])[0].typed_config) as Json;
    const theirHcm = ((((COMPARE.listeners[1].filter_chains as Json[])[0].filters as Json[])[0].typed_config) as Json);
    const ourRoute = j(((hcm.route_config as Json).virtual_hosts as Json[])[0]);
    const theirRoute = j(((theirHcm.route_config as Json).virtual_hosts as Json[])[0]);
    assert.deepEqual(JSON.stringify(ourRoute).replaceAll('reviews', 'details'), JSON.stringify(theirRoute));
    const { wp } = build(true, fixture('istio-istio/samples/bookinfo/gateway-api/route-reviews-90-10.yaml'));
    const chains = byName(wp, 'main_internal').filter_chains as Json[];
    assert.deepEqual(chains.map((c) => c.name), ['reviews', 'reviews-v1', 'reviews-v2'].map((s) => `inbound-vip|9080|http|${s}.default.svc.cluster.local`));
    const split = ((((((chains[0].filters as Json[])[0].typed_config as Json).route_config as Json).virtual_hosts as Json[])[0].routes as Json[])[0].route as Json).weighted_clusters as Json;
    assert.deepEqual((split.clusters as Json[]).map((c) => c.name), ['reviews-v1', 'reviews-v2'].map((s) => `inbound-vip|9080|http|${s}.default.svc.cluster.local`));
  });

  test('inbound-vip clusters and endpoints: the fixture cluster\'s fields; endpoints are connect_originate with the pod as original destination', () => {
    const { wp } = build(false, 'apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: { name: reviews }\nspec: { host: reviews, subsets: [{ name: v1, labels: { version: v1 } }] }\n');
    const theirs = FULL.clusters.find((c) => String(c.name).startsWith('inbound-vip'))!;
    const ours = byName(wp, 'inbound-vip|9080|http|reviews.default.svc.cluster.local');
    for (const k of ['type', 'eds_cluster_config', 'transport_socket', 'common_lb_config']) {
      assert.deepEqual(j(ours[k]), k === 'eds_cluster_config' ? { ...(theirs[k] as Json), service_name: ours.name } : theirs[k], k);
    }
    assert.deepEqual(((ours.metadata as Json).filter_metadata as Json).istio, { services: [{ host: 'reviews.default.svc.cluster.local', name: 'reviews', namespace: 'default' }], config: '/apis/networking.istio.io/v1alpha3/namespaces/default/destination-rule/reviews' });
    byName(wp, 'inbound-vip|9080|http/v1|reviews.default.svc.cluster.local');
    const cla = wp.find((r) => r.cluster_name === 'inbound-vip|9080|http/v1|reviews.default.svc.cluster.local')!;
    const ep = ((cla.endpoints as Json[])[0].lb_endpoints as Json[]);
    assert.equal(ep.length, 1, 'the v1 subset: one pod');
    const their = ((FULL.endpoints[0].endpoints as Json[])[0].lb_endpoints as Json[])[0];
    assert.deepEqual(Object.keys(ep[0]).sort(), Object.keys(their).sort());
    assert.deepEqual(ep[0].endpoint, { address: { envoy_internal_address: { server_listener_name: 'connect_originate', endpoint_id: '10.244.0.21:9080' } }, health_check_config: {} });
    assert.deepEqual(Object.keys(((ep[0].metadata as Json).filter_metadata as Json)).sort(), Object.keys(((their.metadata as Json).filter_metadata as Json)).sort());
    assert.deepEqual(((ep[0].metadata as Json).filter_metadata as Json)['envoy.filters.listener.original_dst'], { local: '10.244.0.21:9080' });
    const co = wp.find((r) => r.name === 'connect_originate' && String(r['@type']).endsWith('.Cluster'))!;
    assert.deepEqual([co.type, co.lb_policy, co.original_dst_lb_config], ['ORIGINAL_DST', 'CLUSTER_PROVIDED', { upstream_port_override: 15008 }]);
    const tls = ((co.transport_socket as Json).typed_config as Json).common_tls_context as Json;
    const theirTls = (((COMPARE.listeners[0].filter_chains as Json[])[0].transport_socket as Json).typed_config as Json).common_tls_context;
    assert.deepEqual(tls, theirTls, 'HBONE both ways: TLS 1.3, h2, the workload certificate, peers of the trust domain');
  });

  test('AuthorizationPolicies by targetRefs (Gateway, Service) apply at the waypoint with the HBONE peer\'s principal, DENY first; not on sidecars or ztunnels', () => {
    const { wp, out } = build(false, REVIEWS_GET, DENY_POST);
    const hcm = (((byName(wp, 'main_internal').filter_chains as Json[])[0].filters as Json[])[0].typed_config) as Json;
    const filters = hcm.http_filters as Json[];
    assert.deepEqual(filters.map((f) => f.name).slice(0, 3), ['envoy.filters.http.rbac', 'envoy.filters.http.rbac', 'envoy.filters.http.grpc_stats']);
    const [deny, allow] = filters.map((f) => f.typed_config as Json);
    assert.deepEqual(Object.keys((deny.rules as Json).policies as Json), ['ns[default]-policy[no-post]-rule[0]']);
    assert.equal((deny.rules as Json).action, 'DENY');
    const principal = ((((((allow.rules as Json).policies as Json)['ns[default]-policy[reviews-get]-rule[0]'] as Json).principals as Json[])[0].and_ids as Json).ids as Json[])[0];
    assert.deepEqual(principal, { or_ids: { ids: [{ filter_state: { key: 'io.istio.peer_principal', string_match: { exact: 'spiffe://cluster.local/ns/default/sa/bookinfo-productpage' } } }] } });
    for (const [id, resources] of out.sidecars) {
      if (id === WP) continue;
      assert.ok(!JSON.stringify(resources).includes('reviews-get') && !JSON.stringify(resources).includes('no-post'), `${id} has no waypoint policy`);
    }
    assert.ok(!out.wds.some((r) => r.name === 'reviews-get' || r.name === 'no-post'), 'ztunnels get no waypoint policy');
  });

  test('WDS: the bound service names the waypoint by hostname on 15008; the waypoint\'s pod, Service and discovery workloads are there', () => {
    const { out } = build(false);
    const svc = (name: string) => out.wds.map((r) => r.service as Json | undefined).find((s) => s?.name === name)!;
    assert.deepEqual(svc('reviews').waypoint, { hostname: { namespace: 'default', hostname: 'bookinfo-reviews.default.svc.cluster.local' }, hbone_mtls_port: 15008 });
    assert.equal(svc('ratings').waypoint, undefined);
    assert.deepEqual((svc('bookinfo-reviews').ports as Json[]).map((p) => p.service_port), [15021, 15008]);
    const wl = out.wds.map((r) => r.workload as Json | undefined).find((w) => w?.name === 'bookinfo-reviews-5c8d-wp1')!;
    assert.deepEqual([wl.tunnel_protocol, wl.service_account, Object.keys(wl.services as Json)], ['HBONE', 'bookinfo-reviews-waypoint', ['default/bookinfo-reviews.default.svc.cluster.local']]);
    assert.equal(out.discovery?.length, 8, 'one istio.workload.Workload per pod (Bookinfo\'s 7 and the waypoint)');
    assert.deepEqual(out.discovery![0]['@type'], 'type.googleapis.com/istio.workload.Workload');
  });

  test('every resource of every proxy (the waypoint too) is accepted by the proxy\'s xDS layer', async () => {
    await acceptedByProxy(build(true, fixture('istio-istio/samples/bookinfo/gateway-api/route-reviews-90-10.yaml'), REVIEWS_GET, DENY_POST).out);
  });

  test('references that do not resolve are reported istioctl-style', () => {
    const texts = [ambientBookinfo(false).replace('use-waypoint: bookinfo-reviews', 'use-waypoint: nope'), fixture('istio-istio/samples/ambient-argo/application/reviews-waypoint.yaml'),
      'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: { name: p }\nspec: { targetRefs: [{ kind: Gateway, group: gateway.networking.k8s.io, name: ghost }] }\n'];
    const { problems } = buildMesh(collect(resourcesOf(texts.flatMap((t, i) => readText(t, `f${i}.yaml`)))));
    const lines = problems.map((p) => `${p.code} ${p.resource} ${p.field}: ${p.message}`);
    assert.ok(lines.includes('IST0101 Service default/reviews metadata.labels[istio.io/use-waypoint]: Referenced waypoint not found: "default/nope"'), lines.join('\n'));
    assert.ok(lines.includes('IST0101 AuthorizationPolicy default/p spec.targetRefs[0]: Referenced waypoint not found: "default/ghost"'), lines.join('\n'));
    assert.ok(lines.some((l) => l.startsWith('IST0101 Gateway default/bookinfo-reviews metadata.name: Referenced waypoint pod not found')), lines.join('\n'));
  });
});

describe('waypoints in the compact mesh file', () => {
  const doc = parse(`
mesh: { capture: iptables }
services:
  - { name: echo, vip: 10.96.0.10, ports: [{ port: 80, target_port: 8080 }], waypoint: wp }
  - { name: plain, vip: 10.96.0.11, ports: [{ port: 80, target_port: 8080 }] }
workloads:
  - { name: echo-1, ip: 10.244.1.2, services: [echo, plain], sidecar: false, ambient: true }
waypoints:
  - { name: wp, vip: 10.96.0.20, ip: 10.244.1.9 }
`) as Json;

  test('a waypoint entry is its pod (node waypoint~), its Service and the binding of the services that name it', async () => {
    const out = translateMesh(parseMesh(doc));
    const wp = out.sidecars.get('waypoint~10.244.1.9~wp.default~default.svc.cluster.local')!;
    assert.deepEqual(wp.filter((r) => String(r['@type']).endsWith('Listener')).map((l) => l.name), ['connect_terminate', 'main_internal', 'connect_originate']);
    assert.deepEqual((byName(wp, 'main_internal').filter_chains as Json[]).map((c) => c.name), ['inbound-vip|80|http|echo.default.svc.cluster.local']);
    const svc = (name: string) => out.wds.map((r) => r.service as Json | undefined).find((s) => s?.name === name)!;
    assert.equal((svc('echo').waypoint as Json).hbone_mtls_port, 15008);
    assert.equal(svc('plain').waypoint, undefined);
    await acceptedByProxy(out);
  });

  test('a service naming an unknown waypoint is refused with the field', () => {
    assert.throws(() => parseMesh({ ...doc, waypoints: [] }), /services\[0\]\.waypoint: unknown waypoint "default\/wp"/);
  });
});
