/**
 * Workload credentials the local control plane signs: ES256 JWTs shaped like a
 * Kubernetes projected service-account token (`sub: system:serviceaccount:<ns>:<sa>`,
 * audience `istio-ca`). The CA accepts them as the `authorization: Bearer` of a
 * CreateCertificate call, as istiod accepts a projected token.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const TOKEN_AUDIENCE = 'istio-ca';
export const TOKEN_ISSUER = 'skua-controlplane';
const SA_PREFIX = 'system:serviceaccount:';

export interface ServiceAccount { readonly namespace: string; readonly serviceAccount: string }

export class TokenError extends Error {}

export class TokenAuthority {
  private readonly key: KeyObject;
  private readonly publicKey: KeyObject;

  private constructor(key: KeyObject) {
    this.key = key;
    this.publicKey = createPublicKey(key);
  }

  /** Loads `token-key.pem` from `stateDir`, creating it on first use; a fresh in-memory key without a dir. */
  static create(stateDir?: string): TokenAuthority {
    const file = stateDir ? join(stateDir, 'token-key.pem') : undefined;
    if (file && existsSync(file)) return new TokenAuthority(createPrivateKey(readFileSync(file)));
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    if (file && stateDir) {
      mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    }
    return new TokenAuthority(privateKey);
  }

  issue(sa: ServiceAccount, ttlSec = 3600, nowSec = Math.floor(Date.now() / 1000)): string {
    const header = { alg: 'ES256', typ: 'JWT' };
    const claims = {
      iss: TOKEN_ISSUER, aud: [TOKEN_AUDIENCE], sub: `${SA_PREFIX}${sa.namespace}:${sa.serviceAccount}`,
      iat: nowSec, nbf: nowSec, exp: nowSec + ttlSec,
      'kubernetes.io': { namespace: sa.namespace, serviceaccount: { name: sa.serviceAccount } },
    };
    const signingInput = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const sig = sign('sha256', Buffer.from(signingInput), { key: this.key, dsaEncoding: 'ieee-p1363' });
    return `${signingInput}.${sig.toString('base64url')}`;
  }

  /** The service account a token names; throws TokenError saying why it is not accepted. */
  verify(token: string, nowSec = Math.floor(Date.now() / 1000)): ServiceAccount {
    const parts = token.split('.');
    if (parts.length !== 3) throw new TokenError('malformed token');
    let header: { alg?: string }, claims: { aud?: string | string[]; sub?: string; exp?: number; nbf?: number; iss?: string };
    try {
      header = JSON.parse(Buffer.from(parts[0], 'base64url').toString()) as typeof header;
      claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString()) as typeof claims;
    } catch {
      throw new TokenError('malformed token');
    }
    if (header.alg !== 'ES256') throw new TokenError(`unsupported alg ${String(header.alg)}`);
    const ok = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), { key: this.publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(parts[2], 'base64url'));
    if (!ok) throw new TokenError('bad token signature');
    if (claims.iss !== TOKEN_ISSUER) throw new TokenError(`unexpected issuer ${String(claims.iss)}`);
    const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (!aud.includes(TOKEN_AUDIENCE)) throw new TokenError(`token audience is not ${TOKEN_AUDIENCE}`);
    if (typeof claims.exp !== 'number' || claims.exp <= nowSec) throw new TokenError('token expired');
    if (typeof claims.nbf === 'number' && claims.nbf > nowSec + 60) throw new TokenError('token not valid yet');
    const sub = claims.sub ?? '';
    const parts2 = sub.startsWith(SA_PREFIX) ? sub.slice(SA_PREFIX.length).split(':') : [];
    if (parts2.length !== 2 || !parts2[0] || !parts2[1]) throw new TokenError(`subject ${sub} is not a service account`);
    return { namespace: parts2[0], serviceAccount: parts2[1] };
  }
}

function b64url(s: string): string {
  return Buffer.from(s).toString('base64url');
}
