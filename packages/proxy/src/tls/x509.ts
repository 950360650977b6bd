/**
 * X.509 work shared by the proxy's secret manager and the control plane's CA:
 * P-256 keys, CSRs with a SPIFFE URI SAN, certificate facts. @peculiar/x509
 * needs reflect-metadata loaded first (its ASN.1 schema uses decorators).
 */
import 'reflect-metadata';
import { createPrivateKey, randomBytes, webcrypto, X509Certificate as NodeX509 } from 'node:crypto';

export type CryptoKey = webcrypto.CryptoKey;
export type CryptoKeyPair = webcrypto.CryptoKeyPair;

import * as x509 from '@peculiar/x509';

// Every @peculiar/x509 call below uses Node's WebCrypto (its typings name the DOM's Crypto).
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export { x509 };

export const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const ECDSA_SHA256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const RSA_SHA256 = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

export function newKeyPair(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify']) as Promise<CryptoKeyPair>;
}

export async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return pem('PRIVATE KEY', der);
}

/** A signing key read from PEM (PKCS#8, SEC1 EC or PKCS#1 RSA), with the signature algorithm it implies. */
export interface SigningKey {
  readonly key: CryptoKey;
  readonly algorithm: typeof ECDSA_SHA256 | typeof RSA_SHA256;
}

export async function importSigningKey(pemText: string): Promise<SigningKey> {
  const ko = createPrivateKey(pemText);
  const der = ko.export({ type: 'pkcs8', format: 'der' });
  if (ko.asymmetricKeyType === 'ec') {
    const curve = ko.asymmetricKeyDetails?.namedCurve;
    const namedCurve = curve === 'prime256v1' ? 'P-256' : curve === 'secp384r1' ? 'P-384' : undefined;
    if (!namedCurve) throw new Error(`unsupported EC curve ${curve}`);
    const key = await webcrypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve }, true, ['sign']);
    return { key, algorithm: ECDSA_SHA256 };
  }
  if (ko.asymmetricKeyType === 'rsa') {
    const key = await webcrypto.subtle.importKey('pkcs8', der, RSA_SHA256, true, ['sign']);
    return { key, algorithm: RSA_SHA256 };
  }
  throw new Error(`unsupported key type ${ko.asymmetricKeyType}`);
}

/** A PKCS#10 request for `uri` (no subject, SAN only, as istio-agent sends). */
export async function makeCsr(keys: CryptoKeyPair, uri: string): Promise<string> {
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    keys,
    signingAlgorithm: ECDSA_SHA256,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: uri }])],
  });
  return csr.toString('pem');
}

/** Facts of a PEM certificate the proxy needs: validity and URI SANs. */
export interface CertFacts {
  readonly notBefore: number;
  readonly notAfter: number;
  readonly uris: readonly string[];
  readonly serial: string;
  readonly fingerprint256: string;
}

export function certFacts(pemText: string): CertFacts {
  const c = new NodeX509(pemText);
  const uris: string[] = [];
  for (const part of (c.subjectAltName ?? '').split(', ')) if (part.startsWith('URI:')) uris.push(part.slice(4));
  return { notBefore: Date.parse(c.validFrom), notAfter: Date.parse(c.validTo), uris, serial: c.serialNumber, fingerprint256: c.fingerprint256 };
}

/** Splits concatenated PEM certificates into one string each (the BEGIN/END blocks, normalised). */
export function splitPem(text: string): string[] {
  const out: string[] = [];
  const re = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
  for (const m of text.matchAll(re)) out.push(m[0] + '\n');
  return out;
}

/** A positive random serial number, 128 bits, hex. */
export function randomSerial(): string {
  const b = randomBytes(16);
  b[0] &= 0x7f;
  if (b[0] === 0) b[0] = 1;
  return b.toString('hex');
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}
