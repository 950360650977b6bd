import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls';
import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';
import { ConfigError } from '../core/errors.ts';
import { logger } from '../core/log.ts';
import { secrets as threadSecrets, type SecretStore } from './secrets.ts';
import { compileValidation, type ValidationConfig } from './validation.ts';
import { sharedClientContext } from './shared-context.ts';
import { sharedValue } from '../core/shared-values.ts';
import type { TypedSanMatcher } from '../matchers/san.ts';

const log = logger('secret');

export const UPSTREAM_TLS = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';
export const DOWNSTREAM_TLS = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext';

const TLS_VERSIONS = ['TLS_AUTO', 'TLSv1_0', 'TLSv1_1', 'TLSv1_2', 'TLSv1_3'] as const;
const NODE_VERSION = { TLSv1_0: 'TLSv1', TLSv1_1: 'TLSv1.1', TLSv1_2: 'TLSv1.2', TLSv1_3: 'TLSv1.3' } as const;
/** BoringSSL's fixed TLS 1.3 suites: Envoy's cipher_suites only governs TLS ≤ 1.2. */
const TLS13_SUITES = 'TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256';

/** What one connection uses: built once per secret change, shared by every connection until the next. */
export interface TlsState {
  readonly context: SecureContext;
  /** A trusted CA is configured, so the peer's chain is verified. */
  readonly verifyPeer: boolean;
  readonly sanMatchers: readonly TypedSanMatcher[];
}

/**
 * A compiled CommonTlsContext. Static material makes one context at load time;
 * SDS-named certificates and roots (tls_certificate_sds_secret_configs,
 * combined_validation_context) are looked up in the thread's SecretStore and the
 * context is rebuilt when one of them changes. Until they all arrive, current()
 * is undefined and connections are refused (Envoy's NotReadySslSocket).
 */
type TlsSettingsInit = ConstructorParameters<typeof TlsSettings>[0];

export class TlsSettings {
  readonly alpn: readonly string[];
  /** SDS secret names this context waits for. */
  readonly secretNames: readonly string[];
  private readonly base: SecureContextOptions;
  private readonly certSecret: string | undefined;
  private readonly validationSecret: string | undefined;
  private readonly defaultValidation: ValidationConfig | undefined;
  private readonly store: SecretStore;
  private state: TlsState | undefined;
  private epoch = -1;
  private certVersion = 0;
  private validationVersion = 0;
  /** Client contexts made from SDS secrets are shared with other settings that would make the same one. */
  protected sharesContext = false;

  constructor(o: { alpn: readonly string[]; base: SecureContextOptions; certSecret?: string; validationSecret?: string; defaultValidation?: ValidationConfig; store?: SecretStore }) {
    this.alpn = o.alpn;
    this.base = o.base;
    this.certSecret = o.certSecret;
    this.validationSecret = o.validationSecret;
    this.defaultValidation = o.defaultValidation;
    this.store = o.store ?? threadSecrets;
    this.secretNames = sharedValue('tls-secret-names', [o.certSecret, o.validationSecret].filter((n): n is string => n !== undefined));
    if (this.secretNames.length === 0) {
      // Static: bad material is a config error at load time.
      this.state = buildState(this.base, this.defaultValidation, undefined);
    }
  }

  /** The context for a new connection, or undefined while a named secret is missing. */
  current(): TlsState | undefined {
    if (this.secretNames.length === 0 || this.epoch === this.store.epoch) return this.state;
    this.epoch = this.store.epoch;
    const cert = this.certSecret !== undefined ? this.store.get(this.certSecret) : undefined;
    const validation = this.validationSecret !== undefined ? this.store.get(this.validationSecret) : undefined;
    if ((this.certSecret !== undefined && !cert?.tlsCertificate) || (this.validationSecret !== undefined && !validation?.validation)) {
      this.state = undefined;
      this.certVersion = this.validationVersion = 0;
      return undefined;
    }
    const cv = cert?.version ?? 0, vv = validation?.version ?? 0;
    if (this.state && cv === this.certVersion && vv === this.validationVersion) return this.state;
    this.certVersion = cv;
    this.validationVersion = vv;
    const opts: SecureContextOptions = { ...this.base };
    if (cert?.tlsCertificate) { opts.cert = cert.tlsCertificate.certChain; opts.key = cert.tlsCertificate.privateKey; }
    try {
      this.state = buildState(opts, this.defaultValidation, validation?.validation,
        this.sharesContext ? { cert: cert?.tlsCertificate, validation: validation?.validation, base: this.base } : undefined);
    } catch (err) {
      log.error(`TLS context from secrets ${this.secretNames.join(', ')}: ${(err as Error).message}`);
      this.state = undefined;
    }
    return this.state;
  }

  /** Names still missing (for logs and errors). */
  missing(): string[] {
    return this.secretNames.filter((n) => this.store.get(n) === undefined);
  }
}

/** `shared`: the secrets (and config options) a client context is made from, to share it (shared-context.ts). */
function buildState(opts: SecureContextOptions, base: ValidationConfig | undefined, dynamic: ValidationConfig | undefined,
  shared?: { cert: object | undefined; validation: object | undefined; base: SecureContextOptions }): TlsState {
  // combined_validation_context: the SDS one merged over the default (repeated matchers append, trusted_ca replaces).
  const ca = dynamic?.trustedCa ?? base?.trustedCa;
  const sanMatchers = [...(base?.sanMatchers ?? []), ...(dynamic?.sanMatchers ?? [])];
  const context = shared
    ? sharedClientContext(shared.cert, shared.validation, shared.base, opts, ca, dynamic?.trustedCa !== undefined)
    : createSecureContext(ca ? { ...opts, ca } : opts);
  return { context, verifyPeer: ca !== undefined, sanMatchers };
}

export class UpstreamTls extends TlsSettings {
  readonly sni: string;
  constructor(init: TlsSettingsInit, sni: string) {
    super(init);
    this.sni = sni;
    this.sharesContext = true;
  }
}

export class DownstreamTls extends TlsSettings {
  readonly requireClientCertificate: boolean;
  constructor(init: TlsSettingsInit, requireClientCertificate: boolean) { super(init); this.requireClientCertificate = requireClientCertificate; }
}

export function compileUpstreamTls(m: Msg, store?: SecretStore): UpstreamTls {
  rejectFields(m, ['max_session_keys']);
  return new UpstreamTls(compileCommon(m.msg('common_tls_context'), m.path, store), m.str('sni'));
}

export function compileDownstreamTls(m: Msg, store?: SecretStore): DownstreamTls {
  rejectFields(m, ['session_ticket_keys', 'session_ticket_keys_sds_secret_config']);
  const common = m.msg('common_tls_context');
  if (!common || (common.list('tls_certificates').length === 0 && common.list('tls_certificate_sds_secret_configs').length === 0)) {
    throw m.error('common_tls_context.tls_certificates', 'a server certificate is required');
  }
  return new DownstreamTls(compileCommon(common, m.path, store), m.bool('require_client_certificate'));
}

function rejectFields(m: Msg, fields: readonly string[]): void {
  for (const f of fields) if (m.has(f)) throw m.error(f, 'is not supported');
}


function compileCommon(m: Msg | undefined, path: string, store: SecretStore | undefined): TlsSettingsInit {
  const base: SecureContextOptions = {};
  if (!m) return build(path, { alpn: [], base, store });
  for (const f of ['tls_certificate_provider_instance', 'tls_certificate_certificate_provider', 'tls_certificate_certificate_provider_instance',
    'validation_context_certificate_provider', 'validation_context_certificate_provider_instance', 'custom_handshaker', 'key_log']) {
    if (m.has(f)) throw m.error(f, 'is not supported');
  }
  const params = m.msg('tls_params');
  if (params) {
    params.onlyFields(['tls_minimum_protocol_version', 'tls_maximum_protocol_version', 'cipher_suites', 'ecdh_curves']);
    const min = params.enumOf('tls_minimum_protocol_version', TLS_VERSIONS);
    const max = params.enumOf('tls_maximum_protocol_version', TLS_VERSIONS);
    // Envoy's defaults: clients TLS 1.2–1.2 (1.3 allowed), servers 1.0–1.3; Node's floor is 1.2.
    if (min !== 'TLS_AUTO') base.minVersion = NODE_VERSION[min];
    if (max !== 'TLS_AUTO') base.maxVersion = NODE_VERSION[max];
    const ciphers = params.strList('cipher_suites');
    if (ciphers.length) base.ciphers = nodeCiphers(ciphers);
    const curves = params.strList('ecdh_curves');
    if (curves.length) base.ecdhCurve = curves.join(':');
  }
  const certs = m.list('tls_certificates');
  const sdsCerts = m.list('tls_certificate_sds_secret_configs');
  if (certs.length + sdsCerts.length > 1) throw m.error(certs.length > 1 ? 'tls_certificates' : 'tls_certificate_sds_secret_configs', 'only one certificate is supported');
  if (certs[0]) {
    certs[0].onlyFields(['certificate_chain', 'private_key']);
    base.cert = readDataSource(certs[0].requiredMsg('certificate_chain'));
    base.key = readDataSource(certs[0].requiredMsg('private_key'));
  }
  const certSecret = sdsCerts[0] ? sdsName(sdsCerts[0]) : undefined;
  let defaultValidation: ValidationConfig | undefined;
  let validationSecret: string | undefined;
  const exclusive = ['validation_context', 'validation_context_sds_secret_config', 'combined_validation_context'].filter((f) => m.has(f));
  if (exclusive.length > 1) throw m.error(exclusive[1], `cannot be combined with ${exclusive[0]}`);
  const vc = m.msg('validation_context');
  if (vc) defaultValidation = compileValidation(vc);
  const vcSds = m.msg('validation_context_sds_secret_config');
  if (vcSds) validationSecret = sdsName(vcSds);
  const combined = m.msg('combined_validation_context');
  if (combined) {
    combined.onlyFields(['default_validation_context', 'validation_context_sds_secret_config']);
    const d = combined.msg('default_validation_context');
    if (d) defaultValidation = compileValidation(d);
    validationSecret = sdsName(combined.requiredMsg('validation_context_sds_secret_config'));
  }
  // TLS parameters and ALPN are the same on thousands of istiod's clusters: one shared copy (not the certificate or key).
  const shared = base.cert === undefined && base.key === undefined ? sharedValue('tls-params', base) : base;
  return build(m.path, { alpn: sharedValue('alpn', m.strList('alpn_protocols')), base: shared, certSecret, validationSecret, defaultValidation, store });
}

function build(path: string, init: TlsSettingsInit): TlsSettingsInit {
  if (init.certSecret === undefined && init.validationSecret === undefined) {
    try {
      new TlsSettings(init);
    } catch (err) {
      throw new ConfigError(path ? `${path}.common_tls_context` : 'common_tls_context', `invalid TLS material: ${(err as Error).message}`);
    }
  }
  return init;
}

/** SdsSecretConfig: the name is what counts; any config source (sds-grpc cluster, ADS) feeds the thread's store. */
function sdsName(m: Msg): string {
  m.onlyFields(['name', 'sds_config']);
  return m.requiredStr('name');
}

/**
 * Envoy's cipher list to OpenSSL's: equal-preference groups `[A|B]` flatten to `A:B`,
 * and TLS 1.3 suites are added when none are named (else Node would cap at TLS 1.2).
 */
export function nodeCiphers(list: readonly string[]): string {
  const names = list.flatMap((c) => c.replace(/^\[|\]$/g, '').split('|')).filter((c) => c !== '');
  if (!names.some((c) => c.startsWith('TLS_'))) names.unshift(...TLS13_SUITES.split(':'));
  return names.join(':');
}
