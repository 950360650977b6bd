// A pod being deleted (Kubernetes' EndpointSlice `terminating`): istiod leaves its endpoint out of EDS
// while the pod's own sidecar keeps its config, so what it still serves during terminationDrainDuration
// keeps its inbound listener and cluster. skua-controlplane --mesh says so with `terminating: true`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseMesh } from '../packages/controlplane/src/mesh/model.ts';
import { translateMesh } from '../packages/controlplane/src/mesh/translate.ts';

const doc = (terminating: unknown): unknown => ({
  mesh: { mtls: 'STRICT', capture: 'none' },
  services: [{ name: 'echo', vip: '10.96.0.60', ports: [{ port: 8080, protocol: 'http' }] }],
  workloads: [
    { name: 'client', ip: '127.0.0.61', outbound_ip: '127.0.1.61' },
    { name: 'server-a', ip: '127.0.0.62', outbound_ip: '127.0.1.62', services: ['echo'], terminating },
    { name: 'server-b', ip: '127.0.0.63', outbound_ip: '127.0.1.63', services: ['echo'] },
  ],
});

type Json = Record<string, unknown>;
const echoEndpoints = (shared: readonly Json[]): string[] => {
  const cla = shared.find((r) => r['@type'] === 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment' && String(r.cluster_name).startsWith('outbound|8080||echo.')) as
    { endpoints?: { lb_endpoints: { endpoint: { address: { socket_address: { address: string } } } }[] }[] } | undefined;
  assert.ok(cla, 'the echo service has a ClusterLoadAssignment');
  return (cla.endpoints ?? []).flatMap((l) => l.lb_endpoints.map((e) => e.endpoint.address.socket_address.address));
};

test('a terminating workload leaves EDS; its own sidecar config is unchanged', () => {
  const before = translateMesh(parseMesh(doc(false)));
  const during = translateMesh(parseMesh(doc(true)));
  assert.deepEqual(echoEndpoints(before.sharedClusters as Json[]).sort(), ['127.0.0.62', '127.0.0.63']);
  assert.deepEqual(echoEndpoints(during.sharedClusters as Json[]), ['127.0.0.63']);
  const node = [...during.sidecars.keys()].find((k) => k.includes('server-a'));
  assert.ok(node, 'server-a still gets config');
  assert.deepEqual(during.sidecars.get(node), before.sidecars.get(node));
});

test('terminating must be a boolean, and the error names the field', () => {
  assert.throws(() => parseMesh(doc('yes')), /terminating/);
});
