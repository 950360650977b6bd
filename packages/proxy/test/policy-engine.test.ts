// The policy engine's building blocks: RE2 handling, header/metadata semantics, the matcher tree,
// and every RBAC filter of a real sidecar config dump.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { normalizeKeys } from '../src/config/normalize.ts';
import { compileRe2 } from '../src/matchers/regex.ts';
import { compileRbac } from '../src/policy/engine.ts';
import { compilePrincipal, compilePermission } from '../src/policy/rules.ts';
import { compileHttpRbac } from '../src/filters/http/rbac/config.ts';
import { compileNetworkRbac } from '../src/filters/network/rbac/config.ts';
import type { AuthzFacts, RequestFacts } from '../src/policy/facts.ts';

type Json = Record<string, unknown>;
const FIX = '../../../../shared/fixtures/';

function req(over: Partial<RequestFacts> = {}): RequestFacts {
  return { method: 'GET', path: '/', authority: 'example.com', scheme: 'http', headers: {}, ...over };
}
function facts(over: Partial<AuthzFacts> = {}): AuthzFacts {
  return {
    directRemoteIp: '10.0.0.1', remoteIp: '10.0.0.1', destinationIp: '10.0.0.2', destinationPort: 80, requestedServerName: '',
    tls: false, peerUriSans: [], peerDnsSans: [], peerSubject: '', filterState: undefined, metadata: undefined, request: req(), ...over,
  };
}
const re = (regex: string): RegExp => compileRe2(new Msg({ regex }, 'safe_regex'));

describe('RE2 patterns', () => {
  test('full match, as RE2::FullMatch', () => {
    assert.ok(re('.*/ns/foo/.*').test('spiffe://td/ns/foo/sa/a'));
    assert.ok(!re('foo').test('xfoox'));
    assert.ok(re('a|b').test('b'), 'alternation is grouped before anchoring');
  });
  test('RE2 spellings translated: (?P<n>), \\A, \\z, leading ] in a class', () => {
    assert.ok(re('(?P<x>ab)+').test('abab'));
    assert.ok(re('\\Aab\\z').test('ab'));
    assert.ok(re('[]a]+').test(']a]'));
  });
  test('exponential patterns run in linear time', () => {
    const r = re('(a+)+');
    const t = performance.now();
    assert.equal(r.test('a'.repeat(30_000) + 'b'), false);
    // Backtracking would take longer than the age of the universe; linear takes milliseconds.
    assert.ok(performance.now() - t < 2_000);
  });
  for (const [src, why] of [['(a)\\1', 'backreference'], ['a(?=b)', 'lookaround'], ['[[:alpha:]]+', 'POSIX'], ['\\Qa.b\\E', '\\Q'],
    ['(?i)abc', 'inline flags'], ['\\pL', '\\p'], ['a{1,100}', 'linear'], ['(', 'invalid']] as const) {
    test(`refused: ${src}`, () => {
      assert.throws(() => re(src), (e: unknown) => e instanceof ConfigError && e.path === 'safe_regex.regex' && e.message.includes(why));
    });
  }
});

describe('principal and permission semantics', () => {
  const p = (j: Json) => compilePrincipal(new Msg(j, 'p'));
  test('header: present_match false matches only a missing header; invert of a value match never matches a missing header', () => {
    const absent = p({ header: { name: 'x-a', present_match: false } });
    assert.ok(absent(facts()));
    assert.ok(!absent(facts({ request: req({ headers: { 'x-a': '1' } }) })));
    const inv = p({ header: { name: 'x-a', exact_match: 'v', invert_match: true } });
    assert.ok(!inv(facts()), 'missing header fails even inverted');
    assert.ok(inv(facts({ request: req({ headers: { 'x-a': 'w' } }) })));
    const multi = p({ header: { name: 'x-a', string_match: { exact: '1,2' } } });
    assert.ok(multi(facts({ request: req({ headers: { 'x-a': ['1', '2'] } }) })), 'values joined with ","');
    const host = p({ header: { name: ':authority', string_match: { suffix: '.COM', ignore_case: true } } });
    assert.ok(host(facts()));
  });
  test('authenticated: any TLS peer without principal_name; SANs, then the subject', () => {
    assert.ok(!p({ authenticated: {} })(facts()));
    assert.ok(p({ authenticated: {} })(facts({ tls: true })));
    const byName = p({ authenticated: { principal_name: { exact: 'spiffe://td/ns/a/sa/b' } } });
    assert.ok(byName(facts({ tls: true, peerUriSans: ['spiffe://x', 'spiffe://td/ns/a/sa/b'] })));
    assert.ok(!byName(facts({ tls: false, peerUriSans: ['spiffe://td/ns/a/sa/b'] })));
    assert.ok(p({ authenticated: { principal_name: { exact: 'CN=a' } } })(facts({ tls: true, peerSubject: 'CN=a' })));
  });
  test('metadata: list_match, present, invert; filter_state as Istio\'s io.istio.peer_principal', () => {
    const md = new Map([['istio_authn', { 'request.auth.claims': { groups: ['a', 'b'], iss: ['https://accounts.google.com'] } }]]);
    const groups = p({ metadata: { filter: 'istio_authn', path: [{ key: 'request.auth.claims' }, { key: 'groups' }], value: { list_match: { one_of: { string_match: { exact: 'b' } } } } } });
    assert.ok(groups(facts({ metadata: md })));
    assert.ok(!groups(facts()));
    const notPresent = p({ metadata: { filter: 'istio_authn', path: [{ key: 'x' }], value: { present_match: true }, invert: true } });
    assert.ok(notPresent(facts({ metadata: md })));
    const fs = p({ filter_state: { key: 'io.istio.peer_principal', string_match: { exact: 'spiffe://a' } } });
    assert.ok(fs(facts({ filterState: new Map([['io.istio.peer_principal', 'spiffe://a']]) })));
    assert.ok(!fs(facts()));
  });
  test('permissions: port range is half-open, url_path drops the query, SNI', () => {
    const perm = (j: Json) => compilePermission(new Msg(j, 'perm'));
    const range = perm({ destination_port_range: { start: 8000, end: 8080 } });
    assert.ok(range(facts({ destinationPort: 8000 })));
    assert.ok(!range(facts({ destinationPort: 8080 })));
    assert.ok(perm({ url_path: { path: { prefix: '/api/' } } })(facts({ request: req({ path: '/api/x?y=1' }) })));
    assert.ok(!perm({ url_path: { path: { exact: '/a' } } })(facts({ request: undefined })), 'no path on L4');
    assert.ok(perm({ requested_server_name: { exact: 'a.b' } })(facts({ requestedServerName: 'a.b' })));
  });
  test('config errors name the field', () => {
    assert.throws(() => compileRbac(new Msg({ policies: { x: { permissions: [{ any: true }], principals: [{ sourced_metadata: {} }] } } }, 'rules')),
      (e: unknown) => e instanceof ConfigError && e.path === 'rules.policies.x.principals[0].sourced_metadata');
    assert.throws(() => compileRbac(new Msg({ policies: { x: { permissions: [{ destination_ip: { address_prefix: 'nope' } }], principals: [{ any: true }] } } }, 'rules')),
      (e: unknown) => e instanceof ConfigError && e.path === 'rules.policies.x.permissions[0].destination_ip.address_prefix');
    assert.throws(() => compileRbac(new Msg({ action: 'MAYBE' }, 'rules')), /action/);
  });
  test('ALLOW with an empty policy map denies everything; DENY with none allows', () => {
    assert.equal(compileRbac(new Msg({}, 'r')).decide(facts()).allowed, false);
    assert.equal(compileRbac(new Msg({ action: 'DENY' }, 'r')).decide(facts()).allowed, true);
    assert.equal(compileRbac(new Msg({ action: 'LOG', policies: { l: { permissions: [{ any: true }], principals: [{ any: true }] } } }, 'r')).decide(facts()).log, true);
  });
});

describe('the RBAC matcher tree (envoyproxy/examples rbac/envoy.yaml)', () => {
  const doc = normalizeKeys(parseYaml(readFileSync(new URL(FIX + 'envoyproxy-examples/rbac/envoy.yaml', import.meta.url), 'utf8'))) as Json;
  const hcm = ((((doc.static_resources as Json).listeners as Json[])[0].filter_chains as Json[])[0].filters as Json[])[0].typed_config as Json;
  const rbac = ((hcm.http_filters as Json[])[0].typed_config) as Json;
  const s = compileHttpRbac(new Msg(rbac, 'rbac'));
  const withReferer = (v?: string): AuthzFacts => facts({ request: req({ headers: v === undefined ? {} : { referer: v } }) });
  test('a docs referer passes as all-pass; any other (or none) is illegal-referer', () => {
    assert.deepEqual(s.engine!.decide(withReferer('https://www.envoyproxy.io/docs/envoy/latest/')), { allowed: true, policy: 'all-pass', log: false });
    assert.deepEqual(s.engine!.decide(withReferer('https://evil.example/')), { allowed: false, policy: 'illegal-referer', log: false });
    assert.equal(s.engine!.decide(withReferer()).policy, 'illegal-referer');
  });
  test('header inputs are refused in the network filter', () => {
    assert.throws(() => compileNetworkRbac('n', new Msg({ stat_prefix: 'x', matcher: rbac.matcher }, 'n')), /request headers/);
  });
});

describe('every RBAC filter in the sidecar config dump (istioctl authz testdata)', () => {
  const dump = JSON.parse(readFileSync(new URL(FIX + 'istio-istio/istioctl/pkg/authz/testdata/configdump.yaml', import.meta.url), 'utf8')) as Json;
  const found: Array<{ path: string; config: Json }> = [];
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v)) { v.forEach((x, i) => walk(x, `${path}[${i}]`)); return; }
    if (v === null || typeof v !== 'object') return;
    const o = v as Json;
    if (typeof o['@type'] === 'string' && (o['@type'] as string).endsWith('.rbac.v3.RBAC')) { found.push({ path, config: o }); return; }
    for (const [k, x] of Object.entries(o)) walk(x, `${path}.${k}`);
  };
  walk(dump, 'dump');
  test('13 RBAC filters compile (10 HTTP, 3 network)', () => {
    assert.equal(found.length, 13);
    let http = 0, net = 0;
    for (const f of found) {
      if ((f.config['@type'] as string).includes('.http.')) { compileHttpRbac(new Msg(f.config, f.path)); http++; }
      else { compileNetworkRbac('envoy.filters.network.rbac', new Msg(f.config, f.path)); net++; }
    }
    assert.deepEqual([http, net], [10, 3]);
  });
  test('the httpbin ALLOW policy decides by peer principal (filter state), JWT issuer (istio_authn metadata), method and path', () => {
    const f = found.find((x) => (x.config.rules as Json | undefined)?.policies !== undefined)!;
    const s = compileHttpRbac(new Msg(f.config, f.path));
    const sleep = new Map([['io.istio.peer_principal', 'spiffe://cluster.local/ns/default/sa/sleep']]);
    const google = new Map([['istio_authn', { 'request.auth.claims': { iss: ['https://accounts.google.com'] } }]]);
    const ok = facts({ filterState: sleep, metadata: google, request: req({ path: '/info/x' }) });
    assert.equal(s.engine!.decide(ok).allowed, true);
    assert.equal(s.engine!.decide({ ...ok, request: req({ method: 'POST', path: '/data' }) }).allowed, true);
    assert.equal(s.engine!.decide({ ...ok, request: req({ method: 'POST', path: '/info' }) }).allowed, false);
    assert.equal(s.engine!.decide({ ...ok, metadata: undefined }).allowed, false);
    assert.equal(s.engine!.decide({ ...ok, filterState: new Map([['io.istio.peer_principal', 'spiffe://cluster.local/ns/test/sa/x']]) }).allowed, true);
    assert.equal(s.engine!.decide({ ...ok, filterState: undefined }).allowed, false);
    assert.equal(s.shadowPrefix, 'istio_dry_run_allow_');
  });
  test('network filters with `rules: {}` deny every connection (ALLOW with no policies)', () => {
    const f = found.find((x) => (x.config['@type'] as string).includes('.network.'))!;
    const c = compileNetworkRbac('n', new Msg(f.config, f.path));
    assert.equal(c.statPrefix, 'tcp.rbac.');
    assert.equal(c.engine!.decide(facts({ request: undefined })).allowed, false);
  });
});
