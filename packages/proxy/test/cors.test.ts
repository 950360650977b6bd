import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { RouteTable } from '../src/http/route-config.ts';
import { FilterChainRun } from '../src/http/filter-chain.ts';
import { RequestRecord } from '../src/http/request-record.ts';
import type { Exchange, Headers } from '../src/http/exchange.ts';
import { StatsStore } from '../src/stats/store.ts';
import { CORS_EXTENSION, CORS_NAME, CORS_POLICY_TYPE, CORS_TYPE, compileCorsPolicy } from '../src/filters/http/cors/config.ts';
import { HTTP_FILTERS_BY_NAME, HTTP_FILTERS_BY_URL } from '../src/filters/http/registry.ts';
import { compileHcm } from '../src/filters/network/http_connection_manager/config.ts';

type Json = Record<string, unknown>;

/** What istiod emits for the VirtualService corsPolicy in istio tests/testdata/config/rule-default-route-cors-policy.yaml. */
const ISTIO_POLICY: Json = {
  '@type': CORS_POLICY_TYPE,
  allow_origin_string_match: [{ exact: 'http://foo.example' }],
  allow_methods: 'POST,GET,OPTIONS',
  allow_headers: 'content-type',
  expose_headers: 'x-custom-header',
  max_age: '300',
  allow_credentials: true,
  filter_enabled: { default_value: { numerator: 100, denominator: 'HUNDRED' } },
};

const tpfc = (policy: Json | undefined): Json => (policy ? { typed_per_filter_config: { [CORS_NAME]: policy } } : {});

interface Levels { route?: Json; vhost?: Json; config?: Json; action?: Json }

function harness(levels: Levels) {
  const compilers = new Map([[CORS_NAME, (m: Msg) => compileCorsPolicy(m)]]);
  const table = new RouteTable(new Msg({
    name: 'rc', ...tpfc(levels.config),
    virtual_hosts: [{
      name: 'vh', domains: ['*'], ...tpfc(levels.vhost),
      routes: [
        { name: 'direct', match: { prefix: '/direct' }, direct_response: { status: 200 }, ...tpfc(levels.route) },
        { name: 'r', match: { prefix: '/' }, ...(levels.action ?? { route: { cluster: 'backend' } }), ...tpfc(levels.route) },
      ],
    }],
  }, 'route_config'), compilers);
  const store = new StatsStore();
  const filter = CORS_EXTENSION.compile(CORS_NAME, new Msg({ '@type': CORS_TYPE }, 'http_filters[0].typed_config')).live({ store, statPrefix: 'ingress' });
  const stat = (n: string): number => store.find('counters', `http.ingress.cors.${n}`)?.value ?? 0;

  /** Runs one request through the chain; returns whether it was forwarded, the local reply, and the response headers after encode. */
  function run(method: string, path: string, headers: Headers, upstream: Headers = { 'content-type': 'text/plain' }) {
    const ex = { method, path, authority: 'app.test', scheme: 'http', protocol: 'HTTP/1.1', headers, watch() { /* unused */ } } as unknown as Exchange;
    const rec = new RequestRecord(ex, 0);
    const m = table.route('app.test', ex, false);
    let forwarded = false;
    let reply: { status: number; details: string; flag: string; headers: Headers } | undefined;
    const chain = new FilterChainRun(ex, rec, m?.route, m?.vhost, [{ name: CORS_NAME, filter }], table,
      () => { forwarded = true; },
      (status, _body, flag, details, h) => { reply = { status, flag, details, headers: { ...(h ?? {}) } }; },
      () => { /* unused */ });
    chain.continueDecoding();
    // The response (upstream, or the local reply) passes the encoders, as the router / local-reply.ts do.
    const response: Headers = reply ? { ...reply.headers } : { ...upstream };
    chain.encodeHeaders(reply ? reply.status : 200, response);
    return { forwarded, reply, response };
  }
  return { run, stat, store };
}

const preflight = (origin: string, extra: Headers = {}): Headers => ({ origin, 'access-control-request-method': 'POST', ...extra });

describe('cors: preflight', () => {
  test('an allowed preflight is answered locally with 200 and the CORS headers, never forwarded', () => {
    const h = harness({ route: ISTIO_POLICY });
    const r = h.run('OPTIONS', '/api', preflight('http://foo.example', { 'access-control-request-headers': 'content-type' }));
    assert.equal(r.forwarded, false);
    assert.ok(r.reply);
    assert.equal(r.reply.status, 200);
    assert.equal(r.reply.details, 'cors_response');
    assert.equal(r.reply.flag, '-');
    assert.deepEqual(r.reply.headers, {
      'access-control-allow-origin': 'http://foo.example',
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': 'POST,GET,OPTIONS',
      'access-control-allow-headers': 'content-type',
      'access-control-max-age': '300',
    });
    // The filter's encoder runs on its own reply too (Envoy encodes it through the chain): expose-headers joins.
    assert.equal(r.response['access-control-expose-headers'], 'x-custom-header');
    assert.equal(h.stat('origin_valid'), 1);
    assert.equal(h.stat('origin_invalid'), 0);
  });

  test('a disallowed preflight is forwarded by default (forward_not_matching_preflights defaults to true)', () => {
    const h = harness({ route: ISTIO_POLICY });
    const r = h.run('OPTIONS', '/api', preflight('http://evil.example'));
    assert.equal(r.forwarded, true);
    assert.equal(r.reply, undefined);
    assert.equal(r.response['access-control-allow-origin'], undefined);
    assert.equal(h.stat('origin_invalid'), 1);
  });

  test('forward_not_matching_preflights: false answers locally, without allow-origin', () => {
    const h = harness({ route: { ...ISTIO_POLICY, forward_not_matching_preflights: false } });
    const r = h.run('OPTIONS', '/api', preflight('http://evil.example'));
    assert.equal(r.forwarded, false);
    assert.equal(r.reply?.status, 200);
    assert.equal(r.reply?.headers['access-control-allow-origin'], undefined);
    assert.equal(r.reply?.headers['access-control-allow-methods'], 'POST,GET,OPTIONS');
    assert.equal(r.response['access-control-expose-headers'], undefined, 'no latched origin: the encoder adds nothing');
  });

  test('OPTIONS without Access-Control-Request-Method is an actual request, not a preflight', () => {
    const h = harness({ route: ISTIO_POLICY });
    const r = h.run('OPTIONS', '/api', { origin: 'http://foo.example' });
    assert.equal(r.forwarded, true);
    assert.equal(r.response['access-control-allow-origin'], 'http://foo.example');
  });

  test('"*" allow_methods / allow_headers echo the request\'s', () => {
    const h = harness({ route: { allow_origin_string_match: [{ prefix: 'http://' }], allow_methods: '*', allow_headers: '*' } });
    const r = h.run('OPTIONS', '/', preflight('http://a.example', { 'access-control-request-method': 'DELETE', 'access-control-request-headers': 'x-a,x-b' }));
    assert.equal(r.reply?.headers['access-control-allow-methods'], 'DELETE');
    assert.equal(r.reply?.headers['access-control-allow-headers'], 'x-a,x-b');
    assert.equal(r.reply?.headers['access-control-allow-credentials'], undefined);
    assert.equal(r.reply?.headers['access-control-max-age'], undefined);
  });

  test('private network access: only when allowed and asked for', () => {
    const h = harness({ route: { ...ISTIO_POLICY, allow_private_network_access: true } });
    assert.equal(h.run('OPTIONS', '/', preflight('http://foo.example', { 'access-control-request-private-network': 'true' })).reply?.headers['access-control-allow-private-network'], 'true');
    assert.equal(h.run('OPTIONS', '/', preflight('http://foo.example')).reply?.headers['access-control-allow-private-network'], undefined);
    const off = harness({ route: ISTIO_POLICY });
    assert.equal(off.run('OPTIONS', '/', preflight('http://foo.example', { 'access-control-request-private-network': 'true' })).reply?.headers['access-control-allow-private-network'], undefined);
  });
});

describe('cors: actual requests', () => {
  test('an allowed origin gets allow-origin (echoed), allow-credentials, expose-headers on the response', () => {
    const h = harness({ route: ISTIO_POLICY });
    const r = h.run('GET', '/api', { origin: 'http://foo.example' });
    assert.equal(r.forwarded, true);
    assert.deepEqual(r.response, {
      'content-type': 'text/plain',
      'access-control-allow-origin': 'http://foo.example',
      'access-control-allow-credentials': 'true',
      'access-control-expose-headers': 'x-custom-header',
    });
    assert.equal(h.stat('origin_valid'), 1);
  });

  test('a disallowed origin gets no CORS headers and counts as invalid', () => {
    const h = harness({ route: ISTIO_POLICY });
    const r = h.run('GET', '/api', { origin: 'http://evil.example' });
    assert.equal(r.forwarded, true);
    assert.deepEqual(r.response, { 'content-type': 'text/plain' });
    assert.equal(h.stat('origin_invalid'), 1);
  });

  test('no Origin header: nothing added, no stats', () => {
    const h = harness({ route: ISTIO_POLICY });
    assert.deepEqual(h.run('GET', '/api', {}).response, { 'content-type': 'text/plain' });
    assert.deepEqual(h.run('OPTIONS', '/api', { 'access-control-request-method': 'GET' }).response, { 'content-type': 'text/plain' });
    assert.equal(h.stat('origin_valid') + h.stat('origin_invalid'), 0);
  });

  test('a matcher that accepts "*" allows every origin, and the origin itself is echoed', () => {
    const h = harness({ route: { allow_origin_string_match: [{ exact: '*' }] } });
    assert.equal(h.run('GET', '/', { origin: 'https://anything.example' }).response['access-control-allow-origin'], 'https://anything.example');
    const re = harness({ route: { allow_origin_string_match: [{ safe_regex: { regex: '.*' } }] } });
    assert.equal(re.run('GET', '/', { origin: 'https://x.example' }).response['access-control-allow-origin'], 'https://x.example');
  });

  test('string matchers: suffix, regex, ignore_case', () => {
    const h = harness({ route: { allow_origin_string_match: [{ suffix: '.corp.example' }, { safe_regex: { regex: 'https://app[0-9]\\.example' } }, { exact: 'HTTP://UPPER.example', ignore_case: true }] } });
    assert.equal(h.run('GET', '/', { origin: 'https://a.corp.example' }).response['access-control-allow-origin'], 'https://a.corp.example');
    assert.equal(h.run('GET', '/', { origin: 'https://app7.example' }).response['access-control-allow-origin'], 'https://app7.example');
    assert.equal(h.run('GET', '/', { origin: 'http://upper.EXAMPLE' }).response['access-control-allow-origin'], 'http://upper.EXAMPLE');
    assert.equal(h.run('GET', '/', { origin: 'https://app77.example' }).response['access-control-allow-origin'], undefined);
  });

  test('a policy without origins allows none', () => {
    const h = harness({ route: { allow_methods: 'GET' } });
    assert.equal(h.run('GET', '/', { origin: 'http://foo.example' }).response['access-control-allow-origin'], undefined);
    assert.equal(h.stat('origin_invalid'), 1);
  });
});

describe('cors: where the policy comes from', () => {
  test('no policy anywhere: the filter does nothing', () => {
    const h = harness({});
    const r = h.run('OPTIONS', '/', preflight('http://foo.example'));
    assert.equal(r.forwarded, true);
    assert.equal(h.stat('origin_valid') + h.stat('origin_invalid'), 0);
  });

  test('virtual host and route configuration levels apply when the route has none', () => {
    assert.equal(harness({ vhost: ISTIO_POLICY }).run('GET', '/', { origin: 'http://foo.example' }).response['access-control-allow-origin'], 'http://foo.example');
    assert.equal(harness({ config: ISTIO_POLICY }).run('GET', '/', { origin: 'http://foo.example' }).response['access-control-allow-origin'], 'http://foo.example');
  });

  test('each field comes from the most specific level that sets it', () => {
    const h = harness({
      route: { expose_headers: 'x-route', allow_credentials: false },
      vhost: { allow_origin_string_match: [{ exact: 'http://foo.example' }], expose_headers: 'x-vhost', allow_methods: 'GET', allow_credentials: true },
    });
    const r = h.run('GET', '/', { origin: 'http://foo.example' });
    assert.equal(r.response['access-control-allow-origin'], 'http://foo.example', 'origins from the virtual host');
    assert.equal(r.response['access-control-expose-headers'], 'x-route', 'the route wins where it sets a field');
    assert.equal(r.response['access-control-allow-credentials'], undefined, 'an explicit false on the route wins');
    assert.equal(h.run('OPTIONS', '/', preflight('http://foo.example')).reply?.headers['access-control-allow-methods'], 'GET');
  });

  test('direct responses and redirects bypass the filter', () => {
    const h = harness({ route: ISTIO_POLICY });
    const r = h.run('OPTIONS', '/direct', preflight('http://foo.example'));
    assert.equal(r.forwarded, true, 'handed to the router, which answers the direct response');
    assert.equal(r.response['access-control-allow-origin'], undefined);
    const redirect = harness({ route: ISTIO_POLICY, action: { redirect: { path_redirect: '/elsewhere' } } });
    assert.equal(redirect.run('GET', '/x', { origin: 'http://foo.example' }).response['access-control-allow-origin'], undefined);
  });

  test('FilterConfig disabled on the route turns CORS off there', () => {
    const h = harness({ vhost: ISTIO_POLICY, route: { '@type': 'type.googleapis.com/envoy.config.route.v3.FilterConfig', disabled: true } });
    const r = h.run('OPTIONS', '/api', preflight('http://foo.example'));
    assert.equal(r.forwarded, true);
    assert.equal(r.response['access-control-allow-origin'], undefined);
  });
});

describe('cors: filter_enabled and shadow_enabled', () => {
  const pct = (n: number): Json => ({ default_value: { numerator: n, denominator: 'HUNDRED' } });

  test('filter_enabled 0%: nothing happens, not even stats', () => {
    const h = harness({ route: { ...ISTIO_POLICY, filter_enabled: pct(0) } });
    const r = h.run('OPTIONS', '/', preflight('http://foo.example'));
    assert.equal(r.forwarded, true);
    assert.equal(r.response['access-control-allow-origin'], undefined);
    assert.equal(h.stat('origin_valid'), 0);
  });

  test('shadow mode counts origins but enforces nothing', () => {
    const h = harness({ route: { ...ISTIO_POLICY, filter_enabled: pct(0), shadow_enabled: pct(100) } });
    const pre = h.run('OPTIONS', '/', preflight('http://foo.example'));
    assert.equal(pre.forwarded, true);
    assert.equal(pre.response['access-control-allow-origin'], undefined);
    h.run('GET', '/', { origin: 'http://evil.example' });
    assert.equal(h.stat('origin_valid'), 1);
    assert.equal(h.stat('origin_invalid'), 1);
  });

  test('filter_enabled wins over shadow_enabled when both are on', () => {
    const h = harness({ route: { ...ISTIO_POLICY, shadow_enabled: pct(100) } });
    assert.equal(h.run('OPTIONS', '/', preflight('http://foo.example')).reply?.status, 200);
  });

  test('filter_enabled 50% applies to about half the requests', () => {
    const h = harness({ route: { ...ISTIO_POLICY, filter_enabled: pct(50) } });
    let answered = 0;
    for (let i = 0; i < 2000; i++) if (h.run('OPTIONS', '/', preflight('http://foo.example')).reply) answered++;
    assert.ok(answered > 850 && answered < 1150, `answered ${answered} of 2000`);
  });

  test('enabled/shadow come from the most specific policy only', () => {
    const h = harness({ route: { expose_headers: 'x' }, vhost: { ...ISTIO_POLICY, filter_enabled: pct(0) } });
    assert.equal(h.run('OPTIONS', '/', preflight('http://foo.example')).reply?.status, 200, 'the route policy (no filter_enabled) is enabled');
  });
});

describe('cors: config', () => {
  test('registered by type URL and by name', () => {
    assert.equal(HTTP_FILTERS_BY_URL.get(CORS_TYPE), CORS_EXTENSION);
    assert.equal(HTTP_FILTERS_BY_NAME.get('envoy.filters.http.cors'), CORS_EXTENSION);
  });

  test('an istiod-shaped HCM (cors before the router, policy per route) compiles', () => {
    const hcm = compileHcm(new Msg({
      stat_prefix: 'inbound_0.0.0.0_8080',
      route_config: { name: 'inbound|8080||', virtual_hosts: [{ name: 'inbound|http|8080', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'inbound|8080||' }, ...tpfc(ISTIO_POLICY) }] }] },
      http_filters: [
        { name: 'envoy.filters.http.cors', typed_config: { '@type': CORS_TYPE } },
        { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
      ],
    }, 'hcm'));
    assert.equal(hcm.httpFilters.length, 1);
    assert.equal(hcm.httpFilters[0].name, CORS_NAME);
    const route = hcm.routes.route('x', { method: 'GET', path: '/', authority: 'x', scheme: 'http', headers: {} }, false)?.route;
    assert.ok(route?.perFilter?.get(CORS_NAME));
  });

  test('unknown CorsPolicy fields and a foreign @type are refused, naming the field', () => {
    assert.throws(() => compileCorsPolicy(new Msg({ allow_origin: ['*'] }, 'p')), (e: unknown) => e instanceof ConfigError && e.path === 'p.allow_origin');
    assert.throws(() => compileCorsPolicy(new Msg({ '@type': 'type.googleapis.com/envoy.config.route.v3.CorsPolicy' }, 'p')), (e: unknown) => e instanceof ConfigError && e.path === 'p.@type');
    assert.throws(() => compileCorsPolicy(new Msg({ allow_origin_string_match: [{}] }, 'p')), ConfigError);
    assert.throws(() => CORS_EXTENSION.compile(CORS_NAME, new Msg({ '@type': CORS_TYPE, bogus: 1 }, 'f')), ConfigError);
  });

  test('defaults: credentials off, forward non-matching preflights, enabled, no shadow', () => {
    const p = compileCorsPolicy(new Msg({}, 'p'));
    assert.equal(p.allowCredentials, undefined);
    assert.equal(p.forwardNotMatchingPreflights, undefined);
    assert.equal(p.filterEnabled, undefined);
    assert.equal(p.shadowEnabled, undefined);
    assert.equal(compileCorsPolicy(new Msg({ filter_enabled: { default_value: { numerator: 5, denominator: 'TEN_THOUSAND' } } }, 'p')).filterEnabled, 0.0005);
  });
});
