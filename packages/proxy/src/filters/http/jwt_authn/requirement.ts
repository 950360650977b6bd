import type { Headers } from '../../../http/exchange.ts';
import { queryParameter } from '../../../http/route-match.ts';
import type { Provider, Requirement, TokenLocation } from './config.ts';
import type { Jwks } from './jwks.ts';
import { checkAudience, checkTime, parseJwt, Status, verifySignature, type ParsedJwt, type StatusText } from './verify.ts';

/** A verified token and where it came from, for the provider's success actions. */
export interface Verified { readonly provider: Provider; readonly jwt: ParsedJwt; readonly location: TokenLocation }

/** What requirement checking needs from the request and the live filter. */
export interface VerifyContext {
  readonly headers: Headers;
  readonly path: string;
  readonly nowSec: number;
  readonly allProviders: readonly Provider[];
  jwksOf(p: Provider): Jwks | Promise<Jwks | undefined>;
  /** Each provider is checked once per request, whatever the requirement tree asks. */
  readonly memo: Map<Provider, Promise<StatusText | undefined>>;
  readonly verified: Verified[];
}

const JWT_CHARS = /^[A-Za-z0-9._-]+/;

export function extractTokens(p: Provider, headers: Headers, path: string): Array<{ token: string; location: TokenLocation }> {
  const out: Array<{ token: string; location: TokenLocation }> = [];
  for (const loc of p.locations) {
    let value: string | undefined;
    if (loc.header !== undefined) {
      const v = headers[loc.header];
      value = Array.isArray(v) ? v[0] : v;
      if (value === undefined) continue;
      if (loc.prefix) {
        if (!value.startsWith(loc.prefix)) continue;
        value = value.slice(loc.prefix.length);
      }
      // The token ends at the first character a JWT cannot hold (Envoy's value_prefix extraction).
      const m = JWT_CHARS.exec(value.trimStart());
      value = m ? m[0] : '';
    } else if (loc.param !== undefined) {
      value = queryParameter(path, loc.param);
    }
    if (value) out.push({ token: value, location: loc });
  }
  return out;
}

/** undefined = satisfied; otherwise the status Envoy reports. */
export async function checkRequirement(r: Requirement, ctx: VerifyContext): Promise<StatusText | undefined> {
  switch (r.kind) {
    case 'provider': return r.audiences ? verifyProvider(r.provider, r.audiences, ctx) : memoProvider(r.provider, ctx);
    case 'all': {
      for (const c of r.list) { const s = await checkRequirement(c, ctx); if (s !== undefined) return s; }
      return undefined;
    }
    case 'any': {
      const results = await Promise.all(r.list.map((c) => checkRequirement(c, ctx)));
      return combineAny(results);
    }
    case 'allow_missing': {
      const s = await anyProvider(ctx);
      return s === Status.JwtMissed ? undefined : s;
    }
    default:
      await anyProvider(ctx);
      return undefined;
  }
}

async function anyProvider(ctx: VerifyContext): Promise<StatusText | undefined> {
  if (ctx.allProviders.length === 0) return Status.JwtMissed;
  return combineAny(await Promise.all(ctx.allProviders.map((p) => memoProvider(p, ctx))));
}

/**
 * requires_any: satisfied when one child is. Otherwise the error reported ranks as Envoy's
 * AnyVerifier does: a real failure over a wrong issuer (the token belongs to another provider)
 * over a missing token.
 */
function combineAny(results: ReadonlyArray<StatusText | undefined>): StatusText | undefined {
  if (results.includes(undefined)) return undefined;
  let best: StatusText = Status.JwtMissed;
  for (const s of results) {
    if (s === undefined || s === Status.JwtMissed) continue;
    if (s !== Status.JwtUnknownIssuer) return s;
    best = s;
  }
  return best;
}

function memoProvider(p: Provider, ctx: VerifyContext): Promise<StatusText | undefined> {
  let r = ctx.memo.get(p);
  if (!r) { r = verifyProvider(p, p.audiences, ctx); ctx.memo.set(p, r); }
  return r;
}

/** Every token found in the provider's locations must verify; none found is JwtMissed. */
async function verifyProvider(p: Provider, audiences: ReadonlySet<string>, ctx: VerifyContext): Promise<StatusText | undefined> {
  const tokens = extractTokens(p, ctx.headers, ctx.path);
  if (tokens.length === 0) return Status.JwtMissed;
  for (const { token, location } of tokens) {
    const jwt = parseJwt(token);
    if (typeof jwt === 'string') return jwt;
    // Envoy's order: issuer, time window, audiences, then the keys (a remote fetch only for a plausible token).
    if (p.issuer && jwt.payload.iss !== p.issuer) return Status.JwtUnknownIssuer;
    const t = checkTime(jwt, ctx.nowSec, p.clockSkewSec);
    if (t) return t;
    if (!checkAudience(jwt, audiences)) return Status.JwtAudienceNotAllowed;
    let jwks = ctx.jwksOf(p);
    if (jwks instanceof Promise) {
      const fetched = await jwks;
      if (!fetched) return Status.JwksFetchFail;
      jwks = fetched;
    }
    const s = verifySignature(jwt, jwks);
    if (s) return s;
    ctx.verified.push({ provider: p, jwt, location });
  }
  return undefined;
}
