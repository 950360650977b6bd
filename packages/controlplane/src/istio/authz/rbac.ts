/**
 * The AuthorizationPolicies that apply to a workload → its inbound RBAC filters, as istiod builds
 * them: a DENY filter before an ALLOW filter, each rule a policy named
 * `ns[<namespace>]-policy[<name>]-rule[<i>]`; a policy with no rules matches nothing; dry-run
 * policies go to shadow rules. HTTP chains get `envoy.filters.http.rbac`, TCP chains
 * `envoy.filters.network.rbac` (stat prefix `tcp.`).
 */
import type { AuthorizationPolicy } from '../types.ts';
import { CERTIFICATE, rulePolicy, type PrincipalOf } from './rbac-rules.ts';

type Json = Record<string, unknown>;

const HTTP_RBAC = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';
const NETWORK_RBAC = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';

const MATCH_NEVER: Json = { permissions: [{ not_rule: { any: true } }], principals: [{ not_id: { any: true } }] };

export function policyName(namespace: string, name: string, i: number): string {
  return `ns[${namespace}]-policy[${name}]-rule[${i}]`;
}

interface Built { readonly action: 'ALLOW' | 'DENY'; readonly rules?: Json; readonly shadow?: Json }

function build(policies: readonly AuthorizationPolicy[], action: 'ALLOW' | 'DENY', forTcp: boolean, id: PrincipalOf): Built | undefined {
  if (policies.length === 0) return undefined;
  const enforce: Record<string, Json> = {}, shadow: Record<string, Json> = {};
  let hasEnforce = false, hasShadow = false;
  for (const p of policies) {
    const target = p.dryRun ? shadow : enforce;
    if (p.dryRun) hasShadow = true; else hasEnforce = true;
    for (const [i, r] of p.rules.entries()) {
      const policy = rulePolicy(r, p.meta.namespace, forTcp, action === 'ALLOW', id);
      if (policy) target[policyName(p.meta.namespace, p.meta.name, i)] = policy;
    }
    if (p.rules.length === 0) target[policyName(p.meta.namespace, p.meta.name, 0)] = MATCH_NEVER;
  }
  // proto-JSON leaves out the default enum value (ALLOW), as istiod's output shows.
  const rbac = (policies2: Record<string, Json>): Json => (action === 'ALLOW' ? { policies: policies2 } : { action, policies: policies2 });
  return { action, rules: hasEnforce ? rbac(enforce) : undefined, shadow: hasShadow ? rbac(shadow) : undefined };
}

function typedConfig(b: Built, type: string, forTcp: boolean): Json {
  const c: Json = { '@type': type };
  if (b.rules) c.rules = b.rules;
  if (forTcp) c.stat_prefix = 'tcp.';
  if (b.shadow) c.shadow_rules = b.shadow;
  // istiod names the shadow prefix from the shadow rules' action; without shadow rules that reads as ALLOW.
  c.shadow_rules_stat_prefix = b.shadow && b.action === 'DENY' ? 'istio_dry_run_deny_' : 'istio_dry_run_allow_';
  return c;
}

/**
 * The filters for inbound HTTP chains (DENY first), or for TCP chains. `id`: how principals are
 * matched (the peer certificate; a waypoint matches the HBONE peer's identity in filter state).
 */
export function rbacFilters(policies: readonly AuthorizationPolicy[], forTcp: boolean, id: PrincipalOf = CERTIFICATE): Json[] {
  const out: Json[] = [];
  for (const action of ['DENY', 'ALLOW'] as const) {
    const b = build(policies.filter((p) => p.action === action), action, forTcp, id);
    if (!b) continue;
    out.push(forTcp
      ? { name: 'envoy.filters.network.rbac', typed_config: typedConfig(b, NETWORK_RBAC, true) }
      : { name: 'envoy.filters.http.rbac', typed_config: typedConfig(b, HTTP_RBAC, false) });
  }
  return out;
}
