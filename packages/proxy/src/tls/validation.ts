/**
 * CertificateValidationContext, compiled: trusted CA bytes and SAN matchers.
 * Used by static validation_context, by combined_validation_context's default,
 * and by SDS secrets that carry a validation_context (istiod's ROOTCA).
 */
import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';
import { compileSanMatchers, type TypedSanMatcher } from '../matchers/san.ts';

export interface ValidationConfig {
  readonly trustedCa: Buffer | undefined;
  readonly sanMatchers: readonly TypedSanMatcher[];
}

/** Fields that change what is accepted and are not built: refused rather than ignored. */
const UNSUPPORTED = ['verify_certificate_spki', 'verify_certificate_hash', 'crl', 'allow_expired_certificate',
  'custom_validator_config', 'trust_chain_verification', 'max_verify_depth', 'ca_certificate_provider_instance', 'system_root_certs'];

export function compileValidation(m: Msg): ValidationConfig {
  for (const f of UNSUPPORTED) if (m.has(f)) throw m.error(f, 'is not supported');
  const ca = m.msg('trusted_ca');
  return { trustedCa: ca ? readDataSource(ca) : undefined, sanMatchers: compileSanMatchers(m) };
}
