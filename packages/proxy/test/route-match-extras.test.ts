import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { RouteTable } from '../src/http/route-config.ts';
import { compileRouteMatch, queryParameter, queryParseCount, requestRandom, type RequestView } from '../src/http/route-match.ts';

type Json = Record<string, unknown>;

const oneHost = (routes: Json[]): RouteTable =>
  new RouteTable(new Msg({ name: 'rc', virtual_hosts: [{ name: 'vh', domains: ['*'], routes }] }, 'route_config'));
const fwd = (name: string, match: Json): Json => ({ name, match, route: { cluster: name } });
const req = (path: string, headers: Record<string, string> = {}): RequestView => ({ method: 'GET', path, headers, authority: 'host', scheme: 'http' });
const pick = (t: RouteTable, r: RequestView): string | undefined => t.route('host', r, false)?.route.name;

describe('route match: query_parameters', () => {
  const t = oneHost([
    fwd('exact', { prefix: '/', query_parameters: [{ name: 'user', string_match: { exact: 'jason' } }] }),
    fwd('two', { prefix: '/', query_parameters: [{ name: 'a', string_match: { prefix: 'x' } }, { name: 'b', present_match: true }] }),
    fwd('present', { prefix: '/', query_parameters: [{ name: 'debug' }] }),
    fwd('absent', { prefix: '/absent', query_parameters: [{ name: 'debug', present_match: false }] }),
    fwd('regex', { prefix: '/', query_parameters: [{ name: 'v', string_match: { safe_regex: { regex: '[0-9]+' } } }] }),
    fwd('ci', { prefix: '/', query_parameters: [{ name: 'lang', string_match: { exact: 'EN', ignore_case: true } }] }),
    fwd('fallback', { prefix: '/' }),
  ]);

  test('string_match on the value', () => {
    assert.equal(pick(t, req('/p?user=jason')), 'exact');
    assert.equal(pick(t, req('/p?x=1&user=jason&y=2')), 'exact');
    assert.equal(pick(t, req('/p?user=jasonx')), 'fallback');
    assert.equal(pick(t, req('/p')), 'fallback');
  });
  test('all matchers of a route must match', () => {
    assert.equal(pick(t, req('/p?a=xyz&b')), 'two');
    assert.equal(pick(t, req('/p?a=xyz')), 'fallback');
    assert.equal(pick(t, req('/p?a=zzz&b=1')), 'fallback');
  });
  test('no specifier means "present", with or without a value', () => {
    assert.equal(pick(t, req('/p?debug')), 'present');
    assert.equal(pick(t, req('/p?debug=')), 'present');
    assert.equal(pick(t, req('/p?debug=0')), 'present');
    assert.equal(pick(t, req('/p?debugging=1')), 'fallback');
  });
  test('present_match: false matches when the parameter is absent', () => {
    assert.equal(pick(t, req('/absent')), 'absent');
    assert.equal(pick(t, req('/absent?other=1')), 'absent');
    assert.equal(pick(t, req('/absent?debug=1')), 'present');
  });
  test('the first value of a repeated parameter is the one matched (Envoy)', () => {
    assert.equal(pick(t, req('/p?user=jason&user=other')), 'exact');
    assert.equal(pick(t, req('/p?user=other&user=jason')), 'fallback');
  });
  test('names and values are not percent-decoded (Envoy\'s route matcher uses the raw query)', () => {
    assert.equal(pick(t, req('/p?user=j%61son')), 'fallback');
    assert.equal(pick(t, req('/p?%75ser=jason')), 'fallback');
  });
  test('regex and ignore_case string matchers', () => {
    assert.equal(pick(t, req('/p?v=123')), 'regex');
    assert.equal(pick(t, req('/p?v=12a')), 'fallback');
    assert.equal(pick(t, req('/p?lang=en')), 'ci');
  });
  test('names are case-sensitive; an empty query has no parameters', () => {
    assert.equal(pick(t, req('/p?User=jason')), 'fallback');
    assert.equal(pick(t, req('/p?')), 'fallback');
  });
  test('queryParameter: first value, empty without "=", undefined when absent', () => {
    assert.equal(queryParameter('/x?q=1&r=2&q=3', 'q'), '1');
    assert.equal(queryParameter('/x?q=1&r=2&q=3', 'r'), '2');
    assert.equal(queryParameter('/x?flag&v=a=b', 'flag'), '');
    assert.equal(queryParameter('/x?flag&v=a=b', 'v'), 'a=b');
    assert.equal(queryParameter('/x?q=1', 'Q'), undefined);
    assert.equal(queryParameter('/x', 'q'), undefined);
  });
  test('the query string is parsed once per request, however many matchers look at it', () => {
    const before = queryParseCount();
    assert.equal(pick(t, req('/p?a=xyz&b=1&once=1')), 'two');
    assert.equal(queryParseCount() - before, 1, 'routes exact, two (2 matchers) all read one parse');
  });
  test('many parameters', () => {
    const q = Array.from({ length: 100 }, (_, i) => `p${i}=${i}`).join('&');
    assert.equal(queryParameter(`/x?${q}`, 'p99'), '99');
  });
  test('a name is required', () => {
    assert.throws(() => oneHost([fwd('r', { prefix: '/', query_parameters: [{ string_match: { exact: 'x' } }] })]),
      (e: unknown) => e instanceof ConfigError && e.path === 'route_config.virtual_hosts[0].routes[0].match.query_parameters[0].name');
  });
});

describe('route match: grpc', () => {
  const t = oneHost([fwd('grpc', { prefix: '/', grpc: {} }), fwd('rest', { prefix: '/' })]);
  test('application/grpc and application/grpc+<subtype> are gRPC', () => {
    assert.equal(pick(t, req('/pkg.Svc/M', { 'content-type': 'application/grpc' })), 'grpc');
    assert.equal(pick(t, req('/pkg.Svc/M', { 'content-type': 'application/grpc+proto' })), 'grpc');
  });
  test('grpc-web, other types and no content-type are not', () => {
    assert.equal(pick(t, req('/pkg.Svc/M', { 'content-type': 'application/grpc-web' })), 'rest');
    assert.equal(pick(t, req('/pkg.Svc/M', { 'content-type': 'application/grpc-web+proto' })), 'rest');
    assert.equal(pick(t, req('/pkg.Svc/M', { 'content-type': 'application/json' })), 'rest');
    assert.equal(pick(t, req('/pkg.Svc/M')), 'rest');
  });
  test('combines with headers', () => {
    const t2 = oneHost([fwd('grpc-v2', { prefix: '/', grpc: {}, headers: [{ name: 'x-v', string_match: { exact: '2' } }] }), fwd('rest', { prefix: '/' })]);
    assert.equal(pick(t2, req('/s/m', { 'content-type': 'application/grpc', 'x-v': '2' })), 'grpc-v2');
    assert.equal(pick(t2, req('/s/m', { 'content-type': 'application/grpc' })), 'rest');
  });
});

describe('route match: runtime_fraction', () => {
  const frac = (numerator: number, denominator = 'HUNDRED'): Json => ({ default_value: { numerator, denominator }, runtime_key: 'routing.canary' });

  test('0% never matches, 100% (and more) always does', () => {
    const t = oneHost([fwd('never', { prefix: '/', runtime_fraction: frac(0) }), fwd('always', { prefix: '/', runtime_fraction: frac(100) })]);
    for (let i = 0; i < 200; i++) assert.equal(pick(t, req('/')), 'always');
    const over = oneHost([fwd('over', { prefix: '/', runtime_fraction: frac(200) })]);
    assert.equal(pick(over, req('/')), 'over');
  });

  test('a fraction matches about that share of requests (runtime_key ignored)', () => {
    const t = oneHost([fwd('canary', { prefix: '/', runtime_fraction: frac(2500, 'TEN_THOUSAND') }), fwd('stable', { prefix: '/' })]);
    let canary = 0;
    for (let i = 0; i < 4000; i++) if (pick(t, req('/')) === 'canary') canary++;
    assert.ok(canary > 850 && canary < 1150, `canary ${canary} of 4000`);
  });

  test('one random value per request, shared by every route of the table (Envoy\'s stream id): 10% then 30% split 10/20/70', () => {
    const t = oneHost([
      fwd('a', { prefix: '/', runtime_fraction: frac(10) }),
      fwd('b', { prefix: '/', runtime_fraction: frac(30) }),
      fwd('c', { prefix: '/' }),
    ]);
    const n: Record<string, number> = { a: 0, b: 0, c: 0 };
    for (let i = 0; i < 10_000; i++) n[pick(t, req('/')) as string]++;
    assert.ok(n.a > 800 && n.a < 1200, `a ${n.a}`);
    assert.ok(n.b > 1750 && n.b < 2250, `b ${n.b} (independent draws would give ~2700)`);
    assert.ok(n.c > 6600 && n.c < 7400, `c ${n.c}`);
  });

  test('the same request object keeps its draw; a new one draws again', () => {
    const r = req('/');
    assert.equal(requestRandom(r), requestRandom(r));
    const seen = new Set<number>();
    for (let i = 0; i < 20; i++) seen.add(requestRandom(req('/')));
    assert.ok(seen.size > 1);
  });

  test('evaluated with path and headers: a non-matching path never consumes it', () => {
    const t = oneHost([fwd('api', { prefix: '/api', runtime_fraction: frac(100), headers: [{ name: 'x', present_match: true }] }), fwd('rest', { prefix: '/' })]);
    assert.equal(pick(t, req('/api', { x: '1' })), 'api');
    assert.equal(pick(t, req('/api')), 'rest');
    assert.equal(pick(t, req('/other', { x: '1' })), 'rest');
  });

  test('default_value is required', () => {
    assert.throws(() => compileRouteMatch(new Msg({ prefix: '/', runtime_fraction: { runtime_key: 'k' } }, 'match')),
      (e: unknown) => e instanceof ConfigError && e.path === 'match.runtime_fraction.default_value');
    assert.throws(() => compileRouteMatch(new Msg({ prefix: '/', runtime_fraction: { default_value: { numerator: 1, denominator: 'THOUSAND' } } }, 'match')),
      (e: unknown) => e instanceof ConfigError && e.path === 'match.runtime_fraction.default_value.denominator');
  });
});

describe('route match: still refused', () => {
  for (const f of ['tls_context', 'dynamic_metadata', 'filter_state', 'path_match_policy']) {
    test(f, () => {
      assert.throws(() => compileRouteMatch(new Msg({ prefix: '/', [f]: {} }, 'match')),
        (e: unknown) => e instanceof ConfigError && e.path === `match.${f}` && /not supported/.test(e.message));
    });
  }
});
