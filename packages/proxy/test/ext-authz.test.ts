import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import type { Exchange } from '../src/http/exchange.ts';
import { RequestRecord } from '../src/http/request-record.ts';
import type { ConnInfo } from '../src/listener/conn-info.ts';
import { followBody, readBodyPrefix, type BodyPrefix } from '../src/http/buffered-body.ts';
import { compileExtAuthz, compileExtAuthzPerRoute, EXT_AUTHZ_TYPE } from '../src/filters/http/ext_authz/config.ts';
import { buildCheckRequest } from '../src/filters/http/ext_authz/check-request.ts';
import { toResult } from '../src/filters/http/ext_authz/grpc-client.ts';
import { httpResult } from '../src/filters/http/ext_authz/http-client.ts';
import { applyToRequest, applyToResponse, denialHeaders, editQuery } from '../src/filters/http/ext_authz/result.ts';
import { authProtos } from '../src/filters/http/ext_authz/protos.ts';
import { HTTP_FILTERS_BY_URL } from '../src/filters/http/registry.ts';

type Json = Record<string, unknown>;

const DUMP = new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/authz/testdata/configdump.yaml', import.meta.url);

/** Every ExtAuthz typed_config in the sidecar dump, with its path. */
function dumpConfigs(): Array<{ path: string; config: Json }> {
  const out: Array<{ path: string; config: Json }> = [];
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v)) { v.forEach((x, i) => walk(x, `${path}[${i}]`)); return; }
    if (v === null || typeof v !== 'object') return;
    const o = v as Json;
    if (o['@type'] === EXT_AUTHZ_TYPE) out.push({ path, config: o });
    for (const [k, x] of Object.entries(o)) walk(x, path ? `${path}.${k}` : k);
  };
  walk(JSON.parse(readFileSync(DUMP, 'utf8')), '');
  return out;
}

const GRPC = { grpc_service: { envoy_grpc: { cluster_name: 'authz' } }, transport_api_version: 'V3' };

function refuses(raw: Json, field: string, pattern?: RegExp): void {
  assert.throws(() => compileExtAuthz(new Msg(raw, 'f')), (e: unknown) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.path, field ? `f.${field}` : 'f');
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
}

describe('ext_authz config', () => {
  test('every ext_authz config in the sidecar dump compiles, as istiod means it', () => {
    const found = dumpConfigs();
    assert.equal(found.length, 5);
    for (const { path, config } of found) {
      const c = compileExtAuthz(new Msg(config, path));
      assert.equal(c.service.kind, 'grpc');
      assert.ok(c.service.kind === 'grpc');
      assert.equal(c.service.cluster, 'outbound|9191||sample-ext-authz-grpc');
      assert.equal(c.service.authority, 'sample-ext-authz-grpc.local');
      assert.equal(c.service.timeoutMs, 600_000);
      assert.deepEqual(c.body, { maxBytes: 8000, allowPartial: false, packAsBytes: false });
      assert.equal(c.statusOnError, 403);
      assert.equal(c.failureModeAllow, false);
      // Istio's CUSTOM action: the check runs only where the RBAC shadow engine matched a CUSTOM policy.
      const md = (id: string) => new Map([['envoy.filters.http.rbac', { istio_ext_authz_shadow_effective_policy_id: id }]]);
      assert.equal(c.enabledMetadata?.(md('istio-ext-authz-ns[foo]-policy[ext-authz]-rule[0]')), true);
      assert.equal(c.enabledMetadata?.(md('ns[foo]-policy[allow]-rule[0]')), false);
      assert.equal(c.enabledMetadata?.(undefined), false);
    }
    assert.ok(HTTP_FILTERS_BY_URL.get(EXT_AUTHZ_TYPE), 'registered by type URL');
  });

  test('bad or unbuilt configs fail naming the field', () => {
    refuses({}, '', /one of grpc_service, http_service is required/);
    refuses({ ...GRPC, http_service: {} }, '', /only one of/);
    refuses({ grpc_service: GRPC.grpc_service }, 'transport_api_version', /must be V3/);
    refuses({ ...GRPC, transport_api_version: 'V2' }, 'transport_api_version');
    refuses({ grpc_service: { google_grpc: { target_uri: 'x' } }, transport_api_version: 'V3' }, 'grpc_service.google_grpc');
    refuses({ grpc_service: { envoy_grpc: {} }, transport_api_version: 'V3' }, 'grpc_service.envoy_grpc.cluster_name', /required/);
    refuses({ ...GRPC, with_request_body: { max_request_bytes: 0 } }, 'with_request_body.max_request_bytes', /greater than 0/);
    refuses({ ...GRPC, with_request_body: { max_request_bytes: 10, bogus: 1 } }, 'with_request_body.bogus');
    refuses({ ...GRPC, clear_route_cache: true }, 'clear_route_cache', /not supported/);
    refuses({ ...GRPC, validate_mutations: true }, 'validate_mutations', /not supported/);
    refuses({ ...GRPC, route_metadata_context_namespaces: ['x'] }, 'route_metadata_context_namespaces', /not supported/);
    refuses({ ...GRPC, decoder_header_mutation_rules: {} }, 'decoder_header_mutation_rules', /not supported/);
    refuses({ ...GRPC, status_on_error: { code: 'NoSuchStatus' } }, 'status_on_error.code', /unknown status/);
    refuses({ ...GRPC, something_new: 1 }, 'something_new', /not supported/);
    refuses({ http_service: { server_uri: { uri: 'http://a', timeout: '1s' } } }, 'http_service.server_uri.cluster', /required/);
    refuses({ http_service: { server_uri: { uri: 'http://a', cluster: 'c' }, path_prefix: 'x' } }, 'http_service.path_prefix');
    refuses({ http_service: { server_uri: { uri: 'http://a', cluster: 'c' }, authorization_response: { allowed_upstream_headers: { patterns: [{}] } } } },
      'http_service.authorization_response.allowed_upstream_headers.patterns[0]', /one of exact/);
  });

  test('status_on_error by name or number; HTTP service defaults', () => {
    assert.equal(compileExtAuthz(new Msg({ ...GRPC, status_on_error: { code: 'ServiceUnavailable' } }, 'f')).statusOnError, 503);
    assert.equal(compileExtAuthz(new Msg({ ...GRPC, status_on_error: { code: 500 } }, 'f')).statusOnError, 500);
    const h = compileExtAuthz(new Msg({ http_service: { server_uri: { uri: 'http://authz', cluster: 'c', timeout: '0.25s' } } }, 'f'));
    assert.ok(h.service.kind === 'http');
    assert.equal(h.service.timeoutMs, 250);
    // Without allowed_headers only the four Envoy always sends go to an HTTP authorization server.
    for (const n of ['authorization', ':method', ':path', ':authority']) assert.ok(h.service.requestHeaders(n), n);
    assert.equal(h.service.requestHeaders('cookie'), false);
    // Without allowed_client_headers a denial passes every header but Host.
    assert.equal(h.service.clientHeaders('x-anything'), true);
    assert.equal(h.service.clientHeaders('host'), false);
  });

  test('ExtAuthzPerRoute: disabled, or check settings; contradictions refused', () => {
    assert.deepEqual(compileExtAuthzPerRoute(new Msg({ disabled: true }, 'r')), { disabled: true });
    const cs = compileExtAuthzPerRoute(new Msg({ check_settings: { context_extensions: { a: '1' }, disable_request_body_buffering: true } }, 'r'));
    assert.deepEqual(cs, { disabled: false, contextExtensions: { a: '1' }, disableBodyBuffering: true, body: undefined });
    assert.throws(() => compileExtAuthzPerRoute(new Msg({ disabled: false }, 'r')), /r\.disabled: must be true/);
    assert.throws(() => compileExtAuthzPerRoute(new Msg({}, 'r')), /r\.check_settings: is required/);
    assert.throws(() => compileExtAuthzPerRoute(new Msg({ check_settings: {}, disabled: true }, 'r')), /only one of/);
    assert.throws(() => compileExtAuthzPerRoute(new Msg({ check_settings: { nope: 1 } }, 'r')), /r\.check_settings\.nope/);
  });
});

function fakeExchange(headers: Json, path = '/p?a=1', method = 'POST'): Exchange {
  const conn = {
    id: 1, remoteAddress: '10.0.0.1', remotePort: 5555, localAddress: '10.0.0.2', localPort: 15006,
    originalDst: { address: '10.0.0.2', port: 8080 }, tls: true, serverName: 'svc.local', alpn: 'h2',
    peerUriSans: ['spiffe://cluster.local/ns/a/sa/client'], localUriSans: ['spiffe://cluster.local/ns/b/sa/server'],
    startTime: 0, filterState: undefined,
  } satisfies ConnInfo;
  return { protocol: 'HTTP/2', method, path, authority: 'svc:8080', scheme: 'https', headers, hasBody: true, conn } as unknown as Exchange;
}

describe('ext_authz check and answers', () => {
  test('CheckRequest: attributes as Envoy fills them, encoded and decoded through the real proto', () => {
    const c = compileExtAuthz(new Msg({ ...GRPC, include_tls_session: true, disallowed_headers: { patterns: [{ exact: 'cookie' }] } }, 'f'));
    const ex = fakeExchange({ 'content-type': 'text/plain', cookie: 'secret', 'x-multi': ['a', 'b'], 'x-envoy-auth-partial-body': 'spoofed', 'x-gone': undefined });
    const rec = new RequestRecord(ex, 0);
    const body: BodyPrefix = { chunks: [Buffer.from('0123456789'), Buffer.from('abcdef')], size: 16, ended: true, overflow: false };
    const plain = buildCheckRequest(c, { ex, rec, streamId: '42', body, bodySettings: { maxBytes: 12, allowPartial: true, packAsBytes: false }, contextExtensions: { k: 'v' } });
    const p = authProtos();
    const back = p.checkRequest.toObject(p.checkRequest.decode(p.checkRequest.encode(plain).finish()), { longs: Number }) as { attributes: Json };
    const a = back.attributes as Json & { request: { http: Json & { headers: Record<string, string> } } };
    const http = a.request.http;
    assert.equal(http.id, '42');
    assert.equal(http.method, 'POST');
    assert.equal(http.path, '/p?a=1');
    assert.equal(http.host, 'svc:8080');
    assert.equal(http.protocol, 'HTTP/2');
    assert.equal(http.size, 16);
    assert.equal(http.body, '0123456789ab', 'the body is cut at max_request_bytes');
    assert.deepEqual(http.headers, {
      ':authority': 'svc:8080', ':path': '/p?a=1', ':method': 'POST', ':scheme': 'https',
      'content-type': 'text/plain', 'x-multi': 'a,b', 'x-envoy-auth-partial-body': 'true',
    });
    assert.deepEqual(a.source, { address: { socket_address: { address: '10.0.0.1', port_value: 5555 } }, principal: 'spiffe://cluster.local/ns/a/sa/client' });
    assert.deepEqual(a.destination, { address: { socket_address: { address: '10.0.0.2', port_value: 8080 } }, principal: 'spiffe://cluster.local/ns/b/sa/server' });
    assert.deepEqual(a.context_extensions, { k: 'v' });
    assert.deepEqual(a.tls_session, { sni: 'svc.local' });
  });

  test('CheckResponse: OK edits and a denial read as Envoy reads them', () => {
    const p = authProtos();
    const decode = (o: Json) => toResult(p.checkResponse.decode(p.checkResponse.encode(p.checkResponse.fromObject(o)).finish()) as unknown as Json);
    const ok = decode({
      ok_response: {
        headers: [{ header: { key: 'X-Set', value: '1' } }, { header: { key: 'x-app', value: 'b' }, append: { value: true } }],
        headers_to_remove: ['x-del', ':path', 'host'],
        response_headers_to_add: [{ header: { key: 'x-r', value: 'r' }, append_action: 1 /* ADD_IF_ABSENT */ }],
      },
      dynamic_metadata: { fields: { user: { stringValue: 'u' } } },
    });
    assert.equal(ok.status, 'ok');
    assert.deepEqual(ok.metadata, { user: 'u' });
    const ex = fakeExchange({ 'x-app': 'a', 'x-del': 'd', host: 'h' });
    applyToRequest(ok, ex);
    assert.equal(ex.headers['x-set'], '1');
    assert.equal(ex.headers['x-app'], 'a,b');
    assert.equal(ex.headers['x-del'], undefined);
    assert.equal(ex.headers.host, 'h', 'Host is never removed');
    const resp: Json = { 'x-r': 'upstream' };
    applyToResponse(ok, resp as never);
    assert.equal(resp['x-r'], 'upstream', 'ADD_IF_ABSENT keeps the upstream value');

    const denied = decode({ status: { code: 7 }, denied_response: { status: { code: 429 }, body: 'slow down', headers: [{ header: { key: 'set-cookie', value: 'a=1' } }, { header: { key: 'set-cookie', value: 'b=2' } }, { header: { key: 'content-length', value: '99' } }] } });
    assert.equal(denied.status, 'denied');
    assert.equal(denied.httpStatus, 429);
    assert.equal(denied.body, 'slow down');
    assert.deepEqual(denialHeaders(denied), { 'set-cookie': ['a=1', 'b=2'] });
    assert.equal(decode({ status: { code: 16 } }).httpStatus, 403, 'no denied_response: 403');
  });

  test('HTTP service answers: 5xx is an error, 200 allows, other codes deny', () => {
    const c = compileExtAuthz(new Msg({ http_service: { server_uri: { uri: 'http://a', cluster: 'c' },
      authorization_response: { allowed_upstream_headers: { patterns: [{ prefix: 'x-up' }] }, allowed_client_headers_on_success: { patterns: [{ exact: 'x-client' }] } } } }, 'f'));
    assert.ok(c.service.kind === 'http');
    assert.equal(httpResult(c.service, 503, {}, '').status, 'error');
    const ok = httpResult(c.service, 200, { 'x-up-a': '1', 'x-other': '2', 'x-client': 'c', 'x-envoy-auth-headers-to-remove': 'a, b' }, '');
    assert.deepEqual(ok.headersToSet, [['x-up-a', '1']]);
    assert.deepEqual(ok.headersToRemove, ['a', 'b']);
    assert.deepEqual(ok.responseHeaders, [{ name: 'x-client', value: 'c', action: 'add' }]);
    assert.equal(httpResult(c.service, 204, {}, '').status, 'denied', 'only 200 allows');
    const d = httpResult(c.service, 401, { 'www-authenticate': 'Basic', host: 'x' }, 'no');
    assert.deepEqual([d.status, d.httpStatus, d.body, d.headersToSet], ['denied', 401, 'no', [['www-authenticate', 'Basic']]]);
  });

  test('query_parameters_to_set / _to_remove', () => {
    assert.equal(editQuery('/a?x=1&y=2', [['y', '3'], ['z', '4']], ['x']), '/a?y=3&z=4');
    assert.equal(editQuery('/a', [['k', 'v']], []), '/a?k=v');
    assert.equal(editQuery('/a?x=1', [], ['x']), '/a');
  });
});

describe('request body prefix', () => {
  const read = (chunks: string[], limit: number, partial: boolean) => new Promise<{ prefix: BodyPrefix; source: Readable }>((resolve, reject) => {
    const source = Readable.from(chunks.map((c) => Buffer.from(c)), { objectMode: false });
    readBodyPrefix(source, limit, partial, (prefix) => resolve({ prefix, source }), () => reject(new Error('failed')));
  });
  const all = async (r: Readable): Promise<string> => { let s = ''; for await (const c of r) s += String(c); return s; };

  test('the whole body when it fits; the rest follows the prefix; overflow without partial', async () => {
    const whole = await read(['ab', 'cd'], 10, false);
    assert.deepEqual([whole.prefix.size, whole.prefix.ended, whole.prefix.overflow], [4, true, false]);
    assert.equal(await all(followBody(whole.prefix, whole.source)), 'abcd');
    const part = await read(['abc', 'def', 'ghi', 'jkl'], 5, true);
    assert.deepEqual([part.prefix.size, part.prefix.ended, part.prefix.overflow], [6, false, false]);
    assert.equal(await all(followBody(part.prefix, part.source)), 'abcdefghijkl');
    const over = await read(['abc', 'def'], 5, false);
    assert.equal(over.prefix.overflow, true);
  });
});
