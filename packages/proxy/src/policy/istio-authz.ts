/**
 * istio.security.Authorization (the L4 policy ztunnel receives over WDS) compiled to predicates
 * over the plain facts record, with ztunnel's semantics:
 *  - a policy matches when any rule matches; a rule when all its clauses match (no clauses: yes);
 *    a clause when any of its non-empty matches matches; a match when every field it sets matches
 *    (values of one field OR-ed; `not_*` values must all miss). A policy without rules never matches.
 *  - principals are compared without `spiffe://`; with no peer identity nothing (not even
 *    `presence`) matches, so `not_principals: [presence]` catches plaintext callers (STRICT mTLS).
 *  - deciding: DENY policies first (any match denies), then ALLOW (none configured: allow; else
 *    one must match). Dry-run policies are evaluated only for the log.
 * The input is the wire message as plain data (proto field names in camelCase).
 */
import { contains, parseCidrText, type CidrRange } from '../core/cidr.ts';
import { ConfigError } from '../core/errors.ts';
import type { AuthzFacts } from './facts.ts';

export type IstioStringMatch =
  | { readonly exact: string } | { readonly prefix: string } | { readonly suffix: string } | { readonly presence: true };

export interface IstioServiceAccountMatch {
  readonly namespace: string;
  readonly serviceAccount: string;
}

export interface IstioMatch {
  readonly namespaces: readonly IstioStringMatch[];
  readonly notNamespaces: readonly IstioStringMatch[];
  readonly principals: readonly IstioStringMatch[];
  readonly notPrincipals: readonly IstioStringMatch[];
  readonly serviceAccounts: readonly IstioServiceAccountMatch[];
  readonly notServiceAccounts: readonly IstioServiceAccountMatch[];
  /** CIDR text (`10.0.0.0/8`; a bare address is one host). */
  readonly sourceIps: readonly string[];
  readonly notSourceIps: readonly string[];
  readonly destinationIps: readonly string[];
  readonly notDestinationIps: readonly string[];
  readonly destinationPorts: readonly number[];
  readonly notDestinationPorts: readonly number[];
}

export interface IstioAuthorization {
  readonly name: string;
  readonly namespace: string;
  readonly scope: 'Global' | 'Namespace' | 'WorkloadSelector';
  readonly action: 'Allow' | 'Deny';
  /** rules → clauses → matches. */
  readonly rules: ReadonlyArray<ReadonlyArray<readonly IstioMatch[]>>;
  readonly dryRun: boolean;
}

/** The peer as ztunnel sees it: its SPIFFE identity split up, or nothing (plaintext). */
export interface PeerIdentity {
  /** The full `spiffe://td/ns/x/sa/y`. */
  readonly uri: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

export type IdentityPredicate = (facts: AuthzFacts, peer: PeerIdentity | undefined) => boolean;

export interface CompiledIstioPolicy {
  /** `namespace/name`. */
  readonly key: string;
  readonly action: 'Allow' | 'Deny';
  readonly dryRun: boolean;
  matches(facts: AuthzFacts, peer: PeerIdentity | undefined): boolean;
}

export interface IstioDecision {
  readonly allowed: boolean;
  /** The policy that decided (`namespace/name`), '' when none did. */
  readonly policy: string;
  /** Why, in ztunnel's words: `explicitly denied by: ns/name`, `allow policies exist, but none allowed`. */
  readonly reason: string;
  /** Dry-run policies that matched (for the log only). */
  readonly dryRunMatched: readonly string[];
}

/** The peer identity of a facts record: its first URI SAN when that is a SPIFFE id of Istio's shape. */
export function peerIdentity(facts: AuthzFacts): PeerIdentity | undefined {
  const uri = facts.peerUriSans[0];
  if (uri === undefined || !uri.startsWith('spiffe://')) return undefined;
  const parts = uri.slice('spiffe://'.length).split('/');
  if (parts.length !== 5 || parts[1] !== 'ns' || parts[3] !== 'sa') return undefined;
  return { uri, namespace: parts[2], serviceAccount: parts[4] };
}

function stringMatcher(m: IstioStringMatch, path: string): (s: string) => boolean {
  if ('exact' in m) { const v = m.exact; return (s) => s === v; }
  if ('prefix' in m) { const v = m.prefix; return (s) => s.startsWith(v); }
  if ('suffix' in m) { const v = m.suffix; return (s) => s.endsWith(v); }
  if ('presence' in m) return (s) => s !== '';
  throw new ConfigError(path, 'one of exact, prefix, suffix, presence is required');
}

type Test = (f: AuthzFacts, peer: PeerIdentity | undefined) => boolean;

/** One field: any positive value must hit (when there are any) and no negative value may. */
function field<T>(pos: readonly T[], neg: readonly T[], compile: (v: T, path: string) => Test, path: string, negPath: string): Test | undefined {
  if (pos.length === 0 && neg.length === 0) return undefined;
  const p = pos.map((v, i) => compile(v, `${path}[${i}]`));
  const n = neg.map((v, i) => compile(v, `${negPath}[${i}]`));
  return (f, peer) => {
    if (p.length > 0) {
      let hit = false;
      for (const t of p) if (t(f, peer)) { hit = true; break; }
      if (!hit) return false;
    }
    for (const t of n) if (t(f, peer)) return false;
    return true;
  };
}

function cidr(text: string, path: string): CidrRange {
  return parseCidrText(text, path);
}

function compileMatch(m: IstioMatch, path: string): Test | undefined {
  const at = (name: string): string => `${path}.${name}`;
  const tests: Test[] = [];
  const add = (t: Test | undefined): void => { if (t) tests.push(t); };
  add(field(m.destinationIps, m.notDestinationIps, (v, p) => { const r = cidr(v, p); return (f) => contains(r, f.destinationIp); }, at('destinationIps'), at('notDestinationIps')));
  add(field(m.sourceIps, m.notSourceIps, (v, p) => { const r = cidr(v, p); return (f) => contains(r, f.directRemoteIp); }, at('sourceIps'), at('notSourceIps')));
  add(field(m.destinationPorts, m.notDestinationPorts, (v, p) => {
    if (!Number.isInteger(v) || v < 0 || v > 65535) throw new ConfigError(p, `must be a port number, got ${v}`);
    return (f) => f.destinationPort === v;
  }, at('destinationPorts'), at('notDestinationPorts')));
  add(field(m.serviceAccounts, m.notServiceAccounts, (v) => {
    const ns = v.namespace, sa = v.serviceAccount;
    return (_f, peer) => peer !== undefined && peer.namespace === ns && peer.serviceAccount === sa;
  }, at('serviceAccounts'), at('notServiceAccounts')));
  add(field(m.principals, m.notPrincipals, (v, p) => {
    const match = stringMatcher(v, p);
    // Istio principals are written without the spiffe:// scheme (prefixes and suffixes too).
    return (_f, peer) => peer !== undefined && match(peer.uri.slice('spiffe://'.length));
  }, at('principals'), at('notPrincipals')));
  add(field(m.namespaces, m.notNamespaces, (v, p) => {
    const match = stringMatcher(v, p);
    return (_f, peer) => match(peer?.namespace ?? '');
  }, at('namespaces'), at('notNamespaces')));
  // An empty match matches nothing (ztunnel skips it).
  if (tests.length === 0) return undefined;
  return (f, peer) => { for (const t of tests) if (!t(f, peer)) return false; return true; };
}

/** A policy compiled once at config load; errors name the field (`rules[0][1][0].sourceIps[2]`). */
export function compileIstioAuthorization(p: IstioAuthorization, path = ''): CompiledIstioPolicy {
  const rules: Test[] = p.rules.map((rule, r) => {
    const clauses = rule.map((clause, c) => {
      const matches = clause.map((m, i) => compileMatch(m, `${path}rules[${r}][${c}][${i}]`)).filter((t): t is Test => t !== undefined);
      // A clause with no matches at all matches; one whose matches are all empty does not.
      if (clause.length === 0) return ((): boolean => true) as Test;
      return ((f, peer) => { for (const t of matches) if (t(f, peer)) return true; return false; }) as Test;
    });
    return ((f, peer) => { for (const t of clauses) if (!t(f, peer)) return false; return true; }) as Test;
  });
  return {
    key: `${p.namespace}/${p.name}`,
    action: p.action,
    dryRun: p.dryRun,
    matches(f, peer) {
      for (const t of rules) if (t(f, peer)) return true;
      return false;
    },
  };
}

const NOTHING: readonly string[] = Object.freeze([]);

/** ztunnel's decision over the policies that apply to one destination workload. */
export function decideIstio(policies: readonly CompiledIstioPolicy[], facts: AuthzFacts): IstioDecision {
  const peer = peerIdentity(facts);
  let dryRunMatched: string[] | undefined;
  let allows = 0;
  for (const p of policies) {
    if (p.action !== 'Deny') { if (!p.dryRun) allows++; continue; }
    if (!p.matches(facts, peer)) continue;
    if (p.dryRun) { (dryRunMatched ??= []).push(p.key); continue; }
    return { allowed: false, policy: p.key, reason: `explicitly denied by: ${p.key}`, dryRunMatched: dryRunMatched ?? NOTHING };
  }
  for (const p of policies) {
    if (p.action !== 'Allow' || !p.dryRun) continue;
    if (p.matches(facts, peer)) (dryRunMatched ??= []).push(p.key);
  }
  if (allows === 0) return { allowed: true, policy: '', reason: 'no allow policies', dryRunMatched: dryRunMatched ?? NOTHING };
  for (const p of policies) {
    if (p.action === 'Allow' && !p.dryRun && p.matches(facts, peer)) {
      return { allowed: true, policy: p.key, reason: `allowed by: ${p.key}`, dryRunMatched: dryRunMatched ?? NOTHING };
    }
  }
  return { allowed: false, policy: '', reason: 'allow policies exist, but none allowed', dryRunMatched: dryRunMatched ?? NOTHING };
}
