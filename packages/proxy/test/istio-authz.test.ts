// istio.security.Authorization with ztunnel's semantics, as a table: rules OR, clauses AND,
// matches OR, fields AND, not_* values exclude; empty matches match nothing, empty clause lists
// match everything, a policy with no rules never matches; principals without spiffe://, no
// identity matches no principal (STRICT's not_principals: presence); DENY before ALLOW; no ALLOW
// policy means allow; dry-run policies never decide.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { compileIstioAuthorization, decideIstio, peerIdentity, type IstioAuthorization, type IstioMatch } from '../src/policy/istio-authz.ts';
import type { AuthzFacts } from '../src/policy/facts.ts';

const EMPTY: IstioMatch = {
  namespaces: [], notNamespaces: [], principals: [], notPrincipals: [], serviceAccounts: [], notServiceAccounts: [],
  sourceIps: [], notSourceIps: [], destinationIps: [], notDestinationIps: [], destinationPorts: [], notDestinationPorts: [],
};
const m = (x: Partial<IstioMatch>): IstioMatch => ({ ...EMPTY, ...x });

function policy(name: string, action: 'Allow' | 'Deny', rules: IstioMatch[][][], dryRun = false): IstioAuthorization {
  return { name, namespace: 'ns1', scope: 'Namespace', action, rules, dryRun };
}

function facts(peer: string | undefined, src = '10.0.0.5', dst = '10.0.1.7', port = 8080): AuthzFacts {
  return {
    directRemoteIp: src, remoteIp: src, destinationIp: dst, destinationPort: port, requestedServerName: '', tls: peer !== undefined,
    peerUriSans: peer ? [peer] : [], peerDnsSans: [], peerSubject: '', filterState: undefined, metadata: undefined, request: undefined,
  };
}

const SLEEP = 'spiffe://cluster.local/ns/foo/sa/sleep';
const ADMIN = 'spiffe://cluster.local/ns/bar/sa/admin';

describe('istio.security.Authorization: matching', () => {
  const cases: Array<[string, IstioMatch[][][], AuthzFacts, boolean]> = [
    ['no rules never match', [], facts(SLEEP), false],
    ['a rule without clauses matches everything', [[]], facts(undefined), true],
    ['a clause whose only match is empty matches nothing', [[[EMPTY]]], facts(SLEEP), false],
    ['an empty match is skipped, a sibling match decides', [[[EMPTY, m({ destinationPorts: [8080] })]]], facts(SLEEP), true],
    ['exact principal without spiffe://', [[[m({ principals: [{ exact: 'cluster.local/ns/foo/sa/sleep' }] })]]], facts(SLEEP), true],
    ['a principal written with spiffe:// does not match', [[[m({ principals: [{ exact: SLEEP }] })]]], facts(SLEEP), false],
    ['prefix principal', [[[m({ principals: [{ prefix: 'cluster.local/ns/foo/' }] })]]], facts(SLEEP), true],
    ['suffix principal', [[[m({ principals: [{ suffix: '/sa/admin' }] })]]], facts(SLEEP), false],
    ['presence principal needs an identity', [[[m({ principals: [{ presence: true }] })]]], facts(undefined), false],
    ['not_principals presence catches plaintext', [[[m({ notPrincipals: [{ presence: true }] })]]], facts(undefined), true],
    ['not_principals presence lets mTLS through', [[[m({ notPrincipals: [{ presence: true }] })]]], facts(SLEEP), false],
    ['namespaces from the identity', [[[m({ namespaces: [{ exact: 'foo' }] })]]], facts(SLEEP), true],
    ['namespaces: plaintext has none', [[[m({ namespaces: [{ prefix: '' }] })]]], facts(undefined), true],
    ['not_namespaces excludes', [[[m({ notNamespaces: [{ exact: 'foo' }, { exact: 'baz' }] })]]], facts(SLEEP), false],
    ['service accounts', [[[m({ serviceAccounts: [{ namespace: 'foo', serviceAccount: 'sleep' }] })]]], facts(SLEEP), true],
    ['service accounts: another namespace', [[[m({ serviceAccounts: [{ namespace: 'bar', serviceAccount: 'sleep' }] })]]], facts(SLEEP), false],
    ['not service accounts without identity', [[[m({ notServiceAccounts: [{ namespace: 'foo', serviceAccount: 'sleep' }] })]]], facts(undefined), true],
    ['source ip in CIDR', [[[m({ sourceIps: ['10.0.0.0/24'] })]]], facts(SLEEP, '10.0.0.9'), true],
    ['source ip outside', [[[m({ sourceIps: ['10.0.0.0/24', '192.168.0.1'] })]]], facts(SLEEP, '10.0.9.9'), false],
    ['not source ip', [[[m({ notSourceIps: ['10.0.0.0/8'] })]]], facts(SLEEP, '10.9.9.9'), false],
    ['IPv4-mapped peer matches an IPv4 range', [[[m({ sourceIps: ['10.0.0.0/8'] })]]], facts(SLEEP, '::ffff:10.1.2.3'), true],
    ['destination ip and port AND-ed', [[[m({ destinationIps: ['10.0.1.7'], destinationPorts: [9090] })]]], facts(SLEEP), false],
    ['ports OR-ed within the field', [[[m({ destinationPorts: [9090, 8080] })]]], facts(SLEEP), true],
    ['not ports', [[[m({ notDestinationPorts: [9999] })]]], facts(SLEEP, undefined, undefined, 9999), false],
    ['positive and negative on one field', [[[m({ sourceIps: ['10.0.0.0/8'], notSourceIps: ['10.0.0.5'] })]]], facts(SLEEP), false],
    ['matches OR-ed in a clause', [[[m({ destinationPorts: [1] }), m({ namespaces: [{ exact: 'foo' }] })]]], facts(SLEEP), true],
    ['clauses AND-ed in a rule', [[[m({ destinationPorts: [8080] })], [m({ namespaces: [{ exact: 'bar' }] })]]], facts(SLEEP), false],
    ['rules OR-ed', [[[m({ destinationPorts: [1] })]], [[m({ namespaces: [{ exact: 'foo' }] })]]], facts(SLEEP), true],
  ];
  for (const [name, rules, f, expected] of cases) {
    test(name, () => {
      assert.equal(compileIstioAuthorization(policy('p', 'Allow', rules)).matches(f, peerOf(f)), expected);
    });
  }
});

function peerOf(f: AuthzFacts): ReturnType<typeof peerIdentity> {
  return peerIdentity(f);
}

describe('istio.security.Authorization: deciding', () => {
  const allowSleep = compileIstioAuthorization(policy('allow-sleep', 'Allow', [[[m({ principals: [{ exact: 'cluster.local/ns/foo/sa/sleep' }] })]]]));
  const denyBar = compileIstioAuthorization(policy('deny-bar', 'Deny', [[[m({ namespaces: [{ exact: 'bar' }] })]]]));
  const denyAllDry = compileIstioAuthorization(policy('deny-all-dry', 'Deny', [[]], true));
  const allowNothingDry = compileIstioAuthorization(policy('allow-nothing-dry', 'Allow', [], true));
  const strict = compileIstioAuthorization({ ...policy('istio_converted_static_strict', 'Deny', [[[m({ notPrincipals: [{ presence: true }] })]]]), namespace: 'istio-system', scope: 'Global' });

  test('no policies: allow', () => {
    assert.deepEqual(decideIstio([], facts(undefined)), { allowed: true, policy: '', reason: 'no allow policies', dryRunMatched: [] });
  });
  test('an ALLOW policy that matches allows; one that does not denies', () => {
    assert.equal(decideIstio([allowSleep], facts(SLEEP)).policy, 'ns1/allow-sleep');
    assert.deepEqual(decideIstio([allowSleep], facts(ADMIN)), { allowed: false, policy: '', reason: 'allow policies exist, but none allowed', dryRunMatched: [] });
  });
  test('DENY wins over a matching ALLOW, whatever the order', () => {
    const both = compileIstioAuthorization(policy('allow-all', 'Allow', [[]]));
    assert.equal(decideIstio([both, denyBar], facts(ADMIN)).reason, 'explicitly denied by: ns1/deny-bar');
    assert.equal(decideIstio([both, denyBar], facts(SLEEP)).allowed, true);
  });
  test('STRICT: plaintext denied, mTLS allowed', () => {
    assert.equal(decideIstio([strict], facts(undefined)).reason, 'explicitly denied by: istio-system/istio_converted_static_strict');
    assert.equal(decideIstio([strict], facts(SLEEP)).allowed, true);
  });
  test('dry-run policies are reported, never enforced', () => {
    const d = decideIstio([denyAllDry, allowNothingDry], facts(SLEEP));
    assert.deepEqual(d, { allowed: true, policy: '', reason: 'no allow policies', dryRunMatched: ['ns1/deny-all-dry'] });
  });
  test('compile errors name the field', () => {
    assert.throws(() => compileIstioAuthorization(policy('p', 'Allow', [[[m({ sourceIps: ['10.0.0.0/8'] }), m({ destinationIps: ['nope'] })]]])),
      /rules\[0\]\[0\]\[1\]\.destinationIps\[0\]: malformed IP address "nope"/);
    assert.throws(() => compileIstioAuthorization(policy('p', 'Allow', [[[m({ destinationPorts: [70000] })]]])), /rules\[0\]\[0\]\[0\]\.destinationPorts\[0\]: must be a port number/);
  });
});
