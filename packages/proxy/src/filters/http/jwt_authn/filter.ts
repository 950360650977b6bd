import type { Headers } from '../../../http/exchange.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterScope, LiveHttpFilter } from '../types.ts';
import type { JwtAuthnConfig, JwtPerRoute, Provider, Requirement } from './config.ts';
import type { Jwks } from './jwks.ts';
import { RemoteJwksCache } from './remote-jwks.ts';
import { checkRequirement, type Verified, type VerifyContext } from './requirement.ts';
import { Status, type StatusText } from './verify.ts';
import { logger } from '../../../core/log.ts';

const log = logger('jwt');

/** The metadata namespace Envoy's jwt_authn writes, whatever the filter's configured name. */
export const JWT_METADATA = 'envoy.filters.http.jwt_authn';

/** Envoy's response code details for a JWT failure: `jwt_authn_access_denied{Jwt_is_missing}`. */
export function jwtDetails(status: string): string {
  return `jwt_authn_access_denied{${status.split(' ').join('_')}}`;
}

/**
 * Envoy's JWT authentication filter: the first rule whose match fits the request (or the
 * route's PerRouteConfig) names a requirement; tokens are taken from the providers' locations,
 * verified (issuer, nbf/exp with clock skew, audiences, signature against the JWKS), and on
 * success the payload goes to dynamic metadata and headers. A failure is a 401 (403 for
 * audiences) with the status text as body and `www-authenticate: Bearer realm=…`.
 */
export function liveJwtAuthn(name: string, c: JwtAuthnConfig, scope: HttpFilterScope): LiveHttpFilter {
  const p = scope.store.scope('http', 'envoy_http_conn_manager_prefix', scope.statPrefix);
  const pre = `jwt_authn.${c.statPrefix}`;
  const allowed = p.counter(`${pre}allowed`);
  const denied = p.counter(`${pre}denied`);
  const bypassed = p.counter(`${pre}cors_preflight_bypassed`);
  const fetchOk = p.counter(`${pre}jwks_fetch_success`);
  const fetchFailed = p.counter(`${pre}jwks_fetch_failed`);
  const remote = new Map<Provider, RemoteJwksCache>();
  for (const prov of c.providers.values()) {
    if (!prov.localJwks && prov.remote) remote.set(prov, new RemoteJwksCache(prov.remote, scope.clusters, fetchOk, fetchFailed));
  }
  const allProviders = [...c.providers.values()];
  const jwksOf = (prov: Provider): Jwks | Promise<Jwks | undefined> =>
    prov.localJwks ?? (remote.get(prov) as RemoteJwksCache).get();

  const requirementFor = (cb: FilterCallbacks): Requirement | undefined => {
    const route = cb.perRoute<JwtPerRoute>(name);
    if (route) return route.disabled ? undefined : route.requires;
    for (const r of c.rules) {
      if (r.match.connect || !r.match.path(cb.ex.path)) continue;
      if (r.match.headers.every((h) => h(cb.ex))) return r.requires;
    }
    return undefined;
  };

  const deny = (cb: FilterCallbacks, status: StatusText): void => {
    denied.inc();
    const ex = cb.ex;
    const q = ex.path.indexOf('?');
    const uri = `${ex.scheme}://${ex.authority}${q < 0 ? ex.path : ex.path.slice(0, q)}`;
    const code = status === Status.JwtAudienceNotAllowed ? 403 : 401;
    if (c.stripFailureResponse) { cb.sendLocalReply(code, undefined, '-', jwtDetails(status)); return; }
    const challenge = status === Status.JwtMissed ? `Bearer realm="${uri}"` : `Bearer realm="${uri}", error="invalid_token"`;
    cb.sendLocalReply(code, status, '-', jwtDetails(status), { 'www-authenticate': challenge });
  };

  return {
    decodeHeaders(cb: FilterCallbacks): FilterStatus {
      const ex = cb.ex;
      if (c.bypassCorsPreflight && ex.method === 'OPTIONS' && ex.headers.origin !== undefined && ex.headers['access-control-request-method'] !== undefined) {
        bypassed.inc();
        return 'continue';
      }
      const req = requirementFor(cb);
      if (!req) return 'continue';
      const ctx: VerifyContext = {
        headers: ex.headers, path: ex.path, nowSec: Math.floor(Date.now() / 1000), allProviders, jwksOf,
        memo: new Map(), verified: [],
      };
      checkRequirement(req, ctx).then((status) => {
        if (status !== undefined) { deny(cb, status); return; }
        for (const v of ctx.verified) applySuccess(cb, v);
        allowed.inc();
        cb.continueDecoding();
      }, (err: unknown) => {
        // Fail closed: an unexpected error is a failed verification.
        log.error(`jwt_authn: verification failed unexpectedly: ${(err as Error).message}`);
        deny(cb, Status.JwtVerificationFail);
      });
      return 'stop';
    },
  };
}

/** A verified token's effects: metadata, forwarded payload, claim headers, and the token removed unless `forward`. */
function applySuccess(cb: FilterCallbacks, v: Verified): void {
  const prov = v.provider;
  const headers: Headers = cb.ex.headers;
  if (prov.payloadInMetadata) cb.rec.setMetadata(JWT_METADATA, { [prov.payloadInMetadata]: normalizePayload(v.jwt.payload, prov.spaceDelimitedClaims) });
  if (prov.headerInMetadata) cb.rec.setMetadata(JWT_METADATA, { [prov.headerInMetadata]: v.jwt.header });
  if (prov.forwardPayloadHeader) {
    let b64 = v.jwt.payloadB64;
    if (prov.padForwardPayloadHeader) b64 += '='.repeat((4 - (b64.length % 4)) % 4);
    headers[prov.forwardPayloadHeader] = b64;
  }
  for (const { header, claim } of prov.claimToHeaders) {
    const value = v.jwt.payload[claim];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') headers[header] = String(value);
  }
  if (!prov.forward && v.location.header !== undefined) delete headers[v.location.header];
}

/** normalize_payload_in_metadata: space-delimited claims (like `scope`) become lists. */
function normalizePayload(payload: Record<string, unknown>, claims: readonly string[]): Record<string, unknown> {
  if (claims.length === 0) return payload;
  const out = { ...payload };
  for (const k of claims) {
    const v = out[k];
    if (typeof v === 'string') out[k] = v.split(' ').filter((s) => s !== '');
  }
  return out;
}
