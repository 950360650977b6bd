import type { Bench } from 'tinybench';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Msg, normalizeKeys } from '../../packages/proxy/src/api/core.ts';
import { compileRbac, type AuthzFacts } from '../../packages/proxy/src/api/policy.ts';

/**
 * RBAC decisions on istiod's single-policy golden (2 policies, every source/operation/condition
 * field, SAN regexes): the rule that matches last in name order, and a request no rule matches.
 */
// yaml is the proxy package's dependency, not the repository root's.
const { parse } = createRequire(new URL('../../packages/proxy/package.json', import.meta.url))('yaml') as { parse(text: string): unknown };
const GOLDEN = new URL('../../../shared/fixtures/istio-istio/pilot/pkg/security/authz/builder/testdata/http/single-policy-out.yaml', import.meta.url);

export default function register(bench: Bench): void {
  const doc = normalizeKeys(parse(readFileSync(GOLDEN, 'utf8'))) as { typed_config: { rules: unknown } };
  const engine = compileRbac(new Msg(doc.typed_config.rules, 'rules'));
  const allow: AuthzFacts = {
    directRemoteIp: '10.1.0.2', remoteIp: '172.22.3.7', destinationIp: '10.8.8.8', destinationPort: 9102, requestedServerName: '', tls: true,
    peerUriSans: ['spiffe://rule[1]-from[0]-principal[1]', 'spiffe://cluster.local/ns/rule[1]-from[0]-ns[2]/sa/default'], peerDnsSans: [], peerSubject: '',
    filterState: undefined, metadata: new Map([['envoy.filters.http.jwt_authn', { payload: { iss: 'rule[1]-from[0]-requestPrincipal[2]', sub: '' } }]]),
    request: { method: 'rule[1]-to[0]-method[1]', authority: 'rule[1]-to[0]-host[2]', path: 'rule[1]-to[0]-path[2]', scheme: 'http', headers: {} },
  };
  const deny: AuthzFacts = { ...allow, request: { ...allow.request!, method: 'GET' } };
  if (!engine.decide(allow).allowed || engine.decide(deny).allowed) throw new Error('golden decisions changed');
  bench.add('rbac: istiod golden, allowed by the 2nd policy', () => { engine.decide(allow); });
  bench.add('rbac: istiod golden, no policy matches', () => { engine.decide(deny); });
}
