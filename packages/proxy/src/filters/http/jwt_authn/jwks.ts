import { createPublicKey, createSecretKey, type KeyObject, type JsonWebKey } from 'node:crypto';

/** One usable key of a JWKS: its KeyObject made once, when the JWKS is loaded. */
export interface Jwk {
  readonly kid: string | undefined;
  /** The key's own `alg`, if it names one. */
  readonly alg: string | undefined;
  readonly kty: 'RSA' | 'EC' | 'OKP' | 'oct';
  /** EC curve (P-256, P-384, P-521) or OKP curve (Ed25519). */
  readonly crv: string | undefined;
  readonly key: KeyObject;
}

export type Jwks = readonly Jwk[];

/**
 * Parses a JWKS document ({"keys": [...]}, or a single JWK). Keys that cannot be used (unknown
 * kty, `use` other than sig, bad material) are skipped, as jwt_verify_lib does; a document
 * without one usable key is an error.
 */
export function parseJwks(text: string): Jwks {
  let doc: unknown;
  try { doc = JSON.parse(text); } catch { throw new Error('Jwks is not valid JSON'); }
  if (doc === null || typeof doc !== 'object') throw new Error('Jwks is not a JSON object');
  const list = Array.isArray((doc as { keys?: unknown }).keys) ? (doc as { keys: unknown[] }).keys : [doc];
  const out: Jwk[] = [];
  for (const k of list) {
    const jwk = readJwk(k);
    if (jwk) out.push(jwk);
  }
  if (out.length === 0) throw new Error('Jwks has no usable key');
  return out;
}

function readJwk(raw: unknown): Jwk | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  const k = raw as Record<string, unknown>;
  if (k.use !== undefined && k.use !== 'sig') return undefined;
  const kid = typeof k.kid === 'string' ? k.kid : undefined;
  const alg = typeof k.alg === 'string' ? k.alg : undefined;
  const crv = typeof k.crv === 'string' ? k.crv : undefined;
  try {
    switch (k.kty) {
      case 'RSA': case 'EC': case 'OKP':
        return { kid, alg, kty: k.kty, crv, key: createPublicKey({ key: publicPart(k) as JsonWebKey, format: 'jwk' }) };
      case 'oct': {
        if (typeof k.k !== 'string') return undefined;
        return { kid, alg, kty: 'oct', crv, key: createSecretKey(Buffer.from(k.k, 'base64url')) };
      }
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** Only the public members: a JWKS that (wrongly) carries private parts must not yield a private key. */
function publicPart(k: Record<string, unknown>): Record<string, unknown> {
  if (k.kty === 'RSA') return { kty: 'RSA', n: k.n, e: k.e };
  return { kty: k.kty, crv: k.crv, x: k.x, ...(k.kty === 'EC' ? { y: k.y } : {}) };
}
