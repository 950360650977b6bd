// One StringMatcher for routes, RBAC and TLS SAN validation: the same JSON matcher gives the same
// answer in each (exact, prefix, suffix, contains, ignore_case, safe_regex), ignore_case never
// folds safe_regex (Envoy), RE2-refused patterns are refused everywhere naming the field, DNS SANs
// follow Envoy's wildcard rules (checked over a real TLS handshake), and the plain-value form
// (for istio.security.Authorization) agrees with the JSON form.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import type { PeerCertificate } from 'node:tls';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { RouteTable } from '../src/http/route-config.ts';
import { compileRbac } from '../src/policy/engine.ts';
import type { AuthzFacts } from '../src/policy/facts.ts';
import { compileValidation } from '../src/tls/validation.ts';
import { compileUpstreamTls } from '../src/tls/context.ts';
import { connectUpstreamTls } from '../src/tls/upstream-connect.ts';
import { dnsNameMatch, sansMatch, spiffeSanMatches } from '../src/matchers/san.ts';
import { stringMatcher, type StringMatchSpec } from '../src/matchers/string-matcher.ts';
import { CertificateAuthority } from '../../controlplane/src/ca/authority.ts';

type Json = Record<string, unknown>;

/** The matcher as a route's query_parameters string_match: does `value` route? */
function viaRoute(matcher: Json, value: string): boolean {
  const t = new RouteTable(new Msg({ name: 'rc', virtual_hosts: [{ name: 'vh', domains: ['*'], routes: [
    { name: 'hit', match: { prefix: '/', query_parameters: [{ name: 'q', string_match: matcher }] }, route: { cluster: 'c' } },
  ] }] }, 'route_config'));
  const path = `/?q=${value}`;
  return t.route('h', { method: 'GET', path, headers: {}, authority: 'h', scheme: 'http' }, false)?.route.name === 'hit';
}

/** The matcher as an RBAC principal's requested_server_name: is `value` allowed? */
function viaRbac(matcher: Json, value: string): boolean {
  const engine = compileRbac(new Msg({ action: 'ALLOW', policies: { p: { permissions: [{ requested_server_name: matcher }], principals: [{ any: true }] } } }, 'rbac'));
  const facts: AuthzFacts = {
    directRemoteIp: '10.0.0.1', remoteIp: '10.0.0.1', destinationIp: '10.0.0.2', destinationPort: 80, requestedServerName: value,
    tls: true, peerUriSans: [], peerDnsSans: [], peerSubject: '', filterState: undefined, metadata: undefined, request: undefined,
  };
  return engine.decide(facts).allowed;
}

/** The matcher as a typed URI SAN matcher of a validation context: does a peer with that SAN pass? */
function viaSan(matcher: Json, value: string): boolean {
  const v = compileValidation(new Msg({ match_typed_subject_alt_names: [{ san_type: 'URI', matcher }] }, 'validation_context'));
  return sansMatch(v.sanMatchers, { subjectaltname: `URI:${value}` } as PeerCertificate);
}

const CASES: Array<[string, Json, string, boolean]> = [
  ['exact', { exact: 'spiffe://td/ns/a' }, 'spiffe://td/ns/a', true],
  ['exact is case-sensitive', { exact: 'spiffe://td/ns/a' }, 'spiffe://TD/ns/a', false],
  ['exact + ignore_case', { exact: 'spiffe://td/ns/a', ignore_case: true }, 'spiffe://TD/NS/A', true],
  ['prefix', { prefix: 'spiffe://td/' }, 'spiffe://td/ns/a', true],
  ['prefix miss', { prefix: 'spiffe://td/' }, 'spiffe://other/ns/a', false],
  ['prefix + ignore_case', { prefix: 'SPIFFE://TD/', ignore_case: true }, 'spiffe://td/ns/a', true],
  ['suffix', { suffix: '/sa/web' }, 'spiffe://td/ns/a/sa/web', true],
  ['suffix + ignore_case', { suffix: '/SA/WEB', ignore_case: true }, 'spiffe://td/ns/a/sa/web', true],
  ['contains', { contains: '/ns/a/' }, 'spiffe://td/ns/a/sa/web', true],
  ['contains miss', { contains: '/ns/b/' }, 'spiffe://td/ns/a/sa/web', false],
  ['contains + ignore_case', { contains: '/NS/A/', ignore_case: true }, 'spiffe://td/ns/a/sa/web', true],
  ['safe_regex is a full match', { safe_regex: { regex: 'spiffe://td/ns/[a-z]+/sa/web' } }, 'spiffe://td/ns/abc/sa/web', true],
  ['safe_regex is anchored', { safe_regex: { regex: 'ns/[a-z]+' } }, 'spiffe://td/ns/abc', false],
  ['safe_regex ignores ignore_case', { safe_regex: { regex: 'spiffe://td/ns/a' }, ignore_case: true }, 'spiffe://TD/ns/a', false],
  ['safe_regex alternation is grouped before anchoring', { safe_regex: { regex: 'x|spiffe://td/ns/a' } }, 'spiffe://td/ns/a', true],
];

describe('routes, RBAC and TLS SAN validation agree', () => {
  for (const [name, matcher, value, want] of CASES) {
    test(name, () => {
      assert.deepEqual({ route: viaRoute(matcher, value), rbac: viaRbac(matcher, value), san: viaSan(matcher, value) },
        { route: want, rbac: want, san: want });
    });
  }

  test('RE2-refused patterns are refused by each, naming the field', () => {
    for (const regex of ['(a)\\1', 'a(?=b)', '[[:alpha:]]+', '\\Qa.b\\E', 'a)|(b']) {
      const m = { safe_regex: { regex } };
      for (const [who, fn, path] of [
        ['route', () => viaRoute(m, 'x'), 'route_config.virtual_hosts[0].routes[0].match.query_parameters[0].string_match.safe_regex.regex'],
        ['rbac', () => viaRbac(m, 'x'), 'rbac.policies.p.permissions[0].requested_server_name.safe_regex.regex'],
        ['san', () => viaSan(m, 'x'), 'validation_context.match_typed_subject_alt_names[0].matcher.safe_regex.regex'],
      ] as const) {
        assert.throws(fn, (e: unknown) => e instanceof ConfigError && e.path === path, `${who} refuses ${regex}`);
      }
    }
  });

  test('a pattern that backtracks exponentially still answers at once (linear engine)', () => {
    const m = { safe_regex: { regex: '(a+)+b' } };
    const evil = 'a'.repeat(40);
    assert.deepEqual([viaRoute(m, evil), viaRbac(m, evil), viaSan(m, evil)], [false, false, false]);
  });

  test('route path safe_regex and regex_rewrite are RE2-checked too', () => {
    const route = (match: Json, extra: Json = {}): RouteTable => new RouteTable(new Msg({ name: 'rc', virtual_hosts: [{ name: 'vh', domains: ['*'],
      routes: [{ name: 'r', match, route: { cluster: 'c', ...extra } }] }] }, 'route_config'));
    assert.throws(() => route({ safe_regex: { regex: '/(a)\\1' } }), (e: unknown) => e instanceof ConfigError && /safe_regex\.regex$/.test(e.path));
    assert.throws(() => route({ prefix: '/' }, { regex_rewrite: { pattern: { regex: '(?<=a)b' }, substitution: 'x' } }),
      (e: unknown) => e instanceof ConfigError && /regex_rewrite\.pattern\.regex$/.test(e.path));
  });
});

describe('the plain-value form agrees with the JSON form', () => {
  const specs: Array<[StringMatchSpec, Json]> = [
    [{ exact: 'a/B' }, { exact: 'a/B' }], [{ exact: 'a/B', ignoreCase: true }, { exact: 'a/B', ignore_case: true }],
    [{ prefix: 'a/' }, { prefix: 'a/' }], [{ suffix: '/b', ignoreCase: true }, { suffix: '/b', ignore_case: true }],
    [{ contains: '/' }, { contains: '/' }], [{ regex: 'a/[bB]' }, { safe_regex: { regex: 'a/[bB]' } }],
    [{ regex: 'a/b', ignoreCase: true }, { safe_regex: { regex: 'a/b' }, ignore_case: true }],
  ];
  for (const [spec, json] of specs) {
    test(JSON.stringify(spec), () => {
      const p = stringMatcher(spec);
      for (const v of ['a/B', 'a/b', 'A/B', 'x', '']) assert.equal(p(v), viaRbac(json, v), `${JSON.stringify(spec)} on ${JSON.stringify(v)}`);
    });
  }
  test("Istio's presence is any non-empty value; a refused regex names the path", () => {
    const p = stringMatcher({ presence: true });
    assert.deepEqual([p(''), p('x')], [false, true]);
    assert.throws(() => stringMatcher({ regex: '(a)\\1' }, 'rules[0].principals[1]'),
      (e: unknown) => e instanceof ConfigError && e.path === 'rules[0].principals[1].regex');
  });
});

describe('SAN matching', () => {
  test("DNS SANs follow Envoy's dnsNameMatch for exact matchers", () => {
    assert.ok(dnsNameMatch('api.example.com', '*.example.com'));
    assert.ok(dnsNameMatch('API.Example.com', 'api.EXAMPLE.com'));
    assert.ok(dnsNameMatch('api.example.com', 'a*.example.com'));
    assert.ok(!dnsNameMatch('example.com', '*.example.com'), 'the wildcard needs one label');
    assert.ok(!dnsNameMatch('a.b.example.com', '*.example.com'), 'and covers only one');
    assert.ok(!dnsNameMatch('xn--a.example.com', 'xn--*.example.com'), 'never in an A-label');
    assert.ok(!dnsNameMatch('a.b.example.com', 'a.*.example.com'), 'only in the leftmost label');
  });

  test('URI SANs never get DNS rules; spiffeSanMatches wants one exact id', () => {
    const cert = { subjectaltname: 'DNS:*.example.com, URI:spiffe://td/ns/a/sa/web' } as PeerCertificate;
    const v = (matchers: Json[]): boolean => sansMatch(compileValidation(new Msg({ match_typed_subject_alt_names: matchers }, 'v')).sanMatchers, cert);
    assert.ok(v([{ san_type: 'DNS', matcher: { exact: 'api.example.com' } }]));
    assert.ok(!v([{ san_type: 'URI', matcher: { exact: 'spiffe://td/ns/*/sa/web' } }]));
    assert.ok(!v([{ san_type: 'DNS', matcher: { prefix: 'api.' } }]), 'DNS rules only for exact');
    assert.ok(spiffeSanMatches(cert, ['spiffe://td/ns/b/sa/x', 'spiffe://td/ns/a/sa/web']));
    assert.ok(!spiffeSanMatches(cert, ['spiffe://td/ns/a/sa/we']));
  });

  describe('over a real TLS handshake', () => {
    let server: Server, port = 0, ca: CertificateAuthority;
    before(async () => {
      ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
      const serving = await ca.servingCert(['*.svc.example.com'], [], 3600);
      server = createServer({ cert: serving.chain, key: serving.key }, (s) => s.end('hi'));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    after(() => new Promise<void>((r) => server.close(() => r())));

    const handshake = (exact: string): Promise<string> => {
      const tls = compileUpstreamTls(new Msg({ common_tls_context: { validation_context: {
        trusted_ca: { inline_string: ca.rootCertPem }, match_typed_subject_alt_names: [{ san_type: 'DNS', matcher: { exact } }],
      } } }, 'transport_socket.typed_config'));
      return new Promise((resolve) => {
        const s = connectUpstreamTls(tls, '127.0.0.1', port, []) as TLSSocket;
        s.once('secureConnect', () => { s.destroy(); resolve('accepted'); });
        s.once('error', (e) => resolve(`refused: ${e.message}`));
      });
    };

    test("a wildcard server certificate passes an exact DNS matcher for one label below it, as in Envoy", async () => {
      assert.equal(await handshake('api.svc.example.com'), 'accepted');
      assert.match(await handshake('a.b.svc.example.com'), /^refused/);
      assert.match(await handshake('svc.example.com'), /^refused/);
    });
  });
});
