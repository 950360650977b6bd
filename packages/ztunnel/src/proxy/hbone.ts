/**
 * HBONE for one workload, over the core's pool and server: outbound CONNECTs are dialled from the
 * workload's own socket factory (in-pod: the pod's namespace, marked), presenting the source
 * identity's certificate — TLS 1.3, ALPN h2, no SNI — and requiring the destination's SPIFFE id;
 * inbound TLS on 15008 presents the certificate of the workload that was dialled.
 */
import { connect as tlsConnect, type PeerCertificate } from 'node:tls';
import type net from 'node:net';
import {
  HboneClientPool, HboneIdentityError, HboneServer, hboneSecureContext, spiffeSanMatches, uriSans, type CertificateManager, type HboneInbound, type WorkloadCertificate,
} from '../core.ts';
import type { HboneConnector, HboneKey } from './inputs.ts';
import type { SocketFactory } from './sockets.ts';

export interface HbonePoolSettings {
  readonly maxStreamsPerConnection: number;
  readonly idleReleaseMs: number;
  readonly streamWindow: number;
  readonly connectionWindow: number;
}

function splitHostPort(hp: string): { host: string; port: number } {
  const i = hp.lastIndexOf(':');
  return { host: hp.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(hp.slice(i + 1)) };
}

/** TLS over a TCP socket made by `sockets`, presenting `cert`, the peer required to be `expected`. */
export function dialFrom(sockets: SocketFactory, cert: WorkloadCertificate, destination: string, expected: string): net.Socket {
  const { host, port } = splitHostPort(destination);
  const tcp = sockets.connect({ address: host, port });
  tcp.setNoDelay(true);
  return tlsConnect({
    socket: tcp, secureContext: hboneSecureContext(cert), ALPNProtocols: ['h2'], servername: '', minVersion: 'TLSv1.3',
    checkServerIdentity: (_host: string, peer: PeerCertificate) => (expected === '' || spiffeSanMatches(peer, [expected])
      ? undefined
      : new HboneIdentityError(`peer identity ${uriSans(peer.subjectaltname).join(', ') || '(none)'} is not ${expected}`)),
  });
}

export function podHboneConnector(sockets: SocketFactory, certs: CertificateManager, s: HbonePoolSettings): HboneConnector {
  const pool = new HboneClientPool(async (key: HboneKey) => dialFrom(sockets, await certs.get(key.sourceIdentity), key.destination, key.destinationIdentity), {
    maxStreamsPerConnection: s.maxStreamsPerConnection, idleReleaseMs: s.idleReleaseMs, streamWindow: s.streamWindow, connectionWindow: s.connectionWindow,
  });
  return {
    connect: (key, authority, headers) => pool.connect(key, authority, headers),
    close: () => pool.close(),
  };
}

/** The 15008 server of one workload: the certificate of whoever is local at the dialled address. */
export function podHboneServer(certs: CertificateManager, identity: () => string | undefined, onStream: (inbound: HboneInbound) => void, s: HbonePoolSettings): HboneServer {
  return new HboneServer({
    certificate: () => {
      const id = identity();
      if (!id) throw new Error('failed to fetch information about local workload: not (yet) known to the control plane');
      return certs.get(id);
    },
    onStream, streamWindow: s.streamWindow, connectionWindow: s.connectionWindow,
  });
}
