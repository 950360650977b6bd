/**
 * The local control plane's certificate authority: a root it generates (P-256,
 * persisted) or one it is given in istio's `cacerts` layout, and leaf issuance
 * for SPIFFE identities from a CSR.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPrivateKey, X509Certificate as NodeX509 } from 'node:crypto';
import { importSigningKey, type CryptoKey, newKeyPair, privateKeyPem, randomSerial, splitPem, type SigningKey } from '@skua/proxy/identity';
import { x509 } from './x509.ts';

export interface AuthorityOptions {
  readonly trustDomain: string;
  /** Where a generated root is kept (created on first start, reused after). */
  readonly stateDir?: string;
  /** istio's plugged-in CA layout: ca-cert.pem, ca-key.pem, root-cert.pem, cert-chain.pem. */
  readonly cacertsDir?: string;
  /** Lifetime given when a request asks for none (istio: 24h). */
  readonly defaultTtlSec?: number;
  /** Longest lifetime granted (istio: 90 days). */
  readonly maxTtlSec?: number;
  /** Lifetime of a generated root (istio: 10 years). */
  readonly rootTtlSec?: number;
}

/** Why issuing failed, as a gRPC status will name it. */
export class IssueError extends Error {
  readonly kind: 'invalid' | 'denied';
  constructor(kind: 'invalid' | 'denied', message: string) { super(message); this.kind = kind; }
}

export const DEFAULT_TTL_SEC = 24 * 3600;
export const MAX_TTL_SEC = 90 * 24 * 3600;

export class CertificateAuthority {
  readonly trustDomain: string;
  readonly defaultTtlSec: number;
  readonly maxTtlSec: number;
  /** The signing certificate (the root itself when self-signed). */
  readonly caCertPem: string;
  readonly rootCertPem: string;
  /** Certificates between the signing cert and the root, signing cert first (without the root). */
  readonly intermediatesPem: readonly string[];
  private readonly signing: SigningKey;
  private readonly caCert: x509.X509Certificate;

  private constructor(o: AuthorityOptions, caCertPem: string, rootCertPem: string, intermediates: string[], signing: SigningKey) {
    this.trustDomain = o.trustDomain;
    this.defaultTtlSec = o.defaultTtlSec ?? DEFAULT_TTL_SEC;
    this.maxTtlSec = o.maxTtlSec ?? MAX_TTL_SEC;
    this.caCertPem = caCertPem;
    this.rootCertPem = rootCertPem;
    this.intermediatesPem = intermediates;
    this.signing = signing;
    this.caCert = new x509.X509Certificate(caCertPem);
  }

  static async create(o: AuthorityOptions): Promise<CertificateAuthority> {
    if (o.cacertsDir) return CertificateAuthority.fromCacerts(o, o.cacertsDir);
    if (o.stateDir && existsSync(join(o.stateDir, 'ca-key.pem'))) return CertificateAuthority.fromCacerts(o, o.stateDir);
    const { certPem, keyPem } = await generateRoot(o.trustDomain, o.rootTtlSec ?? 10 * 365 * 24 * 3600);
    if (o.stateDir) {
      mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
      writeFileSync(join(o.stateDir, 'ca-key.pem'), keyPem, { mode: 0o600 });
      writeFileSync(join(o.stateDir, 'ca-cert.pem'), certPem);
      writeFileSync(join(o.stateDir, 'root-cert.pem'), certPem);
    }
    return new CertificateAuthority(o, certPem, certPem, [], await importSigningKey(keyPem));
  }

  private static async fromCacerts(o: AuthorityOptions, dir: string): Promise<CertificateAuthority> {
    const read = (f: string): string | undefined => existsSync(join(dir, f)) ? readFileSync(join(dir, f), 'utf8') : undefined;
    const caCert = read('ca-cert.pem'), caKey = read('ca-key.pem');
    if (!caCert || !caKey) throw new Error(`${dir}: ca-cert.pem and ca-key.pem are required`);
    const root = read('root-cert.pem') ?? caCert;
    const rootPem = splitPem(root)[0];
    const caPem = splitPem(caCert)[0];
    if (!rootPem || !caPem) throw new Error(`${dir}: ca-cert.pem / root-cert.pem hold no certificate`);
    // cert-chain.pem runs from the signing cert towards the root; keep what lies between (the root goes last once).
    const between = splitPem(read('cert-chain.pem') ?? '').filter((c) => !samePem(c, caPem) && !samePem(c, rootPem));
    const signing = await importSigningKey(caKey);
    const ca = new CertificateAuthority(o, caPem, rootPem, samePem(caPem, rootPem) ? [] : [caPem, ...between], signing);
    if (!new NodeX509(caPem).checkPrivateKey(createPrivateKey(caKey))) throw new Error(`${dir}: ca-key.pem does not match ca-cert.pem`);
    return ca;
  }

  /** The chain a workload gets: leaf, the intermediates, root last. */
  async issue(csrPem: string, identity: string, requestedTtlSec: number): Promise<string[]> {
    const csr = await verifiedCsr(csrPem);
    const requested = csr.uris;
    if (requested.length === 0) throw new IssueError('invalid', 'the CSR has no URI SAN');
    for (const uri of requested) {
      if (uri !== identity) throw new IssueError('denied', `the CSR asks for ${uri} but the caller is ${identity}`);
    }
    const ttl = requestedTtlSec > 0 ? requestedTtlSec : this.defaultTtlSec;
    if (ttl > this.maxTtlSec) throw new IssueError('invalid', `requested TTL ${ttl}s is greater than the max allowed TTL ${this.maxTtlSec}s`);
    const leaf = await this.sign(csr.publicKey, [{ type: 'url', value: identity }], ttl, false);
    return [leaf, ...this.intermediatesPem, this.rootCertPem];
  }

  /** A serving certificate for the CA's own TLS port (DNS and IP SANs). */
  async servingCert(dnsNames: readonly string[], ips: readonly string[], ttlSec: number): Promise<{ chain: string; key: string }> {
    const keys = await newKeyPair();
    const names = [...dnsNames.map((value) => ({ type: 'dns' as const, value })), ...ips.map((value) => ({ type: 'ip' as const, value }))];
    const cert = await this.sign(keys.publicKey, names, ttlSec, true);
    return { chain: [cert, ...this.intermediatesPem].join(''), key: await privateKeyPem(keys.privateKey) };
  }

  private async sign(publicKey: CryptoKey, sans: x509.JsonGeneralNames, ttlSec: number, serverOnly: boolean): Promise<string> {
    const now = Date.now();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: '',
      issuer: this.caCert.subject,
      notBefore: new Date(Math.floor(now / 1000) * 1000),
      notAfter: new Date(Math.floor(now / 1000) * 1000 + ttlSec * 1000),
      publicKey,
      signingKey: this.signing.key,
      signingAlgorithm: this.signing.algorithm,
      extensions: [
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension(serverOnly ? [x509.ExtendedKeyUsage.serverAuth] : [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        new x509.BasicConstraintsExtension(false, undefined, true),
        await x509.AuthorityKeyIdentifierExtension.create(this.caCert, false),
        // No subject: the SAN carries the identity and must be critical (RFC 5280 4.2.1.6).
        new x509.SubjectAlternativeNameExtension(sans, true),
      ],
    });
    return cert.toString('pem') + '\n';
  }
}

interface ParsedCsr { readonly uris: string[]; readonly publicKey: CryptoKey }

/** Parses a PEM CSR and checks its self-signature (proof the caller holds the key). */
export async function verifiedCsr(pemText: string): Promise<ParsedCsr> {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pemText.trim());
  } catch (err) {
    throw new IssueError('invalid', `cannot parse the CSR: ${(err as Error).message}`);
  }
  let ok = false;
  try { ok = await csr.verify(); } catch { ok = false; }
  if (!ok) throw new IssueError('invalid', 'the CSR signature does not verify');
  const uris: string[] = [];
  for (const ext of csr.extensions) {
    if (ext instanceof x509.SubjectAlternativeNameExtension) for (const n of ext.names.items) if (n.type === 'url') uris.push(n.value);
  }
  const publicKey = (await csr.publicKey.export()) as unknown as CryptoKey;
  return { uris, publicKey };
}

async function generateRoot(trustDomain: string, ttlSec: number): Promise<{ certPem: string; keyPem: string }> {
  const keys = await newKeyPair();
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `O=${trustDomain}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + ttlSec * 1000),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false),
    ],
  });
  return { certPem: cert.toString('pem') + '\n', keyPem: await privateKeyPem(keys.privateKey) };
}

function samePem(a: string, b: string): boolean {
  return a.replace(/\s+/g, '') === b.replace(/\s+/g, '');
}
