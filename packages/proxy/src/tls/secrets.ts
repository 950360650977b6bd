/**
 * This thread's named secrets (Envoy's SDS secrets): `default` and `ROOTCA` from
 * the secret manager, and whatever ADS pushes. Each update is the proto-JSON of
 * envoy.extensions.transport_sockets.tls.v3.Secret, compiled once here; TLS
 * contexts that name a secret rebuild once per change (see context.ts).
 */
import { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';
import { compileValidation, type ValidationConfig } from './validation.ts';

export interface TlsCertificateSecret {
  readonly certChain: Buffer;
  readonly privateKey: Buffer;
}

export interface CompiledSecret {
  readonly name: string;
  /** Bumped on each update of this name (never reused within the thread). */
  readonly version: number;
  readonly tlsCertificate: TlsCertificateSecret | undefined;
  readonly validation: ValidationConfig | undefined;
  /** As given, for config_dump and for handing to worker threads. */
  readonly raw: Record<string, unknown>;
}

export type SecretListener = (name: string, secret: CompiledSecret | undefined) => void;

let nextVersion = 1;

export class SecretStore {
  private readonly byName = new Map<string, CompiledSecret>();
  private readonly listeners = new Set<SecretListener>();
  /** Bumps on every change: a TLS context compares one number per connection. */
  epoch = 0;

  /** Compiles and stores `secret` (throws ConfigError naming the field); listeners hear of it. */
  update(name: string, secret: Record<string, unknown>): CompiledSecret {
    const compiled = compileSecret(name, secret);
    this.byName.set(name, compiled);
    this.epoch++;
    for (const l of this.listeners) l(name, compiled);
    return compiled;
  }

  remove(name: string): void {
    if (!this.byName.delete(name)) return;
    this.epoch++;
    for (const l of this.listeners) l(name, undefined);
  }

  get(name: string): CompiledSecret | undefined {
    return this.byName.get(name);
  }

  all(): CompiledSecret[] {
    return [...this.byName.values()];
  }

  /** Called after every update/remove; returns the unsubscribe function. */
  onChange(listener: SecretListener): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }
}

/** The store of this thread (process-wide per event loop). */
export const secrets = new SecretStore();

const SECRET_FIELDS = ['name', 'tls_certificate', 'validation_context', '@type'];
const TLS_CERT_FIELDS = ['certificate_chain', 'private_key'];

function compileSecret(name: string, raw: Record<string, unknown>): CompiledSecret {
  const m = new Msg(raw, `secret ${name}`);
  for (const f of ['session_ticket_keys', 'generic_secret']) if (m.has(f)) throw m.error(f, 'is not supported');
  m.onlyFields(SECRET_FIELDS);
  const tc = m.msg('tls_certificate');
  const vc = m.msg('validation_context');
  if (!tc && !vc) throw m.error('', 'one of tls_certificate, validation_context is required');
  let tlsCertificate: TlsCertificateSecret | undefined;
  if (tc) {
    tc.onlyFields(TLS_CERT_FIELDS);
    tlsCertificate = { certChain: readDataSource(tc.requiredMsg('certificate_chain')), privateKey: readDataSource(tc.requiredMsg('private_key')) };
  }
  return { name, version: nextVersion++, tlsCertificate, validation: vc ? compileValidation(vc) : undefined, raw };
}

/** The proto-JSON Secret for a certificate and key (what an SDS server sends as `default`). */
export function tlsCertificateSecret(name: string, certChainPem: string, privateKeyPem: string): Record<string, unknown> {
  return {
    name,
    tls_certificate: { certificate_chain: { inline_bytes: Buffer.from(certChainPem).toString('base64') }, private_key: { inline_bytes: Buffer.from(privateKeyPem).toString('base64') } },
  };
}

/** The proto-JSON Secret for trusted roots (what an SDS server sends as `ROOTCA`). */
export function validationSecret(name: string, rootsPem: string): Record<string, unknown> {
  return { name, validation_context: { trusted_ca: { inline_bytes: Buffer.from(rootsPem).toString('base64') } } };
}
