import { createSecureContext, type SecureContext, type PeerCertificate } from 'node:tls';
import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';
import { ConfigError } from '../core/errors.ts';

export const UPSTREAM_TLS = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';
export const DOWNSTREAM_TLS = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext';

const TLS_VERSIONS = ['TLS_AUTO', 'TLSv1_0', 'TLSv1_1', 'TLSv1_2', 'TLSv1_3'] as const;
const NODE_VERSION = { TLSv1_0: 'TLSv1', TLSv1_1: 'TLSv1.1', TLSv1_2: 'TLSv1.2', TLSv1_3: 'TLSv1.3' } as const;

/** A compiled CommonTlsContext: one SecureContext built at load time, shared by every connection. */
export interface TlsSettings {
  readonly context: SecureContext;
  readonly alpn: readonly string[];
  readonly verifyPeer: boolean;
  /** Accepted peer SANs (exact / prefix / suffix / contains / regex), empty = any. */
  readonly sanMatchers: readonly SanMatcher[];
}

export interface UpstreamTls extends TlsSettings {
  readonly sni: string;
}

export interface DownstreamTls extends TlsSettings {
  readonly requireClientCertificate: boolean;
}

type SanMatcher = (san: string) => boolean;

export function compileUpstreamTls(m: Msg): UpstreamTls {
  rejectFields(m, ['max_session_keys']);
  const common = m.msg('common_tls_context');
  return { ...compileCommon(common), sni: m.str('sni') };
}

export function compileDownstreamTls(m: Msg): DownstreamTls {
  rejectFields(m, ['session_ticket_keys', 'session_ticket_keys_sds_secret_config']);
  const common = m.msg('common_tls_context');
  if (!common || common.list('tls_certificates').length === 0) {
    throw m.error('common_tls_context.tls_certificates', 'a server certificate is required');
  }
  const requireClientCertificate = m.bool('require_client_certificate');
  return { ...compileCommon(common), requireClientCertificate };
}

function rejectFields(m: Msg, fields: readonly string[]): void {
  for (const f of fields) if (m.has(f)) throw m.error(f, 'is not supported');
}

function compileCommon(m: Msg | undefined): TlsSettings {
  const opts: Parameters<typeof createSecureContext>[0] = {};
  let alpn: string[] = [];
  let verifyPeer = false;
  let sanMatchers: SanMatcher[] = [];
  if (m) {
    for (const f of ['tls_certificate_sds_secret_configs', 'validation_context_sds_secret_config', 'combined_validation_context', 'tls_certificate_provider_instance']) {
      if (m.has(f)) throw m.error(f, 'SDS and certificate providers are not supported in static TLS contexts yet');
    }
    const params = m.msg('tls_params');
    if (params) {
      const min = params.enumOf('tls_minimum_protocol_version', TLS_VERSIONS);
      const max = params.enumOf('tls_maximum_protocol_version', TLS_VERSIONS);
      // Envoy's defaults: clients TLS 1.2–1.2 (1.3 allowed), servers 1.0–1.3; Node's floor is 1.2.
      if (min !== 'TLS_AUTO') opts.minVersion = NODE_VERSION[min];
      if (max !== 'TLS_AUTO') opts.maxVersion = NODE_VERSION[max];
      const ciphers = params.strList('cipher_suites');
      if (ciphers.length) opts.ciphers = ciphers.join(':');
      const curves = params.strList('ecdh_curves');
      if (curves.length) opts.ecdhCurve = curves.join(':');
    }
    const certs = m.list('tls_certificates');
    if (certs.length > 1) throw m.error('tls_certificates', 'only one certificate is supported');
    if (certs[0]) {
      opts.cert = readDataSource(certs[0].requiredMsg('certificate_chain'));
      opts.key = readDataSource(certs[0].requiredMsg('private_key'));
    }
    const vc = m.msg('validation_context');
    if (vc) {
      const ca = vc.msg('trusted_ca');
      if (ca) { opts.ca = readDataSource(ca); verifyPeer = true; }
      sanMatchers = [
        ...vc.list('match_subject_alt_names').map(compileStringMatcher),
        ...vc.list('match_typed_subject_alt_names').map((t) => compileStringMatcher(t.requiredMsg('matcher'))),
      ];
    }
    alpn = m.strList('alpn_protocols');
  }
  try {
    return { context: createSecureContext(opts), alpn, verifyPeer, sanMatchers };
  } catch (err) {
    throw new ConfigError(m?.path ?? 'common_tls_context', `invalid TLS material: ${(err as Error).message}`);
  }
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

/** The URI and DNS SANs of a peer certificate, as Envoy matches them. */
export function peerSans(cert: PeerCertificate): string[] {
  const alt = cert.subjectaltname;
  if (!alt) return [];
  return alt.split(', ').map((e) => e.slice(e.indexOf(':') + 1));
}

export function sansAccepted(settings: TlsSettings, cert: PeerCertificate): boolean {
  if (settings.sanMatchers.length === 0) return true;
  const sans = peerSans(cert);
  return settings.sanMatchers.some((match) => sans.some(match));
}
