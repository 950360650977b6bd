// istiod's AuthorizationPolicy → RBAC goldens (pilot/pkg/security/authz/builder/testdata), compiled
// by the policy engine and decided for requests written from the -in.yaml policies.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { Msg } from '../src/config/fields.ts';
import { normalizeKeys } from '../src/config/normalize.ts';
import { compileRbac, type RbacEngine } from '../src/policy/engine.ts';
import { compilePrincipal } from '../src/policy/rules.ts';
import type { AuthzFacts, RequestFacts } from '../src/policy/facts.ts';

const TESTDATA = '../../../../shared/fixtures/istio-istio/pilot/pkg/security/authz/builder/testdata/';
type Json = Record<string, unknown>;

function loadFilter(file: string): Json {
  const raw = parseYaml(readFileSync(new URL(TESTDATA + file, import.meta.url), 'utf8')) as Json;
  return normalizeKeys(raw) as Json;
}

function req(over: Partial<RequestFacts> = {}): RequestFacts {
  return { method: 'GET', path: '/', authority: 'example.com', scheme: 'http', headers: {}, ...over };
}

function facts(over: Partial<AuthzFacts> = {}): AuthzFacts {
  return {
    directRemoteIp: '10.9.9.9', remoteIp: '10.9.9.9', destinationIp: '10.8.8.8', destinationPort: 8080,
    requestedServerName: '', tls: false, peerUriSans: [], peerDnsSans: [], peerSubject: '',
    filterState: undefined, metadata: undefined, request: req(), ...over,
  };
}

function jwt(iss: string, sub = ''): AuthzFacts['metadata'] {
  return new Map([['envoy.filters.http.jwt_authn', { payload: { iss, sub } }]]);
}

describe('http/single-policy-out.yaml (ALLOW, every source/operation/condition field)', () => {
  const filter = loadFilter('http/single-policy-out.yaml');
  const tc = filter.typed_config as Json;
  const engine: RbacEngine = compileRbac(new Msg(tc.rules, 'typed_config.rules'));
  const R1 = 'ns[foo]-policy[httpbin]-rule[1]';

  test('the filter is the HTTP RBAC type with Istio\'s dry-run prefix', () => {
    assert.equal(tc['@type'], 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC');
    assert.equal(tc.shadow_rules_stat_prefix, 'istio_dry_run_allow_');
  });

  // rule[1] from[0] + to[0]: every field satisfied.
  const r1: AuthzFacts = facts({
    tls: true,
    peerUriSans: ['spiffe://rule[1]-from[0]-principal[1]', 'spiffe://cluster.local/ns/rule[1]-from[0]-ns[2]/sa/default'],
    metadata: jwt('rule[1]-from[0]-requestPrincipal[2]'),
    remoteIp: '172.22.3.7', directRemoteIp: '10.1.0.2', destinationPort: 9102,
    request: req({ method: 'rule[1]-to[0]-method[1]', authority: 'RULE[1]-TO[0]-HOST[2]', path: 'rule[1]-to[0]-path[2]?x=1' }),
  });

  const cases: Array<[string, AuthzFacts, boolean]> = [
    ['rule[1] from[0]/to[0] all satisfied', r1, true],
    ['hosts: another host', { ...r1, request: { ...r1.request!, authority: 'rule[1]-to[0]-host[3]' } }, false],
    ['methods: a method of to[1] with the host of to[0]', { ...r1, request: { ...r1.request!, method: 'rule[1]-to[1]-method[1]' } }, false],
    ['methods: case matters', { ...r1, request: { ...r1.request!, method: 'RULE[1]-TO[0]-METHOD[1]' } }, false],
    ['paths: exact, query ignored; a longer path fails', { ...r1, request: { ...r1.request!, path: 'rule[1]-to[0]-path[2]/x' } }, false],
    ['ports: 9111 belongs to to[1]', { ...r1, destinationPort: 9111 }, false],
    ['to[1] as a whole', { ...r1, destinationPort: 9111, request: req({ method: 'rule[1]-to[1]-method[2]', authority: 'rule[1]-to[1]-host[1]', path: 'rule[1]-to[1]-path[1]' }) }, true],
    ['principals: unknown SAN', { ...r1, peerUriSans: ['spiffe://rule[1]-from[0]-principal[3]', r1.peerUriSans[1]] }, false],
    ['principals: plaintext connection', { ...r1, tls: false }, false],
    ['namespaces: SAN outside the namespaces', { ...r1, peerUriSans: [r1.peerUriSans[0], 'spiffe://cluster.local/ns/other/sa/default'] }, false],
    ['requestPrincipals: no JWT metadata', { ...r1, metadata: undefined }, false],
    ['requestPrincipals: another issuer', { ...r1, metadata: jwt('rule[1]-from[0]-requestPrincipal[3]') }, false],
    ['requestPrincipals: sub must be empty for a principal without "/"', { ...r1, metadata: jwt('rule[1]-from[0]-requestPrincipal[2]', 'alice') }, false],
    ['ipBlocks: direct remote 10.1.0.3', { ...r1, directRemoteIp: '10.1.0.3' }, false],
    ['remoteIpBlocks: outside 172.22.2.0/23', { ...r1, remoteIp: '172.22.4.1' }, false],
    ['remoteIpBlocks: the single address 172.21.234.254', { ...r1, remoteIp: '172.21.234.254' }, true],
    ['from[1] as a whole', {
      ...r1, peerUriSans: ['spiffe://rule[1]-from[1]-principal[2]', 'spiffe://td/ns/rule[1]-from[1]-ns[1]/sa/x'],
      metadata: jwt('rule[1]-from[1]-requestPrincipal[1]'), remoteIp: '192.168.4.200', directRemoteIp: '192.1.1.2',
    }, true],
    ['from[0] SANs with from[1] addresses', { ...r1, remoteIp: '192.168.4.200', directRemoteIp: '192.1.1.2' }, false],
    // rule[0] asks remote.ip to be 172.16.10.10 (from) and in 10.99.10.8/32 | 10.80.64.0/18 (when): never both.
    ['rule[0]: every field but the contradictory remote ip', facts({
      tls: true, peerUriSans: ['spiffe://rule[0]-from[0]-principal[2]', 'spiffe://td/ns/rule[0]-from[0]-ns[1]/sa/x'],
      metadata: jwt('rule[0]-from[0]-requestPrincipal[1]'), remoteIp: '172.16.10.10', directRemoteIp: '10.0.0.1',
      destinationIp: '192.168.10.77', destinationPort: 9001,
      request: req({ method: 'rule[0]-to[0]-method[2]', authority: 'rule[0]-to[0]-host[1]', path: 'rule[0]-to[0]-path[1]', headers: { 'x-header': 'header' } }),
    }), false],
    ['nothing in common with any rule', facts(), false],
  ];
  for (const [name, f, allowed] of cases) {
    test(`${allowed ? 'allows' : 'denies'}: ${name}`, () => {
      const d = engine.decide(f);
      assert.equal(d.allowed, allowed);
      assert.equal(d.policy, allowed ? R1 : '');
    });
  }

  // The `when` conditions of rule[0], checked on their own compiled sub-trees (the whole rule cannot match).
  const rule0 = ((tc.rules as Json).policies as Json)['ns[foo]-policy[httpbin]-rule[0]'] as Json;
  const ids = (((rule0.principals as Json[])[0].and_ids as Json).ids as Json[]);
  test('request.headers[X-header]: exact, prefix, suffix, "*" = present', () => {
    const header = compilePrincipal(new Msg(ids[5], 'ids[5]'));
    const h = (v: string | undefined): AuthzFacts => facts({ request: req({ headers: v === undefined ? {} : { 'x-header': v } }) });
    assert.ok(header(h('header')));
    assert.ok(header(h('header-prefix-abc')));
    assert.ok(header(h('abc-suffix-header')));
    assert.ok(header(h('anything')), '"*" is presentMatch');
    assert.ok(!header(h(undefined)), 'absent header');
    assert.ok(!header(facts({ request: undefined })), 'no request at all (L4)');
  });
  test('remote.ip: 10.99.10.8/32 and 10.80.64.0/18', () => {
    const remote = compilePrincipal(new Msg(ids[6], 'ids[6]'));
    assert.ok(remote(facts({ remoteIp: '10.99.10.8' })));
    assert.ok(remote(facts({ remoteIp: '10.80.127.255' })));
    assert.ok(!remote(facts({ remoteIp: '10.80.128.0' })));
    assert.ok(!remote(facts({ remoteIp: '10.99.10.9', directRemoteIp: '10.99.10.8' })), 'remote, not direct remote');
  });
  test('destination.ip (permission): 10.10.10.10 and 192.168.10.0/24', () => {
    const perm = ((rule0.permissions as Json[])[0].and_rules as Json).rules as Json[];
    const dst = compileRbac(new Msg({ policies: { p: { permissions: [perm[4]], principals: [{ any: true }] } } }, 'p'));
    assert.ok(dst.decide(facts({ destinationIp: '10.10.10.10' })).allowed);
    assert.ok(dst.decide(facts({ destinationIp: '192.168.10.255' })).allowed);
    assert.ok(!dst.decide(facts({ destinationIp: '192.168.11.1' })).allowed);
  });
});

describe('tcp/deny-both-http-tcp-out.yaml (DENY; HTTP-only fields became `any`)', () => {
  const filter = loadFilter('tcp/deny-both-http-tcp-out.yaml');
  const tc = filter.typed_config as Json;
  const rules = tc.rules as Json;
  const engine = compileRbac(new Msg(rules, 'typed_config.rules'));

  test('the filter is network RBAC with stat_prefix tcp.', () => {
    assert.equal(tc['@type'], 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC');
    assert.equal(tc.stat_prefix, 'tcp.');
  });

  test('rules 0, 1, 2 and 8 match everything: every connection is denied, by rule[0] (first in name order)', () => {
    for (const f of [facts({ request: undefined }), facts({ request: undefined, destinationPort: 9999, tls: true, peerUriSans: ['spiffe://x'] })]) {
      const d = engine.decide(f);
      assert.equal(d.allowed, false);
      assert.equal(d.policy, 'ns[foo]-policy[httpbin-deny]-rule[0]');
    }
  });

  // Without the match-all rules, the TCP parts decide.
  const policies = { ...(rules.policies as Json) };
  for (const i of [0, 1, 2, 8]) delete policies[`ns[foo]-policy[httpbin-deny]-rule[${i}]`];
  const tcpOnly = compileRbac(new Msg({ ...rules, policies }, 'tcpOnly'));
  const name = (i: number): string => `ns[foo]-policy[httpbin-deny]-rule[${i}]`;
  const l4 = (over: Partial<AuthzFacts>): AuthzFacts => facts({ request: undefined, ...over });
  const cases: Array<[string, AuthzFacts, boolean, string]> = [
    ['ports: 80 (rule[4], the first of 4/7/9 by name)', l4({ destinationPort: 80 }), false, name(4)],
    ['ports + methods: 8080 (rule[5])', l4({ destinationPort: 8080 }), false, name(5)],
    ['namespaces: ns-1 on any port (rule[3])', l4({ destinationPort: 9000, tls: true, peerUriSans: ['spiffe://cluster.local/ns/ns-1/sa/a'] }), false, name(3)],
    ['namespaces: ns-2 alone is not enough for rule[6] off port 8080', l4({ destinationPort: 9000, tls: true, peerUriSans: ['spiffe://cluster.local/ns/ns-2/sa/a'] }), true, ''],
    ['nothing matches on port 9000 in plaintext', l4({ destinationPort: 9000 }), true, ''],
    ['rule[10] needs port 80 and 91 at once: never', l4({ destinationPort: 91, destinationIp: '10.10.10.10', requestedServerName: 'exact.com' }), true, ''],
  ];
  for (const [label, f, allowed, policy] of cases) {
    test(`${allowed ? 'allows' : 'denies'}: ${label}`, () => {
      const d = tcpOnly.decide(f);
      assert.equal(d.allowed, allowed);
      assert.equal(d.policy, policy);
    });
  }

  test('rule[10] principals: notPrincipals "*" = not_id of .+ denies every authenticated peer', () => {
    const r10 = (rules.policies as Json)[name(10)] as Json;
    const ids = (((r10.principals as Json[])[0].and_ids as Json).ids as Json[]);
    const notAny = compilePrincipal(new Msg(ids[1], 'ids[1]'));
    assert.equal(notAny(l4({ tls: true, peerUriSans: ['spiffe://a'] })), false);
    // Envoy's AuthenticatedMatcher on a plaintext connection fails, so the not_id passes.
    assert.equal(notAny(l4({ tls: false })), true);
  });
});
