import type { Msg } from '../config/fields.ts';
import type { AuthzFacts } from './facts.ts';
import { compilePolicy, type FactPredicate } from './rules.ts';
import { compileMatcherTree } from './matcher-tree.ts';

export const RBAC_ACTIONS = ['ALLOW', 'DENY', 'LOG'] as const;
export type RbacAction = (typeof RBAC_ACTIONS)[number];

/** One decision: may it pass, which policy decided ('' when none matched), should it be logged (action LOG). */
export interface Decision {
  readonly allowed: boolean;
  readonly policy: string;
  readonly log: boolean;
}

/** A compiled envoy.config.rbac.v3.RBAC (or an RBAC matcher tree): immutable, shared by every request. */
export interface RbacEngine {
  decide(f: AuthzFacts): Decision;
}

interface NamedPolicy { readonly name: string; readonly match: FactPredicate }

const NONE_ALLOWED: Decision = Object.freeze({ allowed: true, policy: '', log: false });
const NONE_DENIED: Decision = Object.freeze({ allowed: false, policy: '', log: false });

/** The policies engine: action applied to the first matching policy in name order (Envoy keeps them in a sorted map). */
class PolicyEngine implements RbacEngine {
  private readonly action: RbacAction;
  private readonly policies: readonly NamedPolicy[];
  private readonly matched: ReadonlyMap<string, Decision>;

  constructor(action: RbacAction, policies: NamedPolicy[]) {
    this.action = action;
    this.policies = policies;
    // One frozen decision per policy, made at load, so deciding allocates nothing.
    const matched = new Map<string, Decision>();
    for (const p of policies) matched.set(p.name, Object.freeze({ allowed: action !== 'DENY', policy: p.name, log: action === 'LOG' }));
    this.matched = matched;
  }

  decide(f: AuthzFacts): Decision {
    for (const p of this.policies) {
      if (p.match(f)) return this.matched.get(p.name) as Decision;
    }
    // ALLOW with no match denies; DENY and LOG with no match let it pass.
    return this.action === 'ALLOW' ? NONE_DENIED : NONE_ALLOWED;
  }
}

/** envoy.config.rbac.v3.RBAC: `action` and `policies` (a map of policy name → Policy). */
export function compileRbac(m: Msg): RbacEngine {
  if (m.has('audit_logging_options')) throw m.error('audit_logging_options', 'is not supported yet');
  const action = m.enumOf('action', RBAC_ACTIONS);
  const pm = m.msg('policies');
  const names = pm ? Object.keys(pm.raw).sort(byBytes) : [];
  const policies = names.map((name) => ({ name, match: compilePolicy((pm as Msg).requiredMsg(name)) }));
  return new PolicyEngine(action, policies);
}

/** std::map<std::string> order: byte-wise, which for UTF-16 strings of ASCII is code-unit order. */
function byBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The engine a filter config asks for: `matcher` wins over `rules` when both are set (Envoy's
 * note on RBAC.matcher); undefined when neither is set (no enforcement).
 */
export function compileEngine(m: Msg, rulesKey: string, matcherKey: string, network: boolean): RbacEngine | undefined {
  const matcher = m.msg(matcherKey);
  if (matcher) return compileMatcherTree(matcher, network);
  const rules = m.msg(rulesKey);
  return rules ? compileRbac(rules) : undefined;
}
