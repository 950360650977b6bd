/**
 * HBONE's transport: mutual TLS 1.3, ALPN h2, no SNI (the peer is dialled by IP), and the peer's
 * SPIFFE identity checked against the expected ones (checkServerIdentity is overridden: there is
 * no host name to check). Secure contexts are built once per certificate.
 */
import { connect as netConnect } from 'node:net';
import { connect, createSecureContext, type SecureContext, type TLSSocket, type PeerCertificate } from 'node:tls';
import { spiffeSanMatches, uriSans } from '../matchers/san.ts';
import type { WorkloadCertificate } from '../tls/cert-manager.ts';
import type { HboneDialer, HboneKey } from './client-pool.ts';

const contexts = new WeakMap<WorkloadCertificate, SecureContext>();

/** The secure context presenting `cert` and trusting its roots (cached per certificate object). */
export function hboneSecureContext(cert: WorkloadCertificate): SecureContext {
  let ctx = contexts.get(cert);
  if (!ctx) {
    ctx = createSecureContext({ cert: cert.chainPem, key: cert.keyPem, ca: cert.rootPem, minVersion: 'TLSv1.3' });
    contexts.set(cert, ctx);
  }
  return ctx;
}

export class HboneIdentityError extends Error {
  readonly code = 'ERR_HBONE_PEER_IDENTITY';
}

/** Dials `host:port` presenting `cert`; the server must present one of `expected` (none = any chain to the roots). */
export function dialHbone(cert: WorkloadCertificate, host: string, port: number, expected: readonly string[], localAddress?: string): TLSSocket {
  // A source address (ztunnel's in-pod dialling) needs the TCP socket made first.
  const tcp = localAddress ? netConnect({ host, port, localAddress, noDelay: true }) : undefined;
  const socket = connect({
    host, port, socket: tcp,
    secureContext: hboneSecureContext(cert),
    ALPNProtocols: ['h2'],
    servername: '',
    minVersion: 'TLSv1.3' as const,
    checkServerIdentity: (_host: string, peer: PeerCertificate) => (expected.length === 0 || spiffeSanMatches(peer, expected)
      ? undefined
      : new HboneIdentityError(`peer identity ${uriSans(peer.subjectaltname).join(', ') || '(none)'} is not ${expected.join(' or ')}`)),
  });
  socket.setNoDelay(true);
  return socket;
}

/** The verified peer's SPIFFE id (its first spiffe:// URI SAN), '' when it has none. */
export function peerSpiffeId(socket: TLSSocket): string {
  const peer = socket.getPeerCertificate();
  for (const uri of uriSans(peer?.subjectaltname)) if (uri.startsWith('spiffe://')) return uri;
  return '';
}

/**
 * The pool's dialer for HBONE proper: the source identity's certificate (from the certificate
 * manager), the destination's identity required of the peer, `destination` = ip:port.
 */
export function mtlsDialer(certificate: (identity: string) => Promise<WorkloadCertificate>, o: { localAddress?: string } = {}): HboneDialer {
  return async (key: HboneKey) => {
    const cert = await certificate(key.sourceIdentity);
    const colon = key.destination.lastIndexOf(':');
    const host = key.destination.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    return dialHbone(cert, host, Number(key.destination.slice(colon + 1)), key.destinationIdentity ? [key.destinationIdentity] : [], o.localAddress);
  };
}
