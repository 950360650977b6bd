import type { TLSSocket } from 'node:tls';
import type { Counter, Scope } from '../stats/store.ts';
import type { TlsState } from './context.ts';
import { sansMatch } from '../matchers/san.ts';

/**
 * Envoy's `ssl.*` counters of one listener or cluster, and its socket factory's
 * `server_ssl_socket_factory.*` / `client_ssl_socket_factory.*` counters.
 */
export class SslStats {
  readonly handshake: Counter;
  readonly connectionError: Counter;
  readonly failVerifyError: Counter;
  readonly failVerifySan: Counter;
  readonly failVerifyNoCert: Counter;
  readonly noCertificate: Counter;
  /** downstream_context_secrets_not_ready / upstream_context_secrets_not_ready. */
  readonly secretsNotReady: Counter;

  constructor(scope: Scope, side: 'server' | 'client') {
    this.handshake = scope.counter('ssl.handshake');
    this.connectionError = scope.counter('ssl.connection_error');
    this.failVerifyError = scope.counter('ssl.fail_verify_error');
    this.failVerifySan = scope.counter('ssl.fail_verify_san');
    this.failVerifyNoCert = scope.counter('ssl.fail_verify_no_cert');
    this.noCertificate = scope.counter('ssl.no_certificate');
    this.secretsNotReady = side === 'server'
      ? scope.counter('server_ssl_socket_factory.downstream_context_secrets_not_ready')
      : scope.counter('client_ssl_socket_factory.upstream_context_secrets_not_ready');
  }
}

/** OpenSSL's chain verification results as Node reports them (authorizationError / error.code). */
export const CHAIN_ERRORS: ReadonlySet<string> = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'INVALID_CA', 'CERT_CHAIN_TOO_LONG', 'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE', 'CERT_REVOKED', 'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY', 'ERROR_IN_CERT_NOT_BEFORE_FIELD', 'ERROR_IN_CERT_NOT_AFTER_FIELD']);

/**
 * Why the peer's chain did not verify, or undefined when it did. A server-side TLSSocket
 * made over an accepted socket never gets `authorized` set (tls.Server does that), so the
 * handle's verify result is read directly; without a handle, fail closed.
 */
export function chainError(socket: TLSSocket): string | undefined {
  if (socket.authorized) return undefined;
  const handle = (socket as unknown as { _handle?: { verifyError?: () => (Error & { code?: string }) | null } })._handle;
  if (!handle?.verifyError) return 'no TLS handle';
  const err = handle.verifyError();
  return err ? (err.code ?? err.message) : undefined;
}

export type PeerVerdict = 'ok' | 'no_cert' | 'chain' | 'san';

/**
 * Envoy's DefaultCertValidator on a finished handshake: a missing certificate when one
 * is required, a chain that does not verify against trusted_ca (expired, unknown CA),
 * or SANs no matcher accepts. Counts the outcome in `stats`.
 */
export function verifyPeer(socket: TLSSocket, state: TlsState, requireCert: boolean, stats: SslStats | undefined): PeerVerdict {
  const cert = socket.getPeerCertificate();
  let verdict: PeerVerdict = 'ok';
  if (!cert || !cert.raw) {
    if (requireCert) verdict = 'no_cert';
    else stats?.noCertificate.inc();
  } else if (state.verifyPeer && chainError(socket) !== undefined) verdict = 'chain';
  else if (!sansMatch(state.sanMatchers, cert)) verdict = 'san';
  if (stats) {
    if (verdict === 'ok') stats.handshake.inc();
    else {
      stats.connectionError.inc();
      if (verdict === 'no_cert') stats.failVerifyNoCert.inc();
      else if (verdict === 'chain') stats.failVerifyError.inc();
      else stats.failVerifySan.inc();
    }
  }
  return verdict;
}
