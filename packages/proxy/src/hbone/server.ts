/**
 * HBONE server: terminates mutual TLS 1.3 (ALPN h2) with the certificate of the address the
 * client dialled (one per pod, or shared), requires a client certificate chained to that
 * certificate's roots with a SPIFFE id, and hands each CONNECT stream to `onStream` with the
 * peer's identity. Only 'stream' is listened to (a compat 'request' listener makes node answer
 * CONNECT with 405); other methods get 405 here. Usable on its own (`listen`) or as a listener's
 * terminal (`handle`), so 15008 runs under the listener core's overload checks and drain.
 */
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { createServer as createH2Server, constants as h2, type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { canonicalIp } from '../core/canonical-ip.ts';
import type { WorkloadCertificate } from '../tls/cert-manager.ts';
import { hboneSecureContext, peerSpiffeId } from './mtls.ts';
import { HBONE_CONNECTION_WINDOW, HBONE_MAX_STREAMS_PER_CONNECTION, HBONE_SESSION_MEMORY_MB, HBONE_STREAM_WINDOW, hboneSettings } from './settings.ts';

/** One CONNECT stream, decided by the program (ztunnel inbound, waypoint, Envoy's CONNECT terminate). */
export interface HboneInbound {
  /** `:authority`: ip:port of the final destination. */
  readonly authority: string;
  readonly headers: Readonly<IncomingHttpHeaders>;
  /** The client's verified SPIFFE id. */
  readonly peerIdentity: string;
  readonly localAddress: string;
  readonly localPort: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly stream: ServerHttp2Stream;
  /** Answers 200 and gives the stream to relay (relayStreams). */
  accept(headers?: Readonly<Record<string, string>>): ServerHttp2Stream;
  /** Answers a status (e.g. 401 denied, 503 no upstream) and ends the stream. */
  refuse(status: number): void;
}

export interface HboneServerOptions {
  /** The certificate to present for the local address the client dialled. */
  readonly certificate: (localAddress: string) => WorkloadCertificate | Promise<WorkloadCertificate>;
  readonly onStream: (inbound: HboneInbound) => void;
  /** Accept this client identity on this address? Default: any SPIFFE id chained to the roots. */
  readonly verifyPeer?: (peerIdentity: string, localAddress: string) => boolean;
  readonly streamWindow?: number;
  readonly connectionWindow?: number;
  readonly maxConcurrentStreams?: number;
  readonly handshakeTimeoutMs?: number;
}

interface SessionInfo {
  readonly peerIdentity: string;
  readonly localAddress: string;
  readonly localPort: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
}

export class HboneServer {
  private readonly o: HboneServerOptions;
  private readonly h2: Http2Server;
  private readonly sessions = new Map<Http2Session, SessionInfo>();
  /** The connection being handed to the HTTP/2 server ('session' fires synchronously inside emit). */
  private pending: SessionInfo | undefined;
  private net: NetServer | undefined;
  private closing = false;
  /** Handshakes refused: no client certificate / not a SPIFFE id / refused by verifyPeer / failed. */
  readonly refused = { handshake: 0, identity: 0 };

  constructor(o: HboneServerOptions) {
    this.o = o;
    const settings = { ...hboneSettings(o.streamWindow ?? HBONE_STREAM_WINDOW), maxConcurrentStreams: o.maxConcurrentStreams ?? HBONE_MAX_STREAMS_PER_CONNECTION };
    this.h2 = createH2Server({ settings, maxSessionMemory: HBONE_SESSION_MEMORY_MB });
    const window = o.connectionWindow ?? HBONE_CONNECTION_WINDOW;
    this.h2.on('session', (session: Http2Session) => {
      const info = this.pending;
      this.pending = undefined;
      if (!info) { session.destroy(); return; }
      this.sessions.set(session, info);
      session.once('close', () => this.sessions.delete(session));
      session.on('error', () => { /* the streams report it */ });
      const setWindow = (): void => session.setLocalWindowSize(window);
      if (session.connecting) session.once('connect', setWindow); else setWindow();
      if (this.closing) session.close();
    });
    this.h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => this.onStream(stream, headers));
  }

  /** Takes a raw accepted socket (from `listen` or a listener terminal) and runs the mTLS handshake. */
  handle(socket: Socket): void {
    socket.on('error', () => { /* handshake errors are counted below */ });
    const local = canonicalIp(socket.localAddress ?? '');
    Promise.resolve(this.o.certificate(local)).then((cert) => {
      if (socket.destroyed) return;
      const secure = new TLSSocket(socket, {
        isServer: true, secureContext: hboneSecureContext(cert), ALPNProtocols: ['h2'], requestCert: true, rejectUnauthorized: true,
      });
      const timer = setTimeout(() => secure.destroy(), this.o.handshakeTimeoutMs ?? 10_000);
      timer.unref();
      secure.on('error', () => { clearTimeout(timer); if (!secure.destroyed) secure.destroy(); });
      secure.once('close', () => clearTimeout(timer));
      secure.once('secure', () => {
        clearTimeout(timer);
        const peer = peerSpiffeId(secure);
        if (secure.alpnProtocol !== 'h2' || secure.getProtocol() !== 'TLSv1.3' || !peer) { this.refused.handshake++; secure.destroy(); return; }
        if (this.o.verifyPeer && !this.o.verifyPeer(peer, local)) { this.refused.identity++; secure.destroy(); return; }
        this.pending = { peerIdentity: peer, localAddress: local, localPort: socket.localPort ?? 0, remoteAddress: canonicalIp(socket.remoteAddress ?? ''), remotePort: socket.remotePort ?? 0 };
        // A server-side TLSSocket we wrapped ourselves never emits 'secureConnect', which node's
        // HTTP/2 session waits for while `secureConnecting` is set; the handshake is done here.
        (secure as TLSSocket & { secureConnecting?: boolean }).secureConnecting = false;
        this.h2.emit('connection', secure);
      });
    }, () => { this.refused.handshake++; socket.destroy(); });
  }

  /** Listens on its own socket (tests, programs that do not need the listener core). Resolves with the port. */
  listen(port: number, host: string): Promise<number> {
    const server = createNetServer({ allowHalfOpen: true, noDelay: true }, (s) => this.handle(s));
    this.net = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve((server.address() as { port: number }).port));
    });
  }

  /** Open HTTP/2 sessions (one per client connection). */
  get sessionCount(): number {
    return this.sessions.size;
  }

  /** GOAWAY to every session (streams in flight finish) and stop listening. */
  close(): Promise<void> {
    this.closing = true;
    // close() sends GOAWAY and ends the session once its streams are done.
    for (const s of this.sessions.keys()) s.close();
    const net = this.net;
    return new Promise((resolve) => (net ? net.close(() => resolve()) : resolve()));
  }

  /** Ends every session now. */
  destroy(): void {
    this.closing = true;
    for (const s of this.sessions.keys()) s.destroy();
    this.net?.close();
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => { /* reset by the peer: the relay sees close */ });
    const info = stream.session ? this.sessions.get(stream.session) : undefined;
    if (!info) { stream.close(h2.NGHTTP2_INTERNAL_ERROR); return; }
    if (headers[':method'] !== 'CONNECT') { respondAndEnd(stream, 405); return; }
    const authority = headers[':authority'] ?? '';
    if (!authority) { respondAndEnd(stream, 400); return; }
    this.o.onStream({
      authority, headers, stream, ...info,
      accept: (h) => { stream.respond({ ':status': 200, ...h }); return stream; },
      refuse: (status) => respondAndEnd(stream, status),
    });
  }
}

function respondAndEnd(stream: ServerHttp2Stream, status: number): void {
  if (stream.destroyed || stream.closed) return;
  if (!stream.headersSent) stream.respond({ ':status': status }, { endStream: true });
  else stream.close(h2.NGHTTP2_CANCEL);
}
