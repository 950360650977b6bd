/**
 * CertificateValidationContext, compiled: trusted CA bytes and SAN matchers.
 * Used by static validation_context, by combined_validation_context's default,
 * and by SDS secrets that carry a validation_context (istiod's ROOTCA).
 */
import type { PeerCertificate } from 'node:tls';
import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';

export type SanMatcher = (san: string) => boolean;

/** A SAN matcher and the SAN kind it applies to ('' = any kind, as match_subject_alt_names). */
export interface TypedSanMatcher {
  readonly kind: '' | 'DNS' | 'URI' | 'EMAIL' | 'IP_ADDRESS';
  readonly match: SanMatcher;
}

export interface ValidationConfig {
  readonly trustedCa: Buffer | undefined;
  readonly sanMatchers: readonly TypedSanMatcher[];
}

const SAN_TYPES = ['SAN_TYPE_UNSPECIFIED', 'EMAIL', 'DNS', 'URI', 'IP_ADDRESS', 'OTHER_NAME'] as const;
/** Fields that change what is accepted and are not built: refused rather than ignored. */
const UNSUPPORTED = ['verify_certificate_spki', 'verify_certificate_hash', 'crl', 'allow_expired_certificate',
  'custom_validator_config', 'trust_chain_verification', 'max_verify_depth', 'ca_certificate_provider_instance', 'system_root_certs'];

export function compileValidation(m: Msg): ValidationConfig {
  for (const f of UNSUPPORTED) if (m.has(f)) throw m.error(f, 'is not supported');
  const ca = m.msg('trusted_ca');
  const sanMatchers: TypedSanMatcher[] = m.list('match_subject_alt_names').map((s) => ({ kind: '', match: compileStringMatcher(s) }));
  for (const t of m.list('match_typed_subject_alt_names')) {
    const kind = t.enumOf('san_type', SAN_TYPES);
    if (kind === 'SAN_TYPE_UNSPECIFIED' || kind === 'OTHER_NAME') throw t.error('san_type', `${kind} is not supported`);
    sanMatchers.push({ kind, match: compileStringMatcher(t.requiredMsg('matcher')) });
  }
  return { trustedCa: ca ? readDataSource(ca) : undefined, sanMatchers };
}

/** envoy.type.matcher.v3.StringMatcher compiled to a predicate. */
export function compileStringMatcher(m: Msg): SanMatcher {
  const ignoreCase = m.bool('ignore_case');
  const norm = ignoreCase ? (s: string) => s.toLowerCase() : (s: string) => s;
  if (m.has('exact')) { const v = norm(m.str('exact')); return (s) => norm(s) === v; }
  if (m.has('prefix')) { const v = norm(m.str('prefix')); return (s) => norm(s).startsWith(v); }
  if (m.has('suffix')) { const v = norm(m.str('suffix')); return (s) => norm(s).endsWith(v); }
  if (m.has('contains')) { const v = norm(m.str('contains')); return (s) => norm(s).includes(v); }
  if (m.has('safe_regex')) {
    const src = m.requiredMsg('safe_regex').requiredStr('regex');
    let re: RegExp;
    try { re = new RegExp(`^(?:${src})$`, ignoreCase ? 'i' : ''); } catch (err) {
      throw m.error('safe_regex.regex', (err as Error).message);
    }
    return (s) => re.test(s);
  }
  throw m.error('', 'one of exact, prefix, suffix, contains, safe_regex is required');
}

const NODE_KIND: Record<string, TypedSanMatcher['kind']> = { DNS: 'DNS', URI: 'URI', email: 'EMAIL', 'IP Address': 'IP_ADDRESS' };

/** A peer certificate's SANs as [kind, value] pairs (Node prints them as `URI:spiffe://…, DNS:a`). */
export function peerSanEntries(cert: PeerCertificate): Array<readonly [TypedSanMatcher['kind'], string]> {
  const alt = cert.subjectaltname;
  if (!alt) return [];
  const out: Array<readonly [TypedSanMatcher['kind'], string]> = [];
  for (const e of alt.split(', ')) {
    const i = e.indexOf(':');
    out.push([NODE_KIND[e.slice(0, i)] ?? '', e.slice(i + 1)]);
  }
  return out;
}

/** Envoy: the peer passes when any matcher accepts any SAN of its kind (no matchers = any peer). */
export function sansMatch(matchers: readonly TypedSanMatcher[], cert: PeerCertificate): boolean {
  if (matchers.length === 0) return true;
  const sans = peerSanEntries(cert);
  for (const m of matchers) {
    for (const [kind, value] of sans) if ((m.kind === '' || m.kind === kind) && m.match(value)) return true;
  }
  return false;
}
