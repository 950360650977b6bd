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
