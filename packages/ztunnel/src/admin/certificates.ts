/**
 * The config_dump's `certificates`: per identity the state and the chain (leaf first, root last)
 * with serial number and validity, as ztunnel prints them.
 */
import { splitPem, type CertificateManager } from '../core.ts';
import type { CertificateDump } from './config-dump.ts';
import { X509Certificate } from 'node:crypto';

function certEntry(pem: string): CertificateDump['certChain'][number] {
  const c = new X509Certificate(pem);
  const iso = (d: string): string => new Date(d).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return { pem, serialNumber: BigInt(`0x${c.serialNumber}`).toString(), validFrom: iso(c.validFrom), expirationTime: iso(c.validTo) };
}

export function certificatesDump(certs: CertificateManager | undefined): CertificateDump[] {
  if (!certs) return [];
  const out: CertificateDump[] = [];
  for (const identity of [...certs.identities].sort()) {
    const c = certs.peek(identity);
    if (!c) { out.push({ identity, state: 'Initializing', certChain: [] }); continue; }
    out.push({ identity, state: 'Available', certChain: [...splitPem(c.chainPem), ...(c.rootPem ? splitPem(c.rootPem) : [])].map(certEntry) });
  }
  return out;
}
