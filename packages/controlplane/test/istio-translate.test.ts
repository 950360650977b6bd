// Istio YAML → xDS and WDS, decided without I/O: AuthorizationPolicy → RBAC and → ztunnel
// Authorization equal istiod's goldens; Bookinfo's Services, Pods and samples become sidecar and
// gateway config shaped like istiod's (compared with the fixture dumps: names, cluster shape, route
// shapes), every resource is accepted by the proxy's xDS layer, and security resources land where
// istiod puts them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { parse } from 'yaml';
import { normalizeKeys } from '@skua/proxy/core';
import { readText } from '../src/istio/documents.ts';
import { buildMesh, collect, resourcesOf } from '../src/istio/build/build.ts';
import { rbacFilters } from '../src/istio/authz/rbac.ts';
import { authorizationForZtunnel, peerAuthenticationForZtunnel } from '../src/istio/authz/wds.ts';
import { translateMesh } from '../src/mesh/translate.ts';
import { meshGroups } from '../src/mesh/source.ts';
import { decodeResource, TYPE_URL } from '@skua/proxy/xds';
import type { AuthorizationPolicy, PeerAuthentication } from '../src/istio/types.ts';
import { acceptedByProxy, BOOKINFO_PLATFORM, bookinfoPlatform, byName, fixture } from './lib/istio-fixtures.ts';

type Json = Record<string, unknown>;
const j = (x: unknown): Json => JSON.parse(JSON.stringify(x)) as Json;

function resources(...texts: string[]) {
  const docs = texts.flatMap((t, i) => readText(t, `f${i}.yaml`));
  assert.deepEqual(docs.flatMap((d) => d.problems).filter((p) => p.level === 'Error'), []);
  return resourcesOf(docs);
}

describe("istiod's AuthorizationPolicy goldens", () => {
  const T = 'istio-istio/pilot/pkg/security/authz/builder/testdata/';
  for (const [inp, out, tcp] of [['http/single-policy-in.yaml', 'http/single-policy-out.yaml', false], ['tcp/deny-both-http-tcp-in.yaml', 'tcp/deny-both-http-tcp-out.yaml', true]] as const) {
    test(`${inp} → the ${tcp ? 'network' : 'HTTP'} RBAC filter of ${out}`, () => {
      const pols = resources(fixture(T + inp)).map((r) => r.value as AuthorizationPolicy);
      const got = rbacFilters(pols, tcp);
      assert.equal(got.length, 1);
      assert.deepEqual(j(got[0]), normalizeKeys(parse(fixture(T + out))));
    });
  }
  const A = 'istio-istio/pilot/pkg/serviceregistry/ambient/testdata/';
  const wire = (g: Json): Json => { const { groups, ...rest } = normalizeKeys(g) as Json; return { ...rest, rules: ((groups ?? []) as Json[]).map((x) => ({ clauses: x.rules ?? [] })) }; };
  // ServiceAccountMatch's proto field is serviceAccount (camelCase in the .proto itself).
  const snake = (x: Json): Json => normalizeKeys(x) as Json;
  for (const [inp, out] of [['allow-full-in.yaml', 'allow-full.yaml'], ['deny-groups-in.yaml', 'deny-groups.yaml'], ['peer-authn-strict-port-mtls-strict-and-permissive-in.yaml', 'peer-authn-strict-port-mtls-strict-and-permissive.yaml']]) {
    test(`${inp} → ztunnel's ${out}`, () => {
      const r = resources(fixture(A + inp))[0];
      const got = r.kind === 'AuthorizationPolicy' ? authorizationForZtunnel(r.value, 'istio-system') : peerAuthenticationForZtunnel(r.value as PeerAuthentication, undefined, undefined, 'istio-system');
      const { '@type': type, ...g } = j(got);
      assert.equal(type, 'type.googleapis.com/istio.security.Authorization');
      const want = wire(parse(fixture(A + out)) as Json);
      assert.deepEqual(snake(g), { namespace: 'default', ...want });
    });
  }
});

describe('Bookinfo from Istio YAML vs the shapes istiod generated (fixture dumps)', () => {
  const S = 'istio-istio/samples/bookinfo/networking/';
  const build = (...extra: string[]) => {
    const { mesh, problems } = buildMesh(collect(resources(BOOKINFO_PLATFORM, ...extra)));
    return { mesh, problems, out: translateMesh(mesh) };
  };
  const pp = 'sidecar~10.244.0.11~productpage-v1-6b7f-x1.default~default.svc.cluster.local';

  test('listener, route and cluster names; the subset cluster shape of describe/http_config.json', () => {
    const { out, problems } = build(fixture(S + 'destination-rule-all-mtls.yaml'));
    assert.deepEqual(problems.filter((p) => p.level === 'Error'), []);
    const side = out.sidecars.get(pp)!;
    assert.ok(side, [...out.sidecars.keys()].join(' '));
    // istiod's sidecar dump (authz/testdata/configdump.yaml) has these names for the same kind of ports.
    const dump = JSON.parse(fixture('istio-istio/istioctl/pkg/authz/testdata/configdump.yaml')) as { configs: Json[] };
    const dumpNames = new Set(dump.configs.flatMap((c) => ((c.dynamic_listeners ?? []) as Json[]).map((l) => ((l.active_state as Json).listener as Json).name as string)));
    for (const n of ['0.0.0.0_9080', 'virtualOutbound', 'virtualInbound']) {
      assert.ok(dumpNames.has(n), n);
      assert.ok(byName(side, n), `our ${n}`);
    }
    const rds = byName(side, '9080');
    assert.deepEqual((rds.virtual_hosts as Json[]).map((v) => v.name).sort(), ['allow_any', ...['details', 'productpage', 'ratings', 'reviews', 'reviews-v1', 'reviews-v2'].map((s) => `${s}.default.svc.cluster.local:9080`)].sort());
    // The subset cluster, field by field against istiod's.
    const theirs = (JSON.parse(fixture('istio-istio/istioctl/pkg/describe/testdata/describe/http_config.json')) as { configs: Json[] }).configs
      .flatMap((c) => (c.dynamic_active_clusters ?? []) as Json[]).map((c) => c.cluster as Json).find((c) => c.name === 'outbound|9080|v1|productpage.default.svc.cluster.local')!;
    const ours = byName(out.sharedClusters, 'outbound|9080|v1|productpage.default.svc.cluster.local');
    for (const k of ['type', 'eds_cluster_config', 'connect_timeout', 'lb_policy', 'circuit_breakers', 'filters']) assert.deepEqual(ours[k], theirs[k], k);
    assert.deepEqual(((ours.metadata as Json).filter_metadata as Json).istio, ((theirs.metadata as Json).filter_metadata as Json).istio);
    // DestinationRule ISTIO_MUTUAL: Istio mTLS always (istiod writes transport_socket, no tlsMode match).
    const tls = ((ours.transport_socket as Json).typed_config as Json);
    const theirsTls = (((theirs.transport_socket_matches as Json[])[0].transport_socket as Json).typed_config as Json);
    assert.deepEqual(tls.sni, theirsTls.sni);
    const ctx = (x: Json): Json => { const { combined_validation_context: v, ...rest } = x.common_tls_context as Json; return { ...rest, rootca: ((v as Json).validation_context_sds_secret_config as Json).name }; };
    assert.deepEqual(ctx(tls), ctx(theirsTls));
  });

  test('bookinfo-gateway.yaml on a router pod: http.8080 as in describe/http_config.json', () => {
    const { out } = build(fixture(S + 'bookinfo-gateway.yaml'));
    const gw = out.sidecars.get('router~10.244.0.41~istio-ingressgateway-5d7f-gw1.istio-system~istio-system.svc.cluster.local')!;
    assert.ok(byName(gw, '0.0.0.0_8080'));
    const ours = byName(gw, 'http.8080');
    const theirs = (JSON.parse(fixture('istio-istio/istioctl/pkg/describe/testdata/describe/http_config.json')) as { configs: Json[] }).configs
      .flatMap((c) => (c.dynamic_route_configs ?? []) as Json[]).map((r) => r.route_config as Json).find((r) => r.name === 'http.8080')!;
    const vo = (ours.virtual_hosts as Json[])[0], vt = (theirs.virtual_hosts as Json[])[0];
    assert.deepEqual(vo.domains, vt.domains);
    const shape = (r: Json): Json => {
      const { metadata: _m, ...rest } = r;
      const route = { ...(rest.route as Json) };
      // istiod spells the previous-hosts predicate without typed_config in this older dump.
      (route.retry_policy as Json).retry_host_predicate = [{ name: 'envoy.retry_host_predicates.previous_hosts' }];
      return { ...rest, route };
    };
    assert.deepEqual((vo.routes as Json[]).map(shape), (vt.routes as Json[]).map(shape));
  });

  test('the routing samples: weights, header match, fault delay and abort per route', () => {
    const { out } = build(fixture(S + 'destination-rule-all.yaml'), fixture(S + 'virtual-service-reviews-jason-v2-v3.yaml'), fixture(S + 'virtual-service-ratings-test-delay.yaml'));
    const routes = (host: string): Json[] => ((byName(out.sidecars.get(pp)!, '9080').virtual_hosts as Json[]).find((v) => v.name === `${host}.default.svc.cluster.local:9080`)!.routes as Json[]);
    const [jason, rest] = routes('reviews');
    assert.deepEqual((jason.match as Json).headers, [{ name: 'end-user', string_match: { exact: 'jason' } }]);
    assert.equal((jason.route as Json).cluster, 'outbound|9080|v2|reviews.default.svc.cluster.local');
    assert.equal((rest.route as Json).cluster, 'outbound|9080|v3|reviews.default.svc.cluster.local');
    const fault = (routes('ratings')[0].typed_per_filter_config as Json)['envoy.filters.http.fault'] as Json;
    assert.deepEqual(fault.delay, { fixed_delay: '7s', percentage: { numerator: 1000000, denominator: 'MILLION' } });
    const fifty = build(fixture(S + 'destination-rule-all.yaml'), fixture(S + 'virtual-service-reviews-50-v3.yaml')).out;
    const r50 = ((byName(fifty.sidecars.get(pp)!, '9080').virtual_hosts as Json[]).find((v) => String(v.name).startsWith('reviews.'))!.routes as Json[])[0];
    assert.deepEqual(((r50.route as Json).weighted_clusters as Json).clusters, [
      { name: 'outbound|9080|v1|reviews.default.svc.cluster.local', weight: 50 }, { name: 'outbound|9080|v3|reviews.default.svc.cluster.local', weight: 50 },
    ]);
  });

  test('gateway-api/route-reviews-90-10.yaml: the HTTPRoute on Service reviews becomes its sidecar route', () => {
    const { out } = build(fixture('istio-istio/samples/bookinfo/gateway-api/route-reviews-90-10.yaml'));
    const r = ((byName(out.sidecars.get(pp)!, '9080').virtual_hosts as Json[]).find((v) => String(v.name).startsWith('reviews.'))!.routes as Json[])[0];
    assert.deepEqual(((r.route as Json).weighted_clusters as Json).clusters, [
      { name: 'outbound|9080||reviews-v1.default.svc.cluster.local', weight: 90 }, { name: 'outbound|9080||reviews-v2.default.svc.cluster.local', weight: 10 },
    ]);
    assert.equal(r.name, 'default.reviews.0');
  });

  test('every translated resource is accepted by the proxy (all samples together, both capture modes)', async () => {
    const all = ['destination-rule-all-mtls.yaml', 'virtual-service-reviews-jason-v2-v3.yaml', 'virtual-service-ratings-test-abort.yaml', 'bookinfo-gateway.yaml', 'fault-injection-details-v1.yaml', 'egress-rule-google-apis.yaml'];
    const jwk = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });
    const ra = `apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: { name: jwt }\nspec: { selector: { matchLabels: { app: reviews } }, jwtRules: [{ issuer: "https://issuer.example", jwks: '${JSON.stringify({ keys: [{ ...jwk, kid: 'k1', alg: 'RS256' }] })}', forwardOriginalToken: true, outputClaimToHeaders: [{ header: x-sub, claim: sub }] }] }\n`;
    const ap = fixture('istio-istio/pilot/pkg/security/authz/builder/testdata/http/single-policy-in.yaml').replace('namespace: foo', 'namespace: default');
    const { out } = build(...all.map((f) => fixture(S + f)), fixture('istio-istio/tests/testdata/config/rule-default-route-cors-policy.yaml'), fixture('istio-istio/tests/testdata/config/rule-redirect-injection.yaml'), ra, ap);
    await acceptedByProxy(out);
    const none = buildMesh(collect(resources(bookinfoPlatform(true), ...all.map((f) => fixture(S + f)))));
    assert.equal(none.mesh.capture, 'none');
    await acceptedByProxy(translateMesh(none.mesh));
  });
});

describe('security resources where istiod puts them', () => {
  test('WDS for ztunnels: AuthorizationPolicies, STRICT PeerAuthentication, and the workloads that carry them (encoded as served)', () => {
    const ap = 'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: { name: reviews-from-pp }\nspec: { selector: { matchLabels: { app: reviews } }, rules: [{ from: [{ source: { serviceAccounts: [bookinfo-productpage] } }], to: [{ operation: { ports: ["9080"] } }] }] }\n';
    const strict = fixture('istio-istio/tests/testdata/config/peer-authn-strict.yaml').replace('testns', 'default');
    const { mesh } = buildMesh(collect(resources(BOOKINFO_PLATFORM, ap, strict)));
    const groups = meshGroups('w', translateMesh(mesh));
    const wds = groups.find((g) => g.source === 'w#wds')!;
    const authz = wds.byType.get(TYPE_URL.authorization)!;
    assert.deepEqual([...authz.keys()].sort(), ['default/reviews-from-pp', 'istio-system/istio_converted_static_strict']);
    assert.deepEqual(decodeResource(authz.get('default/reviews-from-pp')!.any).rules, [{ clauses: [
      { matches: [{ destination_ports: [9080] }] }, { matches: [{ service_accounts: [{ namespace: 'default', serviceAccount: 'bookinfo-productpage' }] }] },
    ] }]);
    const w = decodeResource(wds.byType.get(TYPE_URL.address)!.get('Kubernetes//Pod/default/reviews-v1-7d9b-x1')!.any).workload as Json;
    assert.deepEqual(w.authorization_policies, ['default/reviews-from-pp', 'istio-system/istio_converted_static_strict']);
    assert.equal(w.workload_name, 'reviews-v1-7d9b-x1');
  });

  const S = 'istio-istio/tests/testdata/config/';
  const inbound = (extra: string): Json => {
    const { mesh } = buildMesh(collect(resources(BOOKINFO_PLATFORM, extra)));
    const out = translateMesh(mesh);
    return byName(out.sidecars.get('sidecar~10.244.0.21~reviews-v1-7d9b-x1.default~default.svc.cluster.local')!, 'virtualInbound');
  };
  const transports = (l: Json): string[] => (l.filter_chains as Json[]).filter((c) => (c.filter_chain_match as Json).destination_port === 9080).map((c) => String((c.filter_chain_match as Json).transport_protocol));
  test('PeerAuthentication: authn.yaml PERMISSIVE → tls and plaintext chains; peer-authn-strict.yaml → tls only; port level', () => {
    assert.deepEqual(transports(inbound(fixture(S + 'authn.yaml'))), ['tls', 'raw_buffer']);
    assert.deepEqual(transports(inbound(fixture(S + 'peer-authn-strict.yaml').replace('testns', 'default'))), ['tls']);
    const port = 'apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: { name: p }\nspec: { selector: { matchLabels: { app: reviews } }, mtls: { mode: STRICT }, portLevelMtls: { "9080": { mode: DISABLE } } }\n';
    assert.deepEqual(transports(inbound(port)), ['raw_buffer']);
  });
  test('AuthorizationPolicy and RequestAuthentication: jwt_authn, then RBAC DENY, then ALLOW after metadata exchange; network RBAC on TCP chains', () => {
    const ra = 'apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: { name: jwt }\nspec: { selector: { matchLabels: { app: reviews } }, jwtRules: [{ issuer: "https://issuer.example", jwks: \'{"keys":[]}\' }] }\n---\n';
    const ap = fixture('istio-istio/pilot/pkg/security/authz/builder/testdata/tcp/deny-both-http-tcp-in.yaml').replace('namespace: foo', 'namespace: default');
    const l = inbound(ra + ap);
    const hcm = ((l.filter_chains as Json[]).find((c) => (c.filter_chain_match as Json).destination_port === 9080)!.filters as Json[]).find((f) => String(f.name).endsWith('http_connection_manager'))!;
    const names = ((hcm.typed_config as Json).http_filters as Json[]).map((f) => f.name);
    assert.deepEqual(names.slice(0, 3), ['istio.metadata_exchange', 'envoy.filters.http.jwt_authn', 'envoy.filters.http.rbac']);
    const jwt = ((hcm.typed_config as Json).http_filters as Json[])[1].typed_config as Json;
    assert.deepEqual((jwt.rules as Json[])[0], { match: { prefix: '/' }, requires: { requires_any: { requirements: [{ provider_name: 'origins-0' }, { allow_missing: {} }] } } });
    assert.equal(((jwt.providers as Json)['origins-0'] as Json).payload_in_metadata, 'payload');
  });
});

