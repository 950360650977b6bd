import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { RouteTable } from '../src/http/route-config.ts';
import { RdsRoute } from '../src/http/rds.ts';

type Json = Record<string, unknown>;

const fwd = (name: string, match: Json, extra: Json = {}): Json => ({ name, match, route: { cluster: name }, ...extra });
const table = (virtualHosts: Json[]): RouteTable => new RouteTable(new Msg({ name: 'rc', virtual_hosts: virtualHosts }, 'route_config'));
const oneHost = (routes: Json[]): RouteTable => table([{ name: 'vh', domains: ['*'], routes }]);

/** The matched route's name, or undefined. */
function pick(t: RouteTable, path: string, headers: Record<string, string | string[]> = {}, opts: { method?: string; connect?: boolean; authority?: string } = {}): string | undefined {
  return t.route(opts.authority ?? 'host', { method: opts.method ?? 'GET', path, headers, authority: opts.authority ?? 'host', scheme: 'http' }, opts.connect ?? false)?.route.name;
}

/** Asserts a ConfigError naming exactly `path`. */
function configError(fn: () => unknown, path: string, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.path, path);
    if (message) assert.match(err.message, message);
    return true;
  });
}

describe('RouteTable: virtual host selection', () => {
  const t = table([
    { name: 'exact', domains: ['www.foo.com'] },
    { name: 'suffix', domains: ['*.foo.com'] },
    { name: 'longer-suffix', domains: ['*.bar.foo.com'] },
    { name: 'prefix', domains: ['foo.*'] },
    { name: 'longer-prefix', domains: ['foo.bar.*'] },
    { name: 'port', domains: ['reviews:9080', '*.svc:9080'] },
    { name: 'upper', domains: ['API.Example.COM'] },
    { name: 'any', domains: ['*'] },
  ]);
  const vh = (authority: string): string | undefined => t.virtualHost(authority)?.name;
  const cases: Array<[string, string]> = [
    ['www.foo.com', 'exact'],
    ['x.foo.com', 'suffix'],
    ['x.bar.foo.com', 'longer-suffix'],
    ['bar.foo.com', 'suffix'],
    ['foo.bar.foo.com', 'longer-suffix'], // suffix wildcards beat prefix wildcards
    ['foo.com', 'prefix'],
    ['foo.bar.baz', 'longer-prefix'],
    ['foo.', 'any'], // a wildcard never matches the empty string
    ['.foo.com', 'any'],
    ['other.org', 'any'],
    ['WWW.Foo.COM', 'exact'],
    ['api.example.com', 'upper'],
    ['reviews:9080', 'port'],
    ['reviews', 'any'],
    ['reviews:9081', 'any'],
    ['ratings.svc:9080', 'port'],
    ['ratings.svc', 'any'],
  ];
  for (const [authority, want] of cases) {
    test(`${authority} → ${want}`, () => assert.equal(vh(authority), want));
  }
  test('exact beats every wildcard, whatever the declaration order', () => {
    const t2 = table([
      { name: 'any', domains: ['*'] },
      { name: 'prefix', domains: ['api.*'] },
      { name: 'suffix', domains: ['*.example.com'] },
      { name: 'exact', domains: ['api.example.com'] },
    ]);
    assert.equal(t2.virtualHost('api.example.com')?.name, 'exact');
    assert.equal(t2.virtualHost('www.example.com')?.name, 'suffix');
    assert.equal(t2.virtualHost('api.example.org')?.name, 'prefix');
  });
  test('no `*` host: unknown authorities get no virtual host and no route', () => {
    const t2 = table([{ name: 'only', domains: ['a.com'], routes: [fwd('r', { prefix: '/' })] }]);
    assert.equal(t2.virtualHost('b.com'), undefined);
    assert.equal(t2.route('b.com', { method: 'GET', path: '/', headers: {}, authority: 'b.com', scheme: 'http' }, false), undefined);
    assert.equal(t2.route('a.com', { method: 'GET', path: '/', headers: {}, authority: 'a.com', scheme: 'http' }, false)?.route.name, 'r');
  });
  test('duplicate domains (case-insensitive) are refused, naming the field', () => {
    configError(() => table([{ name: 'a', domains: ['Foo.com'] }, { name: 'b', domains: ['bar.com', 'foo.com'] }]),
      'route_config.virtual_hosts[1].domains[1]', /foo\.com.*more than one virtual host/);
    configError(() => table([{ name: 'a', domains: ['*'] }, { name: 'b', domains: ['*'] }]), 'route_config.virtual_hosts[1].domains[0]');
    configError(() => table([{ name: 'a', domains: ['*.x.com', '*.x.com'] }]), 'route_config.virtual_hosts[0].domains[1]');
  });
  test('a virtual host needs a name and a domain', () => {
    configError(() => table([{ name: 'a', domains: [] }]), 'route_config.virtual_hosts[0].domains');
    configError(() => table([{ domains: ['a'] }]), 'route_config.virtual_hosts[0].name');
    configError(() => table([{ name: 'a', domains: 'a.com' }]), 'route_config.virtual_hosts[0].domains', /expected a list/);
  });
});

describe('RouteTable: path matching', () => {
  test('routes are tried in order; the first match wins', () => {
    assert.equal(pick(oneHost([fwd('api', { prefix: '/api' }), fwd('all', { prefix: '/' })]), '/api/x'), 'api');
    assert.equal(pick(oneHost([fwd('all', { prefix: '/' }), fwd('api', { prefix: '/api' })]), '/api/x'), 'all');
    assert.equal(pick(oneHost([fwd('api', { prefix: '/api' })]), '/other'), undefined);
  });
  test('prefix is a plain string prefix, and sees the query string', () => {
    const t = oneHost([fwd('q', { prefix: '/search?q=' }), fwd('p', { prefix: '/api' })]);
    assert.equal(pick(t, '/search?q=cats'), 'q');
    assert.equal(pick(t, '/apiary'), 'p');
    assert.equal(pick(t, '/API'), undefined);
    assert.equal(pick(oneHost([fwd('e', { prefix: '' })]), '*'), 'e');
  });
  test('path is exact and ignores the query string', () => {
    const t = oneHost([fwd('exact', { path: '/productpage' })]);
    assert.equal(pick(t, '/productpage'), 'exact');
    assert.equal(pick(t, '/productpage?u=normal'), 'exact');
    assert.equal(pick(t, '/productpage/'), undefined);
    assert.equal(pick(t, '/productpages'), undefined);
    assert.equal(pick(t, '/ProductPage'), undefined);
  });
  test('safe_regex is anchored and ignores the query string', () => {
    const t = oneHost([fwd('re', { safe_regex: { regex: '/api/v[0-9]+/.*' } })]);
    assert.equal(pick(t, '/api/v2/users'), 're');
    assert.equal(pick(t, '/api/v2/users?x=/api/vX/'), 're');
    assert.equal(pick(t, '/x/api/v2/users'), undefined);
    assert.equal(pick(t, '/api/vX/users'), undefined);
  });
  test('an invalid regex is a ConfigError naming the field', () => {
    configError(() => oneHost([fwd('re', { safe_regex: { regex: '(' } })]), 'route_config.virtual_hosts[0].routes[0].match.safe_regex.regex');
  });
  test('path_separated_prefix matches the prefix or prefix + /, without the query', () => {
    const t = oneHost([fwd('sep', { path_separated_prefix: '/foo' })]);
    assert.equal(pick(t, '/foo'), 'sep');
    assert.equal(pick(t, '/foo/bar'), 'sep');
    assert.equal(pick(t, '/foo?x=1'), 'sep');
    assert.equal(pick(t, '/foobar'), undefined);
    assert.equal(pick(t, '/fo'), undefined);
    for (const bad of ['/foo/', 'foo', '/f?o', '/f#o']) {
      configError(() => oneHost([fwd('sep', { path_separated_prefix: bad })]), 'route_config.virtual_hosts[0].routes[0].match.path_separated_prefix');
    }
  });
  test('case_sensitive: false folds prefix, path and path_separated_prefix, never safe_regex (as in Envoy)', () => {
    const t = oneHost([
      fwd('prefix', { prefix: '/API', case_sensitive: false }),
      fwd('path', { path: '/Login', case_sensitive: { value: false } }),
      fwd('re', { safe_regex: { regex: '/img/[a-z]+\\.png' }, case_sensitive: false }),
      fwd('sep', { path_separated_prefix: '/Docs', case_sensitive: false }),
    ]);
    assert.equal(pick(t, '/api/x'), 'prefix');
    assert.equal(pick(t, '/LOGIN?next=/'), 'path');
    assert.equal(pick(t, '/img/cat.png'), 're');
    assert.equal(pick(t, '/IMG/CAT.PNG'), undefined, "Envoy: case_sensitive is 'Ignored for safe_regex matching'");
    assert.equal(pick(t, '/docs/a'), 'sep');
  });
  test('a match needs one path specifier', () => {
    configError(() => oneHost([fwd('none', {})]), 'route_config.virtual_hosts[0].routes[0].match');
  });
});

describe('RouteTable: CONNECT', () => {
  const t = oneHost([fwd('connect', { connect_matcher: {} }), fwd('all', { prefix: '' })]);
  test('connect_matcher only matches CONNECT, and ordinary routes never do', () => {
    assert.equal(pick(t, 'example.com:443', {}, { method: 'CONNECT', connect: true }), 'connect');
    assert.equal(pick(t, '/', {}, { method: 'GET', connect: false }), 'all');
    assert.equal(pick(oneHost([fwd('all', { prefix: '' })]), 'example.com:443', {}, { method: 'CONNECT', connect: true }), undefined);
  });
  test('connect_matcher still applies header matchers', () => {
    const t2 = oneHost([fwd('c', { connect_matcher: {}, headers: [{ name: 'x-tunnel', present_match: true }] })]);
    assert.equal(pick(t2, 'h:1', {}, { connect: true }), undefined);
    assert.equal(pick(t2, 'h:1', { 'x-tunnel': '1' }, { connect: true }), 'c');
  });
});

describe('RouteTable: header matchers', () => {
  const one = (hm: Json): RouteTable => oneHost([fwd('h', { prefix: '/', headers: [hm] })]);
  const hits = (hm: Json, headers: Record<string, string | string[]>): boolean => pick(one(hm), '/', headers) === 'h';
  test('exact / prefix / suffix / contains (legacy fields)', () => {
    assert.equal(hits({ name: 'x', exact_match: 'v1' }, { x: 'v1' }), true);
    assert.equal(hits({ name: 'x', exact_match: 'v1' }, { x: 'v10' }), false);
    assert.equal(hits({ name: 'x', prefix_match: 'v1' }, { x: 'v10' }), true);
    assert.equal(hits({ name: 'x', suffix_match: '.json' }, { x: 'a.json' }), true);
    assert.equal(hits({ name: 'x', suffix_match: '.json' }, { x: 'a.jsonp' }), false);
    assert.equal(hits({ name: 'x', contains_match: 'mid' }, { x: 'a-mid-b' }), true);
    assert.equal(hits({ name: 'x', contains_match: 'mid' }, { x: 'a-b' }), false);
  });
  test('header names are case-insensitive; values are not (unless ignore_case)', () => {
    assert.equal(hits({ name: 'X-User', exact_match: 'jason' }, { 'x-user': 'jason' }), true);
    assert.equal(hits({ name: 'x-user', exact_match: 'jason' }, { 'x-user': 'Jason' }), false);
    assert.equal(hits({ name: 'x-user', string_match: { exact: 'jason', ignore_case: true } }, { 'x-user': 'JASON' }), true);
  });
  test('string_match variants', () => {
    assert.equal(hits({ name: 'x', string_match: { prefix: 'ab' } }, { x: 'abc' }), true);
    assert.equal(hits({ name: 'x', string_match: { suffix: 'bc' } }, { x: 'abc' }), true);
    assert.equal(hits({ name: 'x', string_match: { contains: 'zz' } }, { x: 'abc' }), false);
    assert.equal(hits({ name: 'x', string_match: { safe_regex: { regex: 'a.c' } } }, { x: 'abc' }), true);
    assert.equal(hits({ name: 'x', string_match: { safe_regex: { regex: 'a.c' } } }, { x: 'abcd' }), false);
  });
  test('safe_regex_match is a full match', () => {
    assert.equal(hits({ name: 'x', safe_regex_match: { regex: '\\d{3}' } }, { x: '123' }), true);
    assert.equal(hits({ name: 'x', safe_regex_match: { regex: '\\d{3}' } }, { x: '1234' }), false);
    assert.equal(hits({ name: 'x', safe_regex_match: { regex: '\\d{3}' }, invert_match: true }, { x: '1234' }), true);
  });
  test('range_match is [start, end) over integers', () => {
    const r = { name: 'x', range_match: { start: '-10', end: 0 } };
    assert.equal(hits(r, { x: '-10' }), true);
    assert.equal(hits(r, { x: '-1' }), true);
    assert.equal(hits(r, { x: '0' }), false);
    assert.equal(hits(r, { x: '-1.5' }), false);
    assert.equal(hits(r, { x: 'abc' }), false);
    assert.equal(hits({ ...r, invert_match: true }, { x: '-1' }), false);
  });
  test('present_match and bare name', () => {
    assert.equal(hits({ name: 'x', present_match: true }, { x: '' }), true);
    assert.equal(hits({ name: 'x', present_match: true }, {}), false);
    assert.equal(hits({ name: 'x', present_match: false }, {}), true);
    assert.equal(hits({ name: 'x', present_match: false }, { x: 'a' }), false);
    assert.equal(hits({ name: 'x' }, { x: 'a' }), true);
    assert.equal(hits({ name: 'x' }, {}), false);
    assert.equal(hits({ name: 'x', present_match: true, invert_match: true }, {}), true);
    assert.equal(hits({ name: 'x', invert_match: true }, { x: 'a' }), false);
  });
  test('invert_match on a present header', () => {
    assert.equal(hits({ name: 'x', exact_match: 'a', invert_match: true }, { x: 'b' }), true);
    assert.equal(hits({ name: 'x', exact_match: 'a', invert_match: true }, { x: 'a' }), false);
  });
  test('treat_missing_header_as_empty matches the empty string', () => {
    assert.equal(hits({ name: 'x', exact_match: '', treat_missing_header_as_empty: true }, {}), true);
    assert.equal(hits({ name: 'x', range_match: { start: 0, end: 10 }, invert_match: true, treat_missing_header_as_empty: true }, {}), true);
    assert.equal(hits({ name: 'x', prefix_match: 'a', treat_missing_header_as_empty: true }, {}), false);
  });
  // Regression (fixed in src/http/route-match.ts compileHeaderMatcher): a missing header makes an inverted value
  // matcher match. Envoy (HeaderUtility::matchHeaders; HeaderMatcher docs for
  // treat_missing_header_as_empty) ignores the rule, so it does not match.
  test('invert_match with the header missing does not match', () => {
    assert.equal(hits({ name: 'x', exact_match: 'a', invert_match: true }, {}), false);
    assert.equal(hits({ name: 'x', range_match: { start: 0, end: 10 }, invert_match: true }, {}), false);
  });
  test('repeated headers are matched joined with ","', () => {
    assert.equal(hits({ name: 'x', exact_match: 'a,b' }, { x: ['a', 'b'] }), true);
    assert.equal(hits({ name: 'x', exact_match: 'a' }, { x: ['a', 'b'] }), false);
  });
  test('all header matchers must match', () => {
    const t = oneHost([fwd('h', { prefix: '/', headers: [{ name: 'a', exact_match: '1' }, { name: 'b', exact_match: '2' }] })]);
    assert.equal(pick(t, '/', { a: '1', b: '2' }), 'h');
    assert.equal(pick(t, '/', { a: '1', b: '3' }), undefined);
    assert.equal(pick(t, '/', { b: '2' }), undefined);
  });
  // Regression (fixed in src/http/route-config.ts route() / route-match.ts): pseudo-headers are not visible to
  // header matchers: the view's method / path / authority are never offered as :method / :path /
  // :authority, and both codecs strip them from `headers`. Istio renders VirtualService method
  // and authority matches as exactly these matchers, so they can never match.
  test('header matchers see :method and :authority', () => {
    const t = oneHost([
      fwd('post', { prefix: '/', headers: [{ name: ':method', string_match: { exact: 'POST' } }] }),
      fwd('authority', { prefix: '/', headers: [{ name: ':authority', string_match: { exact: 'host' } }] }),
    ]);
    assert.equal(pick(t, '/x', {}, { method: 'POST' }), 'post');
    assert.equal(pick(t, '/x', {}, { method: 'GET' }), 'authority');
  });
});

describe('RouteTable: actions', () => {
  const route = (r: Json) => oneHost([{ name: 'r', match: { prefix: '/' }, ...r }]).route('h', { method: 'GET', path: '/', headers: {}, authority: 'h', scheme: 'http' }, false)!.route;
  test('forward defaults and weighted clusters', () => {
    const a = route({ route: { weighted_clusters: { clusters: [{ name: 'v1', weight: 75 }, { name: 'v2', weight: { value: 25 } }] }, timeout: '2.5s' } }).action;
    assert.equal(a.kind, 'forward');
    if (a.kind !== 'forward') return;
    assert.deepEqual(a.weighted.map((w) => [w.name, w.weight]), [['v1', 75], ['v2', 25]]);
    assert.equal(a.totalWeight, 100);
    assert.equal(a.timeoutMs, 2500);
    const d = route({ route: { cluster: 'c', prefix_rewrite: '/v2/' } }).action;
    assert.ok(d.kind === 'forward');
    assert.equal(d.timeoutMs, 15_000);
    assert.equal(d.prefixRewrite, '/v2/');
    assert.equal(d.cluster, 'c');
  });
  test('redirect compiles with Envoy defaults and response codes', () => {
    const a = route({ redirect: { https_redirect: true, host_redirect: 'b.com', port_redirect: 8443, strip_query: true } }).action;
    assert.deepEqual(a, { kind: 'redirect', scheme: 'https', host: 'b.com', port: 8443, path: '', prefixRewrite: undefined, status: 301, stripQuery: true });
    const codes: Array<[string, number]> = [['FOUND', 302], ['SEE_OTHER', 303], ['TEMPORARY_REDIRECT', 307], ['PERMANENT_REDIRECT', 308]];
    for (const [code, status] of codes) {
      const r = route({ redirect: { path_redirect: '/new', response_code: code } }).action;
      assert.ok(r.kind === 'redirect');
      assert.equal(r.status, status, code);
      assert.equal(r.path, '/new');
    }
  });
  test('direct_response compiles status and inline body', () => {
    const a = route({ direct_response: { status: 503, body: { inline_string: 'down' } } }).action;
    assert.ok(a.kind === 'direct');
    assert.equal(a.status, 503);
    assert.equal(a.body?.toString(), 'down');
    const n = route({ direct_response: { status: 204 } }).action;
    assert.ok(n.kind === 'direct');
    assert.equal(n.body, undefined);
  });
  test('bad actions are ConfigErrors naming the field', () => {
    const base = 'route_config.virtual_hosts[0].routes[0]';
    configError(() => route({ direct_response: { status: 99 } }), `${base}.direct_response.status`);
    configError(() => route({ redirect: { response_code: 'NOPE' } }), `${base}.redirect.response_code`, /unknown value "NOPE"/);
    configError(() => route({}), base, /one of route, redirect, direct_response/);
    configError(() => route({ route: {} }), `${base}.route.cluster`);
  });
});

describe('RouteTable: unsupported fields are refused with their path', () => {
  const cases: Array<[string, Json, string]> = [
    ['vhost cors', { name: 'v', domains: ['*'], cors: {} }, 'route_config.virtual_hosts[0].cors'],
    ['vhost require_tls', { name: 'v', domains: ['*'], require_tls: 'ALL' }, 'route_config.virtual_hosts[0].require_tls'],
    ['vhost rate_limits', { name: 'v', domains: ['*'], rate_limits: [{}] }, 'route_config.virtual_hosts[0].rate_limits'],
    ['match tls_context', { name: 'v', domains: ['*'], routes: [fwd('r', { prefix: '/', tls_context: {} })] },
      'route_config.virtual_hosts[0].routes[0].match.tls_context'],
    ['match filter_state', { name: 'v', domains: ['*'], routes: [fwd('r', { prefix: '/', filter_state: [{}] })] },
      'route_config.virtual_hosts[0].routes[0].match.filter_state'],
    ['route tracing', { name: 'v', domains: ['*'], routes: [fwd('r', { prefix: '/' }, { tracing: {} })] },
      'route_config.virtual_hosts[0].routes[0].tracing'],
    ['action hedge_policy', { name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'c', hedge_policy: {} } }] },
      'route_config.virtual_hosts[0].routes[0].route.hedge_policy'],
    ['action rate_limits', { name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'c', rate_limits: [{}] } }] },
      'route_config.virtual_hosts[0].routes[0].route.rate_limits'],
    ['redirect regex_rewrite', { name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, redirect: { regex_rewrite: {} } }] },
      'route_config.virtual_hosts[0].routes[0].redirect.regex_rewrite'],
  ];
  for (const [name, vh, path] of cases) {
    test(name, () => configError(() => table([vh]), path, /not supported/));
  }
});

describe('RDS: one table for every connection manager when no route has typed_per_filter_config', () => {
  const plainConfig = { name: 'rc', virtual_hosts: [{ name: 'vh', domains: ['a.test'], routes: [fwd('r', { prefix: '/' })] }] };
  const withPerFilter = { name: 'rc', virtual_hosts: [{ name: 'vh', domains: ['a.test'], routes: [fwd('r', { prefix: '/' }, { typed_per_filter_config: { f: { '@type': 'x' } } })] }] };
  const compilers = (seen: string[]): ReadonlyMap<string, (m: Msg) => unknown> => new Map([['f', (m: Msg) => { seen.push(m.path); return 'compiled'; }]]);

  test('hasPerFilterConfig says whether the table depends on the filters', () => {
    assert.equal(new RouteTable(new Msg(plainConfig, 'rc')).hasPerFilterConfig, false);
    assert.equal(new RouteTable(new Msg(withPerFilter, 'rc')).hasPerFilterConfig, true);
    assert.equal(new RouteTable(new Msg({ ...plainConfig, typed_per_filter_config: { f: { '@type': 'x' } } }, 'rc')).hasPerFilterConfig, true);
  });

  test('managers attaching before and after an update share the plain table; per-filter config compiles per manager', () => {
    const plain = new RdsRoute('plain');
    const seenA: string[] = [], seenB: string[] = [];
    const tables = new Map<string, RouteTable>();
    const user = (name: string, seen: string[]) => ({ compilers: compilers(seen), onTable: (t: RouteTable) => { tables.set(name, t); } });
    plain.update(plainConfig, 'v1');
    const a = plain.attach(user('a', seenA)), b = plain.attach(user('b', seenB));
    assert.equal(a, b, 'one table for both');
    assert.equal(pick(a, '/', {}, { authority: 'a.test' }), 'r');
    plain.update(plainConfig, 'v2');
    assert.ok(tables.get('a') && tables.get('a') === tables.get('b') && tables.get('a') !== a, 'the update compiled one new table for both');

    const perFilter = new RdsRoute('per-filter');
    perFilter.update(withPerFilter, 'v1');
    const c = perFilter.attach(user('c', seenA)), d = perFilter.attach(user('d', seenB));
    assert.notEqual(c, d, 'each manager compiles its own filters\' configs');
    assert.equal(seenA.length, 1);
    assert.equal(seenB.length, 1);
    assert.equal(c.route('a.test', { method: 'GET', path: '/', headers: {}, authority: 'a.test', scheme: 'http' }, false)?.route.perFilter?.get('f'), 'compiled');
  });
});
