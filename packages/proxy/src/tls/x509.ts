/**
 * X.509 work shared by the proxy's secret manager and the control plane's CA, with node:crypto only:
 * P-256 keys, CSRs with a SPIFFE URI SAN (PKCS#10 written here: a few fixed DER structures),
 * certificate facts. Certificate *issuance* is the CA's (packages/controlplane, @peculiar/x509):
 * a sidecar or ztunnel never loads an ASN.1 library (@peculiar/x509, asn1js, tsyringe and
 * reflect-metadata held ~14 MB of memory in every process that made a CSR).
 */
import { createPrivateKey, KeyObject, randomBytes, sign, webcrypto, X509Certificate as NodeX509 } from 'node:crypto';

export type CryptoKey = webcrypto.CryptoKey;
export type CryptoKeyPair = webcrypto.CryptoKeyPair;

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

/** A DER element: tag, definite length, contents. */
function der(tag: number, ...parts: Uint8Array[]): Buffer {
  const body = Buffer.concat(parts);
  const n = body.length;
  const len = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([tag, ...len]), body]);
}

// OIDs, DER-encoded: ecdsa-with-SHA256 (1.2.840.10045.4.3.2), PKCS#9 extensionRequest
// (1.2.840.113549.1.9.14), subjectAltName (2.5.29.17).
const ECDSA_WITH_SHA256 = Buffer.from('06082a8648ce3d040302', 'hex');
const EXTENSION_REQUEST = Buffer.from('06092a864886f70d01090e', 'hex');
const SUBJECT_ALT_NAME = Buffer.from('0603551d11', 'hex');

/**
 * A PKCS#10 request for `uri` (no subject, SAN only, as istio-agent sends), signed ECDSA-SHA256:
 * CertificationRequest { info { version 0, subject {}, spki, [0] { extensionRequest { SAN } } },
 * algorithm, signature }. The SAN is a uniformResourceIdentifier ([6] IA5String), not critical.
 */
export async function makeCsr(keys: CryptoKeyPair, uri: string): Promise<string> {
  const spki = Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey));
  const san = der(0x30, SUBJECT_ALT_NAME, der(0x04, der(0x30, der(0x86, Buffer.from(uri, 'ascii')))));
  const info = der(0x30, der(0x02, Buffer.of(0)), der(0x30), spki, der(0xa0, der(0x30, EXTENSION_REQUEST, der(0x31, der(0x30, san)))));
  const signature = sign('sha256', info, KeyObject.from(keys.privateKey));
  return pem('CERTIFICATE REQUEST', der(0x30, info, der(0x30, ECDSA_WITH_SHA256), der(0x03, Buffer.of(0), signature)));
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
