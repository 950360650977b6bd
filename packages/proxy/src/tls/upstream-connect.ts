import { connect as tlsConnect, type ConnectionOptions, type PeerCertificate, type TLSSocket } from 'node:tls';
import { sansAccepted, type UpstreamTls } from './context.ts';

/**
 * TLS options for an upstream connection as Envoy verifies it: the chain
 * against trusted_ca, and the peer's SANs against match_subject_alt_names —
 * never the SNI against the certificate (Envoy does no hostname check). `override` (Istio's ALPN
 * filter, via request filter state) replaces the context's alpn_protocols, as Envoy's
 * application-protocol override does.
 */
export function upstreamTlsOptions(tls: UpstreamTls, alpn: readonly string[], override?: readonly string[]): ConnectionOptions {
  return {
    servername: tls.sni || undefined,
    secureContext: tls.context,
    rejectUnauthorized: tls.verifyPeer,
    ALPNProtocols: override?.length ? [...override] : tls.alpn.length ? [...tls.alpn] : [...alpn],
    checkServerIdentity: (_host: string, cert: PeerCertificate) => (sansAccepted(tls, cert) ? undefined
      : Object.assign(new Error('upstream certificate SANs do not match match_subject_alt_names'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' })),
  };
}

export function connectUpstreamTls(tls: UpstreamTls, address: string, port: number, alpn: readonly string[], override?: readonly string[]): TLSSocket {
  const socket = tlsConnect({ host: address, port, ...upstreamTlsOptions(tls, alpn, override) });
  // checkServerIdentity only runs when the chain is verified; SAN matchers apply regardless (Envoy).
  if (!tls.verifyPeer && tls.sanMatchers.length) {
    socket.once('secureConnect', () => {
      if (!sansAccepted(tls, socket.getPeerCertificate())) socket.destroy(Object.assign(new Error('upstream certificate SANs do not match'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }));
    });
  }
  return socket;
}
