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

test('node metadata stays verbatim; a metadata matcher (RBAC) is a message and is converted', () => {
  const got = normalizeKeys({
    node: { id: 'n', metadata: { PROXY_CONFIG: { discoveryAddress: 'istiod:15012' } } },
    principals: [{ metadata: { filter: 'istio_authn', path: [{ key: 'request.auth.claims' }], value: { stringMatch: { exact: 'x' } } } }],
  });
  assert.deepEqual(got, {
    node: { id: 'n', metadata: { PROXY_CONFIG: { discoveryAddress: 'istiod:15012' } } },
    principals: [{ metadata: { filter: 'istio_authn', path: [{ key: 'request.auth.claims' }], value: { string_match: { exact: 'x' } } } }],
  });
});
