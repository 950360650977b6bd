// CORS filter (preflights answered locally, allow-origin on actual requests), query-parameter
// routing, and header value formatters, through a real skua-proxy process and real backends.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, T, vhost } from './lib/config.ts';

const CORS = 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors';
const CORS_POLICY = 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy';

/** istiod's translation of the corsPolicy in istio tests/testdata/config/rule-default-route-cors-policy.yaml. */
const POLICY = {
  '@type': CORS_POLICY,
  allow_origin_string_match: [{ exact: 'http://foo.example' }],
  allow_methods: 'POST,GET,OPTIONS',
  allow_headers: 'content-type',
  expose_headers: 'x-custom-header',
  max_age: '300',
  allow_credentials: true,
  filter_enabled: { default_value: { numerator: 100, denominator: 'HUNDRED' } },
};

describe('CORS, query-parameter routes and header formatters (e2e)', { timeout: 60_000 }, () => {
  let v1: Backend, v2: Backend, proxy: RunningProxy, base: string;

  before(async () => {
    v1 = await startHttpBackend('v1');
    v2 = await startHttpBackend('v2');
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([
        vhost([
          { match: { prefix: '/q', query_parameters: [{ name: 'user', string_match: { exact: 'jason' } }] }, route: { cluster: 'v2' } },
          { match: { prefix: '/q' }, route: { cluster: 'v1' } },
          {
            match: { prefix: '/fmt' }, route: { cluster: 'v1' },
            request_headers_to_add: [
              { header: { key: 'x-client-ip', value: '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
              { header: { key: 'x-local-port', value: '%DOWNSTREAM_LOCAL_PORT%' } },
              { header: { key: 'x-ua-copy', value: 'ua=%REQ(user-agent)%' } },
              { header: { key: 'x-discount', value: '100%%' } },
            ],
            response_headers_to_add: [{ header: { key: 'x-served-by', value: '%UPSTREAM_REMOTE_ADDRESS%' } }],
          },
          { match: { prefix: '/' }, route: { cluster: 'v1' }, typed_per_filter_config: { 'envoy.filters.http.cors': POLICY } },
        ]),
      ], {
        statPrefix: 'cors',
        extra: {
          http_filters: [
            { name: 'envoy.filters.http.cors', typed_config: { '@type': CORS } },
            { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } },
          ],
        },
      }))]),
    ], [cluster('v1', [v1.port]), cluster('v2', [v2.port])]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => v1?.close(), () => v2?.close()));

  test('a preflight from an allowed origin is answered by the proxy with the CORS headers', async () => {
    const seen = v1.requests.length;
    const r = await request(`${base}/api/items`, {
      method: 'OPTIONS',
      headers: { origin: 'http://foo.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], 'http://foo.example');
    assert.equal(r.headers['access-control-allow-methods'], 'POST,GET,OPTIONS');
    assert.equal(r.headers['access-control-allow-headers'], 'content-type');
    assert.equal(r.headers['access-control-max-age'], '300');
    assert.equal(r.headers['access-control-allow-credentials'], 'true');
    assert.equal(r.body.length, 0);
    assert.equal(v1.requests.length, seen, 'the preflight never reached the backend');
  });

  test('an actual request from an allowed origin gets allow-origin (echoed), credentials and expose-headers', async () => {
    const r = await request(`${base}/api/items`, { headers: { origin: 'http://foo.example' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-backend'], 'v1');
    assert.equal(r.headers['access-control-allow-origin'], 'http://foo.example');
    assert.equal(r.headers['access-control-allow-credentials'], 'true');
    assert.equal(r.headers['access-control-expose-headers'], 'x-custom-header');
  });

  test('a disallowed origin gets no CORS headers; its preflight is forwarded (forward_not_matching_preflights default)', async () => {
    const r = await request(`${base}/api/items`, { headers: { origin: 'http://evil.example' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], undefined);
    assert.equal(r.headers['access-control-allow-credentials'], undefined);
    const seen = v1.requests.length;
    const pre = await request(`${base}/api/items`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'DELETE' } });
    assert.equal(pre.headers['x-backend'], 'v1', 'answered by the backend');
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    assert.equal(v1.requests.length, seen + 1);
    assert.equal(v1.requests.at(-1)?.method, 'OPTIONS');
  });

  test('a request without Origin is untouched', async () => {
    const r = await request(`${base}/api/items`);
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], undefined);
  });

  test('origin stats under http.<stat_prefix>.cors.*', async () => {
    assert.ok((await proxy.stat('http.cors.cors.origin_valid') ?? 0) >= 2);
    assert.ok((await proxy.stat('http.cors.cors.origin_invalid') ?? 0) >= 2);
  });

  test('query_parameters pick the route', async () => {
    const jason = await request(`${base}/q/reviews?user=jason&x=1`);
    assert.equal(jason.headers['x-backend'], 'v2');
    const other = await request(`${base}/q/reviews?user=bob`);
    assert.equal(other.headers['x-backend'], 'v1');
    const none = await request(`${base}/q/reviews`);
    assert.equal(none.headers['x-backend'], 'v1');
  });

  test('header value formatters: the backend sees formatted request headers, the client formatted response headers', async () => {
    const r = await request(`${base}/fmt`, { headers: { 'user-agent': 'skua-test/1', 'x-client-ip': 'spoofed' } });
    assert.equal(r.status, 200);
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.headers['x-ua-copy'], 'ua=skua-test/1');
    assert.equal(echo.headers['x-discount'], '100%');
    assert.equal(echo.headers['x-client-ip'], '127.0.0.1', 'overwrites the client-supplied value');
    assert.equal(echo.headers['x-local-port'], String(proxy.ports.http));
    assert.equal(r.headers['x-served-by'], `127.0.0.1:${v1.port}`);
  });
});
