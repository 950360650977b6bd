import { createHmac, timingSafeEqual, verify as cryptoVerify, constants, type KeyObject } from 'node:crypto';
import type { Jwk, Jwks } from './jwks.ts';

/** jwt_verify_lib's status strings: the 401 body Envoy sends. */
export const Status = {
  JwtMissed: 'Jwt is missing',
  JwtNotYetValid: 'Jwt not yet valid',
  JwtExpired: 'Jwt is expired',
  JwtUnknownIssuer: 'Jwt issuer is not configured',
  JwtAudienceNotAllowed: 'Audiences in Jwt are not allowed',
  JwtVerificationFail: 'Jwt verification fails',
  JwtBadFormat: 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections',
  JwtHeaderParseErrorBadBase64: 'Jwt header is an invalid Base64url encoded',
  JwtHeaderBadJson: 'Jwt header is an invalid JSON',
  JwtHeaderBadAlg: 'Jwt header [alg] field is required and must be a string',
  JwtHeaderNotImplementedAlg: 'Jwt header [alg] is not supported',
  JwtPayloadParseErrorBadBase64: 'Jwt payload is an invalid Base64url encoded',
  JwtPayloadParseErrorBadJson: 'Jwt payload is an invalid JSON',
  JwtSignatureParseErrorBadBase64: 'Jwt signature is an invalid Base64url encoded',
  JwksKidAlgMismatch: "Jwks doesn't have key to match kid or alg from Jwt",
  JwksFetchFail: 'Jwks remote fetch is failed',
} as const;
export type StatusText = (typeof Status)[keyof typeof Status];

/** A JWT split and decoded (not yet verified). */
export interface ParsedJwt {
  readonly alg: string;
  readonly kid: string | undefined;
  readonly header: Record<string, unknown>;
  readonly payload: Record<string, unknown>;
  /** The payload segment as received (base64url), for forward_payload_header. */
  readonly payloadB64: string;
  readonly signed: Buffer;
  readonly signature: Buffer;
}

const B64URL = /^[A-Za-z0-9_-]*$/;
const ALGS = new Set(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'HS256', 'HS384', 'HS512']);

function decodeJson(seg: string): Record<string, unknown> | 'b64' | 'json' {
  if (!B64URL.test(seg)) return 'b64';
  let v: unknown;
  try { v = JSON.parse(Buffer.from(seg, 'base64url').toString('utf8')); } catch { return 'json'; }
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : 'json';
}

export function parseJwt(token: string): ParsedJwt | StatusText {
  const parts = token.split('.');
  if (parts.length !== 3) return Status.JwtBadFormat;
  const header = decodeJson(parts[0]);
  if (header === 'b64') return Status.JwtHeaderParseErrorBadBase64;
  if (header === 'json') return Status.JwtHeaderBadJson;
  if (typeof header.alg !== 'string') return Status.JwtHeaderBadAlg;
  if (!ALGS.has(header.alg)) return Status.JwtHeaderNotImplementedAlg;
  const payload = decodeJson(parts[1]);
  if (payload === 'b64') return Status.JwtPayloadParseErrorBadBase64;
  if (payload === 'json') return Status.JwtPayloadParseErrorBadJson;
  if (!B64URL.test(parts[2])) return Status.JwtSignatureParseErrorBadBase64;
  return {
    alg: header.alg, kid: typeof header.kid === 'string' ? header.kid : undefined, header, payload, payloadB64: parts[1],
    signed: Buffer.from(`${parts[0]}.${parts[1]}`, 'latin1'), signature: Buffer.from(parts[2], 'base64url'),
  };
}

/** nbf/exp against now (seconds) with the provider's clock skew. */
export function checkTime(jwt: ParsedJwt, nowSec: number, skewSec: number): StatusText | undefined {
  const { nbf, exp } = jwt.payload;
  if (typeof nbf === 'number' && nbf > nowSec + skewSec) return Status.JwtNotYetValid;
  if (typeof exp === 'number' && exp > 0 && nowSec > exp + skewSec) return Status.JwtExpired;
  return undefined;
}

/** `aud` (a string or a list) must share one entry with the allowed audiences, when any are configured. */
export function checkAudience(jwt: ParsedJwt, allowed: ReadonlySet<string>): boolean {
  if (allowed.size === 0) return true;
  const aud = jwt.payload.aud;
  const list = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  // jwt_verify_lib compares audiences with a trailing slash removed and the scheme optional.
  for (const a of list) if (typeof a === 'string' && allowed.has(normalizeAudience(a))) return true;
  return false;
}

export function normalizeAudience(a: string): string {
  let s = a.replace(/^https?:\/\//, '');
  if (s.endsWith('/')) s = s.slice(0, -1);
  return s;
}

const HASH: Record<string, string> = { '256': 'sha256', '384': 'sha384', '512': 'sha512' };
const CURVE: Record<string, string> = { ES256: 'P-256', ES384: 'P-384', ES512: 'P-521' };

function keyFits(k: Jwk, jwt: ParsedJwt): boolean {
  if (jwt.kid !== undefined && k.kid !== undefined && k.kid !== jwt.kid) return false;
  if (k.alg !== undefined && k.alg !== jwt.alg) return false;
  const family = jwt.alg.slice(0, 2);
  if (family === 'RS' || family === 'PS') return k.kty === 'RSA';
  if (family === 'ES') return k.kty === 'EC' && k.crv === CURVE[jwt.alg];
  if (family === 'HS') return k.kty === 'oct';
  return k.kty === 'OKP' && k.crv === 'Ed25519';
}

function verifyWith(key: KeyObject, jwt: ParsedJwt): boolean {
  const alg = jwt.alg;
  const hash = HASH[alg.slice(2)];
  try {
    switch (alg.slice(0, 2)) {
      case 'RS': return cryptoVerify(hash, jwt.signed, key, jwt.signature);
      case 'PS': return cryptoVerify(hash, jwt.signed, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }, jwt.signature);
      case 'ES': return cryptoVerify(hash, jwt.signed, { key, dsaEncoding: 'ieee-p1363' }, jwt.signature);
      case 'HS': {
        const mac = createHmac(hash, key).update(jwt.signed).digest();
        return mac.length === jwt.signature.length && timingSafeEqual(mac, jwt.signature);
      }
      default: return cryptoVerify(null, jwt.signed, key, jwt.signature);
    }
  } catch {
    return false;
  }
}

/** The signature against the keys that fit the JWT's kid and alg. */
export function verifySignature(jwt: ParsedJwt, jwks: Jwks): StatusText | undefined {
  let candidates = 0;
  for (const k of jwks) {
    if (!keyFits(k, jwt)) continue;
    candidates++;
    if (verifyWith(k.key, jwt)) return undefined;
  }
  return candidates === 0 ? Status.JwksKidAlgMismatch : Status.JwtVerificationFail;
}
