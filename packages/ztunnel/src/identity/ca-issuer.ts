/**
 * ztunnel's certificates: one CreateCertificate per local workload identity, authenticated with
 * ztunnel's own token (istiod accepts the node's ztunnel service account for the workloads on its
 * node) and naming the workload in the request metadata `ImpersonatedIdentity`, plus CA_HEADER_*
 * as gRPC metadata. TLS to CA_ADDRESS verifies CA_ROOT_CA (ALT_CA_HOSTNAME overrides the name).
 */
import { readFileSync } from 'node:fs';
import { Client, Metadata, status } from '@grpc/grpc-js';
import { CaError, CREATE_CERTIFICATE_PATH, decodeResponse, encodeRequest, type CertificateIssuer, type CertificateRequest, type CertificateResponse } from '../core.ts';
import { authHeaders, type ZtunnelConfig } from '../config.ts';
import { grpcTarget } from '../xds-client.ts';

export function ztunnelIssuer(cfg: ZtunnelConfig, timeoutMs = 10_000): { readonly issue: CertificateIssuer; close(): void } {
  if (!cfg.caAddress) throw new Error('CA_ADDRESS is empty: no CA to ask for certificates');
  const t = grpcTarget(cfg.caAddress, cfg.caRootCert, cfg.altCaHostname);
  // A CA that restarts is retried within the call's deadline (waitForReady), on a short back-off.
  const options: Record<string, string | number> = { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 5000 };
  if (t.authority) { options['grpc.default_authority'] = t.authority; options['grpc.ssl_target_name_override'] = t.authority; }
  const client = new Client(t.target, t.credentials, options);
  const issue: CertificateIssuer = (identity, csrPem, ttlSec) => {
    const md = new Metadata({ waitForReady: true });
    for (const [k, v] of Object.entries(authHeaders(cfg, cfg.caHeaders))) md.set(k, v);
    const request: CertificateRequest = { csr: csrPem, validityDuration: ttlSec, metadata: { ImpersonatedIdentity: identity } };
    return new Promise<string[]>((resolve, reject) => {
      client.makeUnaryRequest<CertificateRequest, CertificateResponse>(CREATE_CERTIFICATE_PATH, encodeRequest, decodeResponse, request, md,
        { deadline: Date.now() + timeoutMs }, (err, res) => {
          if (err) { reject(new CaError(err.code ?? status.UNKNOWN, err.details || err.message)); return; }
          const chain = res?.certChain ?? [];
          if (chain.length === 0) { reject(new CaError(status.INTERNAL, 'the CA returned an empty certificate chain')); return; }
          resolve([...chain]);
        });
    });
  };
  return { issue, close: () => client.close() };
}

/** The CA's root (to verify peers' chains) when the CA does not append it: CA_ROOT_CA as a file or PEM. */
export function caRootPem(cfg: ZtunnelConfig): string | undefined {
  const r = cfg.caRootCert;
  if (r.kind === 'file') return readFileSync(r.path, 'utf8');
  return r.kind === 'pem' && r.pem.includes('BEGIN CERTIFICATE') ? r.pem : undefined;
}
