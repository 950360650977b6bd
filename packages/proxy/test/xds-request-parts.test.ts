// Requests encoded in parts between time slices decode to the same request as one encoding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeDeltaRequest, decodeSotwRequest, encodeDeltaRequest, encodeSotwRequest, TYPE_URL, type DeltaRequest, type SotwRequest } from '../src/xds/discovery.ts';
import { encodeInParts } from '../src/xds/request-parts.ts';

const names = (n: number, p: string): string[] => Array.from({ length: n }, (_, i) => `${p}${i}`);
const node = { id: 'sidecar~10.0.0.1~a.ns~ns.svc.cluster.local', cluster: 'a.ns' };

test('SotW: 5,001 names in parts, node and the NACK detail once', async () => {
  const r: SotwRequest = { version_info: 'v3', node, resource_names: names(5001, 'outbound|9080||svc-'), type_url: TYPE_URL.endpoint, response_nonce: 'n9', error_detail: { code: 3, message: 'bad' } };
  const bytes = await encodeInParts({ delta: false, request: r });
  assert.deepEqual(decodeSotwRequest(bytes), decodeSotwRequest(encodeSotwRequest(r)));
  assert.equal(decodeSotwRequest(bytes).resource_names.length, 5001);
});

test('Delta: subscribe, unsubscribe and initial versions in parts', async () => {
  const r: DeltaRequest = {
    node, type_url: TYPE_URL.endpoint, resource_names_subscribe: names(4500, 's'), resource_names_unsubscribe: names(2100, 'u'),
    initial_resource_versions: Object.fromEntries(names(3000, 'v').map((n, i) => [n, String(i)])), response_nonce: '',
  };
  const back = decodeDeltaRequest(await encodeInParts({ delta: true, request: r }));
  assert.deepEqual(back, decodeDeltaRequest(encodeDeltaRequest(r)));
  assert.equal(back.resource_names_subscribe.length, 4500);
  assert.equal(Object.keys(back.initial_resource_versions).length, 3000);
});
