import { Socket } from 'node:net';
import type { buildConnector } from 'undici';
import { connect as tlsConnect, type ConnectionOptions, type PeerCertificate, type TLSSocket } from 'node:tls';
import { noteUpstreamSans } from './upstream-sans.ts';
import type { TlsState, UpstreamTls } from './context.ts';
import { CHAIN_ERRORS, type SslStats } from './ssl-stats.ts';
import { sansMatch, spiffeSanMatches } from '../matchers/san.ts';

const SAN_MISMATCH = 'ERR_TLS_CERT_ALTNAME_INVALID';

function sanError(): Error {
  return Object.assign(new Error('upstream certificate SANs do not match match_subject_alt_names'), { code: SAN_MISMATCH });
}

/** The error a connection gets while its SDS secrets have not arrived (Envoy: "Secret is not supplied by SDS"). */
export function secretsNotReadyError(tls: UpstreamTls): Error {
  return Object.assign(new Error(`TLS error: Secret is not supplied by SDS (${tls.missing().join(', ') || tls.secretNames.join(', ')})`), { code: 'UND_ERR_SOCKET' });
}

/** The peer passes the context's SAN matchers and, when one is required, presents that SPIFFE id. */
function peerAccepted(state: TlsState, cert: PeerCertificate, identity: string | undefined): boolean {
  return sansMatch(state.sanMatchers, cert) && (!identity || spiffeSanMatches(cert, [identity]));
}

/**
 * Connects with TLS as Envoy verifies an upstream: the chain against trusted_ca, and
 * the peer's SANs against the matchers — never the SNI against the certificate (Envoy
 * does no hostname check). `identity`: the SPIFFE id the peer must also present (an HBONE
 * destination known to workload discovery). Verification failures and handshake errors are
 * counted in `stats` (cluster.<name>.ssl.*). Without the context's secrets the returned socket
 * fails at once with secretsNotReadyError.
 */
export function connectUpstreamTls(tls: UpstreamTls, address: string, port: number, alpn: readonly string[], stats?: SslStats, override?: readonly string[], identity?: string,
  onread?: { buffer: Buffer; callback: (n: number) => boolean }): Socket {
  const state = tls.current();
  if (!state) {
    stats?.secretsNotReady.inc();
    const dead = new Socket();
    process.nextTick(() => dead.destroy(secretsNotReadyError(tls)));
    return dead;
  }
  const options: ConnectionOptions & { onread?: typeof onread } = {
    host: address, port,
    servername: tls.sni || undefined,
    secureContext: state.context,
    rejectUnauthorized: state.verifyPeer,
    // Istio's ALPN filter (request filter state) replaces the context's list, as Envoy's application-protocol override.
    ALPNProtocols: override?.length ? [...override] : tls.alpn.length ? [...tls.alpn] : [...alpn],
    checkServerIdentity: (_host: string, cert: PeerCertificate) => (peerAccepted(state, cert, identity) ? undefined : sanError()),
    // Decrypted bytes straight into the caller's buffer: no Buffer and no Readable per read
    // (tls.connect takes net's `onread`; @types/node does not list it).
    onread,
  };
  const socket = tlsConnect(options);
  // Envoy sets TCP_NODELAY on every upstream connection: a small write (an HTTP/2 frame, a request head) goes out at once.
  socket.setNoDelay(true);
  watchHandshake(socket, state, stats, identity);
  socket.once('secureConnect', () => noteUpstreamSans(address, port, socket));
  return socket;
}

function watchHandshake(socket: TLSSocket, state: TlsState, stats: SslStats | undefined, identity: string | undefined): void {
  let done = false;
  const onError = (err: NodeJS.ErrnoException): void => {
    if (done) return;
    done = true;
    if (!stats) return;
    const code = err.code ?? '';
    if (code === SAN_MISMATCH) { stats.failVerifySan.inc(); stats.connectionError.inc(); }
    else if (CHAIN_ERRORS.has(code)) { stats.failVerifyError.inc(); stats.connectionError.inc(); }
    // A refused TCP connect is not a TLS error (upstream_cx_connect_fail counts it).
    else if (code !== 'ECONNREFUSED' && code !== 'ETIMEDOUT' && code !== 'EHOSTUNREACH') stats.connectionError.inc();
  };
  socket.once('error', onError);
  socket.once('secureConnect', () => {
    if (done) return;
    done = true;
    socket.removeListener('error', onError);
    // checkServerIdentity only runs when the chain is verified; SAN matchers apply regardless (Envoy).
    if (!state.verifyPeer && (state.sanMatchers.length || identity) && !peerAccepted(state, socket.getPeerCertificate(), identity)) {
      stats?.failVerifySan.inc();
      stats?.connectionError.inc();
      socket.destroy(sanError());
      return;
    }
    stats?.handshake.inc();
  });
}

/** undici's `connect` hook: a TLS connection made with the cluster's current context, handed over once secure. */
export function undiciTlsConnector(tls: UpstreamTls, alpn: readonly string[], stats: SslStats | undefined, override?: readonly string[]): buildConnector.connector {
  return (opts, callback) => {
    const socket = connectUpstreamTls(tls, opts.hostname.replace(/^\[|\]$/g, ''), Number(opts.port), alpn, stats, override);
    socket.setNoDelay(true);
    const onError = (err: Error): void => { socket.removeListener('secureConnect', onSecure); callback(err, null); };
    const onSecure = (): void => {
      socket.removeListener('error', onError);
      if (!socket.destroyed) { callback(null, socket); return; }
      // Refused after the handshake (SAN check without a trusted CA): the destroy's error follows.
      socket.once('error', () => { /* reported through the callback */ });
      callback(sanError(), null);
    };
    socket.once('error', onError);
    socket.once('secureConnect', onSecure);
  };
}
