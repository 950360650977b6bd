// IstioCertificateRequest.metadata (a google.protobuf.Struct) survives the wire: ClusterID and
// ztunnel's ImpersonatedIdentity (strings), numbers, booleans, lists and nested structs. Before
// the fix every value decoded as null (the Struct's Value fields were named in snake_case, which
// protobufjs's predefined Struct does not have), so the CA never saw either key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeRequest, encodeRequest } from '../src/tls/ca-protocol.ts';

test('request metadata round-trips through the protobuf encoding', () => {
  const metadata = { ClusterID: 'Kubernetes', ImpersonatedIdentity: 'spiffe://cluster.local/ns/default/sa/sleep', n: 3, yes: true, list: ['a', 1], nested: { k: 'v' } };
  const back = decodeRequest(encodeRequest({ csr: 'CSR', validityDuration: 3600, metadata }));
  assert.deepEqual(back, { csr: 'CSR', validityDuration: 3600, metadata });
});

// Istio's citadel.proto numbers: csr = 1, validity_duration = 3, metadata = 4 (istiod and istio/ztunnel).
// Skua once used 2 and 3: our own client and CA agreed, but real ztunnel's ImpersonatedIdentity was
// dropped by our CA (found by running istio/ztunnel against skua-controlplane).
test("the wire uses Istio's field numbers: validity_duration = 3, metadata = 4", () => {
  const bytes = encodeRequest({ csr: 'C', validityDuration: 60, metadata: { ClusterID: 'K' } });
  assert.deepEqual([...bytes.subarray(0, 5)], [0x0a, 1, 0x43, 0x18, 60], 'csr (1, bytes) then validity_duration (3, varint)');
  assert.equal(bytes[5], 0x22, 'metadata is field 4, length-delimited');
  // A request as istio/ztunnel encodes it: csr "C", validity_duration 60, metadata {} (empty Struct).
  const istio = Buffer.from([0x0a, 1, 0x43, 0x18, 60, 0x22, 0]);
  assert.deepEqual(decodeRequest(istio), { csr: 'C', validityDuration: 60, metadata: {} });
});
