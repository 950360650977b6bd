/**
 * istio.v1.auth.IstioCertificateService/CreateCertificate over gRPC with TLS
 * (istiod's 15012). The caller proves who it is with a Bearer token this control
 * plane signed, or — to renew — with its current certificate as the TLS client
 * certificate; the CSR's SPIFFE id must be that identity.
 */
import * as grpc from '@grpc/grpc-js';
import type { PeerCertificate } from 'node:tls';
import { CA_SERVICE, type CertificateRequest, type CertificateResponse, spiffeUri } from '@skua/proxy/identity';
import { CertificateAuthority, IssueError } from './authority.ts';
import { TokenAuthority, TokenError } from './token.ts';

export interface CaServerOptions {
  readonly ca: CertificateAuthority;
  readonly tokens: TokenAuthority;
  /** host:port to listen on (port 0 = any free port). */
  readonly listen: string;
  /** Names the serving certificate carries (istiod: istiod.istio-system.svc). */
  readonly dnsNames?: readonly string[];
  readonly ips?: readonly string[];
  /**
   * Service accounts (`namespace/name`) allowed to ask for another identity's certificate with
   * request metadata ImpersonatedIdentity — ztunnel's, as istiod's CA_TRUSTED_NODE_ACCOUNTS.
   */
  readonly trustedNodeAccounts?: readonly string[];
}

export interface CaServer {
  readonly port: number;
  /** Issued / refused counts, for tests and logs. */
  readonly counts: { issued: number; denied: number; invalid: number; unauthenticated: number };
  /** Certificates issued per SPIFFE id. */
  readonly issuedTo: Map<string, number>;
  close(): Promise<void>;
}

/** TLS that asks for, but does not require, a client certificate (tokens work without one). */
class OptionalClientCertCredentials extends grpc.ServerCredentials {
  constructor(root: string, chain: string, key: string) {
    super({ requestCert: true, rejectUnauthorized: false }, { ca: root, cert: chain, key });
  }
  override _equals(other: grpc.ServerCredentials): boolean { return other === this; }
}

export async function startCaServer(o: CaServerOptions): Promise<CaServer> {
  const serving = await o.ca.servingCert(o.dnsNames ?? ['localhost', 'istiod.istio-system.svc'], o.ips ?? ['127.0.0.1', '::1'], 365 * 24 * 3600);
  const counts = { issued: 0, denied: 0, invalid: 0, unauthenticated: 0 };
  const issuedTo = new Map<string, number>();
  const server = new grpc.Server();
  const handler: grpc.handleUnaryCall<CertificateRequest, CertificateResponse> = (call, callback) => {
    const caller = callerIdentity(call, o);
    if (typeof caller !== 'string') {
      counts.unauthenticated++;
      callback({ code: grpc.status.UNAUTHENTICATED, details: `authenticate failed: ${caller.reason}` });
      return;
    }
    const ttl = call.request.validityDuration;
    const impersonated = call.request.metadata.ImpersonatedIdentity;
    let subject = caller;
    if (typeof impersonated === 'string' && impersonated !== '') {
      const trusted = (o.trustedNodeAccounts ?? []).some(((a) => { const [ns, sa] = a.split('/'); return caller === spiffeUri({ trustDomain: o.ca.trustDomain, namespace: ns, serviceAccount: sa }); }));
      if (!trusted) {
        counts.denied++;
        callback({ code: grpc.status.PERMISSION_DENIED, details: `${caller} may not impersonate ${impersonated}` });
        return;
      }
      subject = impersonated;
    }
    o.ca.issue(call.request.csr, subject, ttl).then((certChain) => {
      counts.issued++;
      issuedTo.set(subject, (issuedTo.get(subject) ?? 0) + 1);
      callback(null, { certChain });
    }, (err: Error) => {
      if (err instanceof IssueError && err.kind === 'denied') { counts.denied++; callback({ code: grpc.status.PERMISSION_DENIED, details: err.message }); return; }
      counts.invalid++;
      callback({ code: grpc.status.INVALID_ARGUMENT, details: err.message });
    });
  };
  server.addService(CA_SERVICE as unknown as grpc.ServiceDefinition, { CreateCertificate: handler as grpc.UntypedHandleCall });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(o.listen, new OptionalClientCertCredentials(o.ca.rootCertPem, serving.chain, serving.key), (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    port,
    counts,
    issuedTo,
    close: () => new Promise<void>((resolve) => { server.tryShutdown(() => resolve()); setTimeout(() => { server.forceShutdown(); resolve(); }, 2000).unref(); }),
  };
}

/** The SPIFFE id the caller proved, or why it proved none. */
function callerIdentity(call: grpc.ServerUnaryCall<CertificateRequest, CertificateResponse>, o: CaServerOptions): string | { reason: string } {
  const auth = call.metadata.get('authorization')[0];
  if (typeof auth === 'string' && auth.length) {
    const m = /^Bearer\s+(\S+)$/i.exec(auth);
    if (!m) return { reason: 'the authorization header is not a Bearer token' };
    try {
      const sa = o.tokens.verify(m[1]);
      return spiffeUri({ trustDomain: o.ca.trustDomain, ...sa });
    } catch (err) {
      return { reason: err instanceof TokenError ? err.message : String(err) };
    }
  }
  // Renewal: a client certificate that chains to our root and is still valid (grpc-js reports only verified peers).
  const peer: PeerCertificate | undefined = call.getAuthContext()?.sslPeerCertificate;
  if (peer) {
    const uris = (peer.subjectaltname ?? '').split(', ').filter((s) => s.startsWith('URI:spiffe://')).map((s) => s.slice(4));
    if (uris.length === 1) return uris[0];
    return { reason: 'the client certificate carries no single SPIFFE id' };
  }
  return { reason: 'no Bearer token and no valid client certificate' };
}
