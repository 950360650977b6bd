// The compact mesh description → config, decided without I/O: the resources are compared with
// the shapes istiod generated in the fixtures (clusters, endpoints, listeners, TLS contexts,
// retry policy), every translated resource goes through the proxy's xDS layer, and bad mesh
// files are refused naming the field.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { parseMesh, type Mesh } from '../src/mesh/model.ts';
import { translateMesh } from '../src/mesh/translate.ts';
import { meshGroups } from '../src/mesh/source.ts';
import { decodeResource, TYPE_URL } from '@skua/proxy/xds';
import { DynamicConfig, ClusterManager, ListenerManager, StatsStore } from '@skua/proxy/envoy';
import type { XdsResource } from '@skua/proxy/xds';

type Json = Record<string, unknown>;
const FIX = new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/', import.meta.url);
const fixture = (p: string): Json => JSON.parse(readFileSync(new URL(p, FIX), 'utf8')) as Json;
const configs = (d: Json): Json[] => d.configs as Json[];

const MESH = `
mesh: { mtls: PERMISSIVE }
services:
  - name: productpage
    vip: 10.96.0.10
    ports: [{ port: 9080, protocol: http }]
    subsets: { v1: { version: v1 } }
  - name: reviews
    vip: 10.96.0.20
    ports: [{ port: 9080 }]
    subsets: { v1: { version: v1 }, v2: { version: v2 }, v3: { version: v3 } }
  - name: kube-dns
    namespace: kube-system
    vip: 10.96.0.10
    ports: [{ port: 53, protocol: tcp }]
  - name: httpbin
    vip: 10.96.0.80
    ports: [{ port: 8000, target_port: 80 }]
workloads:
  - { name: productpage-v1-a, workload_name: productpage-v1, service_account: bookinfo-productpage, ip: 10.244.0.10, labels: { app: productpage, version: v1 }, services: [productpage] }
  - { name: productpage-v1-b, workload_name: productpage-v1, service_account: default, ip: 10.244.0.11, labels: { app: productpage, version: v1 }, services: [productpage] }
  - { name: reviews-v3-a, workload_name: reviews-v3, ip: 10.244.0.192, labels: { app: reviews, version: v3 }, services: [reviews] }
  - { name: reviews-v2-a, workload_name: reviews-v2, ip: 10.244.0.193, labels: { app: reviews, version: v2 }, services: [reviews] }
  - { name: reviews-v1-a, workload_name: reviews-v1, ip: 10.244.0.195, labels: { app: reviews, version: v1 }, services: [reviews] }
  - { name: httpbin-a, workload_name: httpbin, ip: 10.244.0.50, node: node-1, labels: { app: httpbin, version: v1 }, services: [httpbin] }
routes:
  - host: reviews
    http:
      - name: jason
        match: [{ headers: { end-user: { exact: jason } } }]
        route: [{ subset: v2 }]
        fault: { abort: { http_status: 555, percent: 100 } }
      - route: [{ subset: v1, weight: 50 }, { subset: v3, weight: 50 }, { subset: v2, weight: 0 }]
        retries: { attempts: 3, per_try_timeout: 2s, retry_on: 5xx }
        timeout: 7s
`;

function find(list: readonly Json[], type: string, name: string): Json {
  const r = list.find((x) => x['@type'] === type && (x.name ?? x.cluster_name) === name);
  assert.ok(r, `${type.slice(type.lastIndexOf('.') + 1)} ${name}`);
  return r;
}

const sortBy = (k: (x: Json) => string) => (a: Json, b: Json): number => (k(a) < k(b) ? -1 : k(a) > k(b) ? 1 : 0);
const epAddress = (e: Json): string => (((e.endpoint as Json).address as Json).socket_address as Json).address as string;

describe('mesh translation vs istiod shapes', () => {
  const mesh = parseMesh(parse(MESH));
  const out = translateMesh(mesh);
  const httpbinNode = 'sidecar~10.244.0.50~httpbin-a.default~default.svc.cluster.local';
  const sidecar = out.sidecars.get(httpbinNode)!;

  test('sidecar node ids are pilot-agent ones, one per sidecar workload', () => {
    assert.equal(out.sidecars.size, 6);
    assert.ok(sidecar);
  });

  test('a subset cluster equals the one istiod generated (EDS, metadata, circuit breakers, Istio mTLS match)', () => {
    const want = ((configs(fixture('describe/testdata/describe/http_config.json'))[1].dynamic_active_clusters as Json[])[0].cluster) as Json;
    const got = find(out.sharedClusters, TYPE_URL.cluster, 'outbound|9080|v1|productpage.default.svc.cluster.local');
    assert.deepEqual(got, want);
  });

  test('endpoints equal istiod\'s: health, weights, tlsMode and workload metadata, overprovisioning', () => {
    const dump = configs(fixture('writer/envoy/configdump/testdata/endpoint/configdump.json'))[0];
    const want = ((dump.dynamic_endpoint_configs as Json[]).find((x) => (x.endpoint_config as Json).cluster_name === 'outbound|9080||reviews.default.svc.cluster.local')!.endpoint_config) as Json;
    const got = structuredClone(find(out.sharedClusters, TYPE_URL.endpoint, 'outbound|9080||reviews.default.svc.cluster.local'));
    for (const c of [want, got]) ((c.endpoints as Json[])[0].lb_endpoints as Json[]).sort(sortBy(epAddress));
    assert.deepEqual(got, want);
  });

  test('the outbound HTTP listener equals istiod\'s 0.0.0.0_9080 (tracing aside)', () => {
    const dump = configs(fixture('authz/testdata/configdump.yaml'))[0];
    const want = structuredClone(((dump.dynamic_listeners as Json[]).find((l) => l.name === '0.0.0.0_9080')!.active_state as Json).listener as Json);
    delete ((((want.filter_chains as Json[])[0].filters as Json[])[0]).typed_config as Json).tracing;
    assert.deepEqual(find(sidecar, TYPE_URL.listener, '0.0.0.0_9080'), want);
  });

  test('a TCP service gets istiod\'s <vip>_<port> listener', () => {
    const dump = configs(fixture('authz/testdata/configdump.yaml'))[0];
    const want = ((dump.dynamic_listeners as Json[]).find((l) => l.name === '10.96.0.10_53')!.active_state as Json).listener as Json;
    assert.deepEqual(find(sidecar, TYPE_URL.listener, '10.96.0.10_53'), want);
  });

  test('inbound: istiod\'s mTLS server context, HCM and inline route for the target port', () => {
    const dump = configs(fixture('authz/testdata/configdump.yaml'))[0];
    const vin = ((dump.dynamic_listeners as Json[]).find((l) => l.name === 'virtualInbound')!.active_state as Json).listener as Json;
    const wantChains = (vin.filter_chains as Json[]).filter((c) => c.name === '0.0.0.0_80');
    const got = find(sidecar, TYPE_URL.listener, 'virtualInbound');
    const gotChains = got.filter_chains as Json[];
    assert.equal(gotChains.length, 2, 'PERMISSIVE: an mTLS and a plaintext chain');
    const tlsWant = wantChains.find((c) => (c.filter_chain_match as Json).transport_protocol === 'tls')!;
    const tlsGot = gotChains.find((c) => (c.filter_chain_match as Json).transport_protocol === 'tls')!;
    assert.deepEqual(tlsGot.transport_socket, tlsWant.transport_socket);
    assert.deepEqual(tlsGot.filter_chain_match, { destination_port: 80, transport_protocol: 'tls', application_protocols: ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'] });
    const rawWant = wantChains.find((c) => (c.filter_chain_match as Json).transport_protocol === 'raw_buffer')!;
    const rawGot = gotChains.find((c) => (c.filter_chain_match as Json).transport_protocol === 'raw_buffer')!;
    assert.deepEqual(rawGot.filter_chain_match, rawWant.filter_chain_match);
    const hcm = (c: Json): Json => {
      const h = structuredClone(((c.filters as Json[]).find((f) => f.name === 'envoy.filters.network.http_connection_manager')!).typed_config as Json);
      delete h.http_filters;
      delete h.tracing;
      return h;
    };
    assert.deepEqual(hcm(rawGot), hcm(rawWant));
    assert.deepEqual(find(sidecar, TYPE_URL.cluster, 'inbound|80||'), {
      '@type': TYPE_URL.cluster, name: 'inbound|80||', type: 'ORIGINAL_DST', connect_timeout: '10s', lb_policy: 'CLUSTER_PROVIDED', cleanup_interval: '60s',
      circuit_breakers: (find(out.sharedClusters, TYPE_URL.cluster, 'outbound|9080||reviews.default.svc.cluster.local')).circuit_breakers,
      upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } },
      metadata: { filter_metadata: { istio: { services: [{ host: 'httpbin.default.svc.cluster.local', name: 'httpbin', namespace: 'default' }] } } },
    });
  });

  test('routes: istiod\'s default retry policy, header matches, weights without zero, fault per route', () => {
    const want = ((((configs(fixture('describe/testdata/describe/http_config.json'))[0].dynamic_route_configs as Json[])[0].route_config as Json).virtual_hosts as Json[])[0].routes as Json[])[0];
    const rc = find(sidecar, TYPE_URL.route, '9080');
    const vh = (rc.virtual_hosts as Json[]).find((v) => v.name === 'productpage.default.svc.cluster.local:9080')!;
    assert.deepEqual(((vh.routes as Json[])[0].route as Json).retry_policy, (want.route as Json).retry_policy);
    assert.deepEqual(vh.domains, [
      'productpage.default.svc.cluster.local', 'productpage.default.svc.cluster.local:9080', 'productpage.default.svc', 'productpage.default.svc:9080',
      'productpage.default', 'productpage.default:9080', 'productpage', 'productpage:9080', '10.96.0.10', '10.96.0.10:9080',
    ]);
    const reviews = ((rc.virtual_hosts as Json[]).find((v) => v.name === 'reviews.default.svc.cluster.local:9080')!.routes as Json[]);
    assert.deepEqual(reviews[0].match, { prefix: '/', case_sensitive: true, headers: [{ name: 'end-user', string_match: { exact: 'jason' } }] });
    assert.equal((reviews[0].route as Json).cluster, 'outbound|9080|v2|reviews.default.svc.cluster.local');
    assert.deepEqual(reviews[0].typed_per_filter_config, { 'envoy.filters.http.fault': { '@type': 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault', abort: { http_status: 555, percentage: { numerator: 1000000, denominator: 'MILLION' } } } });
    assert.deepEqual((reviews[1].route as Json).weighted_clusters, { clusters: [
      { name: 'outbound|9080|v1|reviews.default.svc.cluster.local', weight: 50 }, { name: 'outbound|9080|v3|reviews.default.svc.cluster.local', weight: 50 },
    ] });
    assert.equal((reviews[1].route as Json).timeout, '7s');
    assert.deepEqual(((reviews[1].route as Json).retry_policy as Json).num_retries, 3);
    assert.deepEqual(((reviews[1].route as Json).retry_policy as Json).per_try_timeout, '2s');
    assert.deepEqual((reviews[1].metadata as Json), { filter_metadata: { istio: { config: '/apis/networking.istio.io/v1alpha3/namespaces/default/virtual-service/reviews' } } });
    // kube-system's short name is not offered to a default-namespace sidecar.
    assert.equal((rc.virtual_hosts as Json[]).at(-1)!.name, 'allow_any');
  });
});

/** Encodes a node's resources as the control plane serves them and applies them as the proxy would (not bound). */
async function applyAsProxy(mesh: Mesh, nodeId: string): Promise<Map<string, string>> {
  const groups = meshGroups('mesh', translateMesh(mesh));
  const store = new StatsStore();
  const clusters = new ClusterManager(store);
  const dynamic = new DynamicConfig(clusters, new ListenerManager(clusters, store, false), new Set(), new Set());
  const results = new Map<string, string>();
  for (const typeUrl of [TYPE_URL.cluster, TYPE_URL.endpoint, TYPE_URL.listener, TYPE_URL.route]) {
    const decoded: XdsResource[] = [];
    for (const g of groups) {
      if (!g.nodes.all && !g.nodes.exact.has(nodeId)) continue;
      for (const r of g.byType.get(typeUrl)?.values() ?? []) decoded.push({ name: r.name, version: r.version, json: decodeResource(r.any) });
    }
    const rejected = new Map((await dynamic.apply({ typeUrl, version: 'v1', resources: decoded, removed: [], full: false })).map((x) => [x.name, x.message]));
    for (const r of decoded) results.set(`${typeUrl.slice(typeUrl.lastIndexOf('.') + 1)} ${r.name}`, rejected.get(r.name) ?? 'ACK');
  }
  for (const c of clusters.all()) c.close();
  return results;
}

describe('translated config through the proxy xDS layer', () => {
  test('every mTLS mode and capture: all ACKed, the inbound clusters\' 127.0.0.6 bind under iptables included', async () => {
    for (const mtls of ['DISABLE', 'PERMISSIVE', 'STRICT']) {
      for (const capture of ['iptables', 'none']) {
        const doc = parse(MESH) as Json;
        doc.mesh = { mtls, capture };
        if (capture === 'none') for (const [i, w] of (doc.workloads as Json[]).entries()) w.outbound_ip = `127.0.1.${i + 1}`;
        const results = await applyAsProxy(parseMesh(doc), 'sidecar~10.244.0.50~httpbin-a.default~default.svc.cluster.local');
        assert.ok(results.size > 20, `${results.size} resources`);
        for (const [k, v] of results) assert.equal(v, 'ACK', `${mtls} ${capture}: ${k}`);
        if (capture === 'iptables') assert.ok([...results.keys()].some((k) => k.startsWith('Cluster inbound|')), 'inbound clusters were checked');
      }
    }
  });
});

describe('WDS from the mesh', () => {
  test('services, workloads and policies as ztunnel receives them; STRICT adds istiod\'s static deny', () => {
    const doc = parse(MESH) as Json;
    doc.mesh = { mtls: 'STRICT' };
    (doc.workloads as Json[])[5].ambient = true;
    doc.policies = [
      { name: 'httpbin-from-pp', selector: { app: 'httpbin' }, from: [{ service_accounts: ['default/bookinfo-productpage'], namespaces: ['default'] }], ports: [80] },
      { name: 'deny-all', namespace: 'istio-system', action: 'DENY' },
    ];
    const wds = translateMesh(parseMesh(doc)).wds;
    const g = meshGroups('m', { sharedClusters: [], sidecars: new Map(), wds })[0];
    assert.deepEqual([...g.byType.get(TYPE_URL.authorization)!.keys()], ['default/httpbin-from-pp', 'istio-system/deny-all', 'istio-system/istio_converted_static_strict']);
    assert.ok(g.byType.get(TYPE_URL.address)!.has('default/reviews.default.svc.cluster.local'));
    const httpbin = decodeResource(g.byType.get(TYPE_URL.address)!.get('Kubernetes//Pod/default/httpbin-a')!.any).workload as Json;
    assert.deepEqual(httpbin, {
      uid: 'Kubernetes//Pod/default/httpbin-a', name: 'httpbin-a', namespace: 'default', addresses: ['CvQAMg=='], tunnel_protocol: 'HBONE',
      trust_domain: 'cluster.local', service_account: 'default', node: 'node-1', canonical_name: 'httpbin', canonical_revision: 'v1',
      workload_name: 'httpbin', cluster_id: 'Kubernetes', authorization_policies: ['default/httpbin-from-pp'],
      services: { 'default/httpbin.default.svc.cluster.local': { ports: [{ service_port: 8000, target_port: 80 }] } },
    });
    const policy = decodeResource(g.byType.get(TYPE_URL.authorization)!.get('default/httpbin-from-pp')!.any);
    assert.deepEqual(policy.rules, [{ clauses: [
      { matches: [{ namespaces: [{ exact: 'default' }], service_accounts: [{ namespace: 'default', serviceAccount: 'bookinfo-productpage' }] }] },
      { matches: [{ destination_ports: [80] }] },
    ] }]);
    assert.equal(policy.scope, 'WORKLOAD_SELECTOR');
    const strict = decodeResource(g.byType.get(TYPE_URL.authorization)!.get('istio-system/istio_converted_static_strict')!.any);
    assert.deepEqual(strict, { '@type': TYPE_URL.authorization, name: 'istio_converted_static_strict', namespace: 'istio-system', action: 'DENY',
      rules: [{ clauses: [{ matches: [{ not_principals: [{ presence: {} }] }] }] }] });
  });
});

describe('bad mesh files are refused naming the field', () => {
  const refuse = (doc: string, message: RegExp): void => assert.throws(() => translateMesh(parseMesh(parse(doc))), message);
  test('unknown fields, services, subsets, protocols; capture none needs outbound_ip; one listener per port without capture', () => {
    refuse('services: [{ name: a, vip: 10.0.0.1, ports: [{ port: 80 }], color: red }]', /^ConfigError: services\[0\]\.color: field is not supported/);
    refuse('services: [{ name: a, vip: 10.0.0.1, ports: [{ port: 80, protocol: udp }] }]', /services\[0\]\.ports\[0\]\.protocol: unknown protocol "udp"/);
    refuse('services: [{ name: a, vip: nope, ports: [{ port: 80 }] }]', /services\[0\]\.vip: "nope" is not an IP address/);
    refuse('workloads: [{ name: w, ip: 10.0.0.2, services: [b] }]', /workloads\[0\]\.services\[0\]: unknown service "b"/);
    refuse('services: [{ name: a, vip: 10.0.0.1, ports: [{ port: 80 }] }]\nroutes: [{ host: a, http: [{ route: [{ subset: v9 }] }] }]', /routes\[0\]\.http\[0\]\.route\[0\]\.subset: unknown subset "v9" of a/);
    refuse('services: [{ name: a, vip: 10.0.0.1, ports: [{ port: 80 }] }]\nroutes: [{ host: a, http: [{ route: [{ weight: 0 }] }] }]', /routes\[0\]\.http\[0\]\.route: the weights add up to 0/);
    refuse('mesh: { capture: none }\nworkloads: [{ name: w, ip: 127.0.0.2 }]', /workloads\[0\]\.outbound_ip: is required for sidecars when mesh.capture is none/);
    refuse('mesh: { capture: none }\nservices: [{ name: a, vip: 10.0.0.1, ports: [{ port: 80, protocol: tcp }] }, { name: b, vip: 10.0.0.2, ports: [{ port: 80 }] }]\nworkloads: [{ name: w, ip: 127.0.0.2, outbound_ip: 127.0.1.2 }]',
      /services: a \(tcp\) and HTTP both use port 80/);
    refuse('mesh: { mtls: SOMETIMES }', /mesh\.mtls: must be PERMISSIVE, STRICT or DISABLE/);
  });
});

describe('the README example', () => {
  test('parses and translates (both capture modes)', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const yaml = /## Mesh files[^\n]*\n[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(yaml, 'the README has the example');
    for (const capture of ['iptables', 'none']) {
      const doc = parse(yaml) as Json;
      (doc.mesh as Json).capture = capture;
      const out = translateMesh(parseMesh(doc));
      assert.deepEqual([...out.sidecars.keys()], ['sidecar~10.244.0.21~reviews-v1-5d8f9c.default~default.svc.cluster.local', 'waypoint~10.244.0.40~reviews-waypoint.default~default.svc.cluster.local']);
      // reviews and the waypoint's Service, their two pods, one policy.
      assert.equal(out.wds.length, 5);
    }
  });
});
