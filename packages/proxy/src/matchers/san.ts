/**
 * Subject-alternative-name matching for TLS peer validation (match_subject_alt_names,
 * match_typed_subject_alt_names) and HBONE's SPIFFE identity check, over the one StringMatcher.
 * As in Envoy, an `exact` matcher against a DNS SAN follows DNS rules: case-insensitive, and a
 * certificate's `*.example.com` covers exactly one leftmost label.
 */
import type { PeerCertificate } from 'node:tls';
import type { X509Certificate } from 'node:crypto';
import type { Msg } from '../config/fields.ts';
import { compileStringMatcher, type StringPredicate } from './string-matcher.ts';

export type SanKind = '' | 'DNS' | 'URI' | 'EMAIL' | 'IP_ADDRESS';

/** A SAN matcher and the SAN kind it applies to ('' = any kind, as match_subject_alt_names). */
export interface TypedSanMatcher {
  readonly kind: SanKind;
  readonly match: StringPredicate;
  /** Set for an `exact` matcher: DNS SANs are compared with DNS rules against it. */
  readonly dnsExact: string | undefined;
}

const SAN_TYPES = ['SAN_TYPE_UNSPECIFIED', 'EMAIL', 'DNS', 'URI', 'IP_ADDRESS', 'OTHER_NAME'] as const;

/** The SAN matchers of a CertificateValidationContext (both the untyped and the typed lists). */
export function compileSanMatchers(m: Msg): TypedSanMatcher[] {
  const out: TypedSanMatcher[] = m.list('match_subject_alt_names').map((s) => sanMatcher('', s));
  for (const t of m.list('match_typed_subject_alt_names')) {
    const kind = t.enumOf('san_type', SAN_TYPES);
    if (kind === 'SAN_TYPE_UNSPECIFIED' || kind === 'OTHER_NAME') throw t.error('san_type', `${kind} is not supported`);
    out.push(sanMatcher(kind, t.requiredMsg('matcher')));
  }
  return out;
}

function sanMatcher(kind: SanKind, m: Msg): TypedSanMatcher {
  return { kind, match: compileStringMatcher(m), dnsExact: m.has('exact') ? m.str('exact') : undefined };
}

const NODE_KIND: Record<string, SanKind> = { DNS: 'DNS', URI: 'URI', email: 'EMAIL', 'IP Address': 'IP_ADDRESS' };

/** A certificate's SANs as [kind, value] pairs (Node prints them as `URI:spiffe://…, DNS:a`). */
export function sanEntries(subjectAltName: string | undefined): Array<readonly [SanKind, string]> {
  if (!subjectAltName) return [];
  const out: Array<readonly [SanKind, string]> = [];
  for (const e of subjectAltName.split(', ')) {
    const i = e.indexOf(':');
    out.push([NODE_KIND[e.slice(0, i)] ?? '', e.slice(i + 1)]);
  }
  return out;
}

/** A peer certificate's SANs as [kind, value] pairs. */
export function peerSanEntries(cert: PeerCertificate): Array<readonly [SanKind, string]> {
  return sanEntries(cert.subjectaltname);
}

/** Envoy: the peer passes when any matcher accepts any SAN of its kind (no matchers = any peer). */
export function sansMatch(matchers: readonly TypedSanMatcher[], cert: PeerCertificate): boolean {
  if (matchers.length === 0) return true;
  const sans = peerSanEntries(cert);
  for (const m of matchers) {
    for (const [kind, value] of sans) {
      if (m.kind !== '' && m.kind !== kind) continue;
      if (kind === 'DNS' && m.dnsExact !== undefined ? dnsNameMatch(m.dnsExact, value) : m.match(value)) return true;
    }
  }
  return false;
}

/**
 * Envoy's Utility::dnsNameMatch: `name` (from config) against a certificate's DNS SAN `pattern`,
 * ASCII case-insensitive. A wildcard lives only in the pattern's leftmost label (`*.b.c`, `a*.b.c`),
 * never in an A-label (`xn--`), and covers one label: `*.b.c` matches `a.b.c`, not `b.c` or `x.a.b.c`.
 */
export function dnsNameMatch(name: string, pattern: string): boolean {
  const n = name.toLowerCase(), p = pattern.toLowerCase();
  if (n === p) return true;
  const pd = p.indexOf('.'), nd = n.indexOf('.');
  if (pd < 0 || nd < 0) return false;
  const pLabel = p.slice(0, pd), nLabel = n.slice(0, nd);
  if (!pLabel.includes('*') || p.indexOf('*', pd) >= 0 || pLabel.startsWith('xn--')) return false;
  return n.slice(nd) === p.slice(pd) && labelWildcardMatch(nLabel, pLabel);
}

function labelWildcardMatch(label: string, pattern: string): boolean {
  if (pattern === '*') return true;
  const star = pattern.indexOf('*');
  if (pattern.indexOf('*', star + 1) >= 0) return false;
  return pattern.length <= label.length + 1 && label.startsWith(pattern.slice(0, star)) && label.endsWith(pattern.slice(star + 1));
}

/** The URI SANs of a certificate (SPIFFE ids). */
export function uriSans(subjectAltName: string | undefined): string[] {
  const out: string[] = [];
  for (const [kind, value] of sanEntries(subjectAltName)) if (kind === 'URI') out.push(value);
  return out;
}

/** HBONE's identity check: some URI SAN of `cert` equals one of the expected SPIFFE ids. */
export function spiffeSanMatches(cert: PeerCertificate | X509Certificate, identities: readonly string[]): boolean {
  const alt = 'subjectaltname' in cert ? cert.subjectaltname : (cert as X509Certificate).subjectAltName;
  for (const uri of uriSans(alt)) if (identities.includes(uri)) return true;
  return false;
}
