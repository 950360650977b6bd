import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeKeys } from '../src/config/normalize.ts';

test('camelCase fields become snake_case; Struct contents stay as written on both sides of a transport socket match', () => {
  const got = normalizeKeys({
    connectTimeout: '1s',
    transportSocketMatches: [{ name: 'tlsMode-istio', match: { tlsMode: 'istio' }, transportSocket: { name: 'tls' } }],
    loadAssignment: { endpoints: [{ lbEndpoints: [{ metadata: { filterMetadata: { 'envoy.transport_socket_match': { tlsMode: 'istio' } } } }] }] },
  });
  assert.deepEqual(got, {
    connect_timeout: '1s',
    transport_socket_matches: [{ name: 'tlsMode-istio', match: { tlsMode: 'istio' }, transport_socket: { name: 'tls' } }],
    load_assignment: { endpoints: [{ lb_endpoints: [{ metadata: { filter_metadata: { 'envoy.transport_socket_match': { tlsMode: 'istio' } } } }] }] },
  });
});
