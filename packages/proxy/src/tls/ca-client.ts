/**
 * istio-agent's CA client: CreateCertificate over gRPC with TLS to CA_ADDR,
 * authenticated by a Bearer token (the projected service-account token) or by a
 * client certificate (provisioned or current certs, as VMs renew).
 */
import * as grpc from '@grpc/grpc-js';
import { CREATE_CERTIFICATE_PATH, decodeResponse, encodeRequest, type CertificateRequest, type CertificateResponse } from './ca-protocol.ts';

export interface CaClientOptions {
  /** host:port (istiod.istio-system.svc:15012). */
  readonly address: string;
  /** PEM roots that sign the CA's serving certificate (CA_ROOT_CA); undefined = the system's. */
  readonly rootCertPem: string | undefined;
  /** Sent as metadata ClusterID (ISTIO_META_CLUSTER_ID). */
  readonly clusterId: string;
  readonly timeoutMs?: number;
}

export interface CaCredential {
  readonly token?: string;
  readonly clientCert?: { readonly chainPem: string; readonly keyPem: string };
}

/** A gRPC error from the CA, with its status code (grpc.status). */
export class CaError extends Error {
  readonly code: number;
  constructor(code: number, message: string) { super(message); this.code = code; }
}

export function createCertificate(o: CaClientOptions, csrPem: string, ttlSec: number, cred: CaCredential): Promise<string[]> {
  const creds = grpc.credentials.createSsl(
    o.rootCertPem ? Buffer.from(o.rootCertPem) : null,
    cred.clientCert ? Buffer.from(cred.clientCert.keyPem) : null,
    cred.clientCert ? Buffer.from(cred.clientCert.chainPem) : null,
  );
  const client = new grpc.Client(o.address, creds);
  const md = new grpc.Metadata();
  if (cred.token) md.set('authorization', `Bearer ${cred.token}`);
  const request: CertificateRequest = { csr: csrPem, validityDuration: ttlSec, metadata: { ClusterID: o.clusterId } };
  return new Promise<string[]>((resolve, reject) => {
    client.makeUnaryRequest<CertificateRequest, CertificateResponse>(CREATE_CERTIFICATE_PATH, encodeRequest, decodeResponse, request, md,
      { deadline: Date.now() + (o.timeoutMs ?? 10_000) }, (err, res) => {
        client.close();
        if (err) { reject(new CaError(err.code ?? grpc.status.UNKNOWN, err.details || err.message)); return; }
        const chain = res?.certChain ?? [];
        if (chain.length === 0) { reject(new CaError(grpc.status.INTERNAL, 'the CA returned an empty certificate chain')); return; }
        resolve([...chain]);
      });
  });
}
