// The outbound decision record (ztunnel's build_request) for one mesh, as a table: pod and
// service addressing, HBONE vs plain TCP workloads, service and workload waypoints (and the
// waypoint's own calls skipping itself), PASSTHROUGH services and unknown destinations passing
// through as TCP, health and locality-aware load balancing, capacity weights, and the errors; the
// access log's words for an HBONE refusal.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ProxyState } from '../src/state/store.ts';
import { loadLocalConfig } from '../src/state/updater.ts';
import { buildOutboundRequest, type OutboundContext, type OutboundRequest } from '../src/outbound/request.ts';
import { RoutingError } from '../src/state/upstream.ts';
import { hboneErrorText } from '../src/proxy/outbound.ts';
import { HboneConnectError } from '../src/core.ts';

const MESH = `
workloads:
- {uid: c, name: client, namespace: default, serviceAccount: client, workloadIps: [10.0.0.1], protocol: HBONE, node: n1,
   locality: {region: r1, zone: z1, subzone: ''}, services: {}}
- {uid: s, name: server, namespace: default, serviceAccount: server, workloadIps: [10.0.0.2], protocol: HBONE, node: n2,
   services: {"default/echo.default.svc.cluster.local": {80: 8080}, "default/reviews.default.svc.cluster.local": {9080: 9080}}}
- {uid: t, name: tcp-server, namespace: default, serviceAccount: legacy, workloadIps: [10.0.0.3], protocol: TCP,
   services: {"default/tcp-echo.default.svc.cluster.local": {80: 9090}}}
- {uid: r, name: ratings, namespace: default, serviceAccount: ratings, workloadIps: [10.0.0.4], protocol: HBONE,
   waypoint: {destination: /10.96.0.9, hboneMtlsPort: 15008}, services: {}}
- {uid: w, name: waypoint, namespace: default, serviceAccount: waypoint, workloadIps: [10.0.0.9], protocol: HBONE,
   services: {"default/waypoint.default.svc.cluster.local": {15008: 15008}}}
- {uid: sick, name: sick, namespace: default, workloadIps: [10.0.0.20], protocol: HBONE, status: Unhealthy,
   services: {"default/sick.default.svc.cluster.local": {80: 80}, "default/sick-ok.default.svc.cluster.local": {80: 80}}}
- {uid: z1, name: near, namespace: default, workloadIps: [10.0.1.1], protocol: TCP, locality: {region: r1, zone: z1, subzone: ''},
   services: {"default/geo.default.svc.cluster.local": {80: 80}, "default/geo-strict.default.svc.cluster.local": {80: 80}}}
- {uid: z2, name: far, namespace: default, workloadIps: [10.0.1.2], protocol: TCP, locality: {region: r1, zone: z2, subzone: ''},
   services: {"default/geo.default.svc.cluster.local": {80: 80}, "default/weighted.default.svc.cluster.local": {80: 80}}}
- {uid: z3, name: big, namespace: default, workloadIps: [10.0.1.3], protocol: TCP, capacity: 3,
   services: {"default/weighted.default.svc.cluster.local": {80: 80}}}
services:
- {name: echo, namespace: default, hostname: echo.default.svc.cluster.local, vips: [/10.96.0.1], ports: {80: 8080},
   subjectAltNames: ["spiffe://cluster.local/ns/default/sa/echo-alias"]}
- {name: tcp-echo, namespace: default, hostname: tcp-echo.default.svc.cluster.local, vips: [/10.96.0.2], ports: {80: 0}}
- {name: reviews, namespace: default, hostname: reviews.default.svc.cluster.local, vips: [/10.96.0.3], ports: {9080: 9080},
   waypoint: {destination: {namespace: default, hostname: waypoint.default.svc.cluster.local}, hboneMtlsPort: 15008}}
- {name: waypoint, namespace: default, hostname: waypoint.default.svc.cluster.local, vips: [/10.96.0.9], ports: {15008: 15008}}
- {name: passthrough, namespace: default, hostname: pt.example.com, vips: [/10.96.0.5], ports: {443: 443}, loadBalancer: {mode: Passthrough}}
- {name: empty, namespace: default, hostname: empty.default.svc.cluster.local, vips: [/10.96.0.6], ports: {80: 80}}
- {name: sick, namespace: default, hostname: sick.default.svc.cluster.local, vips: [/10.96.0.7], ports: {80: 80}}
- {name: sick-ok, namespace: default, hostname: sick-ok.default.svc.cluster.local, vips: [/10.96.0.8], ports: {80: 80},
   loadBalancer: {mode: Standard, healthPolicy: AllowAll}}
- {name: geo, namespace: default, hostname: geo.default.svc.cluster.local, vips: [/10.96.1.1], ports: {80: 80},
   loadBalancer: {mode: Failover, routingPreferences: [Region, Zone]}}
- {name: geo-strict, namespace: default, hostname: geo-strict.default.svc.cluster.local, vips: [/10.96.1.2], ports: {80: 80},
   loadBalancer: {mode: Strict, routingPreferences: [Node]}}
- {name: weighted, namespace: default, hostname: weighted.default.svc.cluster.local, vips: [/10.96.1.3], ports: {80: 80}}
`;

const state = new ProxyState();
loadLocalConfig(state, MESH);
const ctx = (rng = (): number => 0): OutboundContext => ({ state, hbonePort: 15008, illegalPorts: new Set([15001, 15006, 15008]), rng });
const wl = (uid: string) => state.workloadsByUid.get(uid)!;
const id = (sa: string): string => `spiffe://cluster.local/ns/default/sa/${sa}`;

type Expected = { protocol: 'HBONE' | 'TCP'; actual: string; target?: string; service?: string; sans: string[]; via: OutboundRequest['via'] };

function summary(r: OutboundRequest): Expected {
  const out: Expected = { protocol: r.protocol, actual: `${r.actualDestination.address}:${r.actualDestination.port}`, sans: [...r.upstreamSans], via: r.via };
  if (r.hboneTarget) out.target = `${r.hboneTarget.address}:${r.hboneTarget.port}`;
  if (r.intendedService) out.service = r.intendedService.hostname;
  return out;
}

describe('outbound decision', () => {
  const cases: Array<[string, string, string, number, Expected]> = [
    ['HBONE pod by IP: its 15008, :authority = pod ip:port', 'c', '10.0.0.2', 8080,
      { protocol: 'HBONE', actual: '10.0.0.2:15008', target: '10.0.0.2:8080', sans: [id('server')], via: 'workload' }],
    ['service VIP: endpoint picked, target port mapped, service SANs expected too', 'c', '10.96.0.1', 80,
      { protocol: 'HBONE', actual: '10.0.0.2:15008', target: '10.0.0.2:8080', service: 'echo.default.svc.cluster.local', sans: [id('echo-alias'), id('server')], via: 'workload' }],
    ['a TCP workload behind a VIP: plain TCP to the endpoint port', 'c', '10.96.0.2', 80,
      { protocol: 'TCP', actual: '10.0.0.3:9090', service: 'tcp-echo.default.svc.cluster.local', sans: [id('legacy')], via: 'workload' }],
    ['a service with a waypoint: HBONE to the waypoint, :authority = the VIP', 'c', '10.96.0.3', 9080,
      { protocol: 'HBONE', actual: '10.0.0.9:15008', target: '10.96.0.3:9080', service: 'reviews.default.svc.cluster.local', sans: [id('waypoint')], via: 'service-waypoint' }],
    ['a workload with a waypoint, by pod IP: to the waypoint', 'c', '10.0.0.4', 9080,
      { protocol: 'HBONE', actual: '10.0.0.9:15008', target: '10.0.0.4:9080', sans: [id('waypoint')], via: 'workload-waypoint' }],
    ['the waypoint calling its own workload goes direct', 'w', '10.0.0.4', 9080,
      { protocol: 'HBONE', actual: '10.0.0.4:15008', target: '10.0.0.4:9080', sans: [id('ratings')], via: 'workload' }],
    ['a PASSTHROUGH service: TCP to the original destination', 'c', '10.96.0.5', 443,
      { protocol: 'TCP', actual: '10.96.0.5:443', sans: [], via: 'passthrough' }],
    ['a destination unknown to the mesh passes through as TCP', 'c', '93.184.216.34', 443,
      { protocol: 'TCP', actual: '93.184.216.34:443', sans: [], via: 'passthrough' }],
    ['ALLOW_ALL health policy keeps an unhealthy endpoint', 'c', '10.96.0.8', 80,
      { protocol: 'HBONE', actual: '10.0.0.20:15008', target: '10.0.0.20:80', service: 'sick-ok.default.svc.cluster.local', sans: [id('default')], via: 'workload' }],
  ];
  for (const [name, src, ip, port, expected] of cases) {
    test(name, () => {
      assert.deepEqual(summary(buildOutboundRequest(ctx(), wl(src), wl(src).workloadIps[0], { address: ip, port })), expected);
    });
  }

  const errors: Array<[string, string, number, string, RegExp]> = [
    ['a service without endpoints', '10.96.0.6', 80, 'no_healthy_upstream', /no healthy upstream: 10\.96\.0\.6:80/],
    ['a port the service does not have', '10.96.0.1', 81, 'no_healthy_upstream', /no healthy upstream/],
    ['only unhealthy endpoints (ONLY_HEALTHY)', '10.96.0.7', 80, 'no_healthy_upstream', /no healthy upstream/],
    ['STRICT locality with no endpoint on the node', '10.96.1.2', 80, 'no_healthy_upstream', /no healthy upstream/],
    ['a loop to our own ports', '127.0.0.1', 15008, 'self_call', /attempted recursive call to ourselves/],
  ];
  for (const [name, ip, port, code, message] of errors) {
    test(`error: ${name}`, () => {
      assert.throws(() => buildOutboundRequest(ctx(), wl('c'), '10.0.0.1', { address: ip, port }), (e: unknown) => e instanceof RoutingError && e.code === code && message.test(e.message));
    });
  }

  test('FAILOVER prefers the endpoint matching region and zone, whatever the draw', () => {
    for (const draw of [0, 0.5, 0.999]) {
      const r = buildOutboundRequest(ctx(() => draw), wl('c'), '10.0.0.1', { address: '10.96.1.1', port: 80 });
      assert.equal(r.actualDestination.address, '10.0.1.1');
    }
  });

  test('endpoints are picked in proportion to capacity', () => {
    const picks = [0, 0.2, 0.3, 0.6, 0.9].map((draw) => buildOutboundRequest(ctx(() => draw), wl('c'), '10.0.0.1', { address: '10.96.1.3', port: 80 }).actualDestination.address);
    // far (capacity 1) owns [0, 0.25), big (capacity 3) owns [0.25, 1).
    assert.deepEqual(picks, ['10.0.1.2', '10.0.1.2', '10.0.1.3', '10.0.1.3', '10.0.1.3']);
  });

  test('a waypoint that cannot be resolved is an error, not a bypass', () => {
    const s2 = new ProxyState();
    loadLocalConfig(s2, MESH.replace('destination: /10.96.0.9', 'destination: /10.96.0.99'));
    assert.throws(() => buildOutboundRequest({ ...ctx(), state: s2 }, s2.workloadsByUid.get('c')!, '10.0.0.1', { address: '10.0.0.4', port: 9080 }), /unknown waypoint: \/10\.96\.0\.99/);
  });
});

// Found beside istio/ztunnel (the interop run, README): its access log says `http status: 401
// Unauthorized` for a CONNECT the peer refused; ours said `CONNECT … answered 401`.
test("a CONNECT refused by status is logged in ztunnel's words; other HBONE errors as they came", () => {
  assert.equal(hboneErrorText(new HboneConnectError('status', 'CONNECT 10.0.0.4:80 via 10.0.0.4:15008 answered 401', 401)), 'http status: 401 Unauthorized');
  assert.equal(hboneErrorText(new HboneConnectError('status', 'x', 503)), 'http status: 503 Service Unavailable');
  assert.equal(hboneErrorText(new HboneConnectError('connect', 'peer identity a is not b')), 'peer identity a is not b');
});
