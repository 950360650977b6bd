import { readFileSync } from 'node:fs';
import { Msg } from '../../../config/fields.ts';
import { compileRouteMatch, type CompiledMatch } from '../../../http/route-match.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { parseJwks, type Jwks } from './jwks.ts';
import { normalizeAudience } from './verify.ts';
import { liveJwtAuthn } from './filter.ts';

export const JWT_AUTHN_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication';
const PER_ROUTE_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig';

/** Where a token may be: a header (with an optional value prefix such as "Bearer ") or a query parameter. */
export interface TokenLocation { readonly header?: string; readonly prefix: string; readonly param?: string }

export interface RemoteJwks {
  readonly uri: string;
  readonly cluster: string;
  readonly timeoutMs: number;
  readonly cacheMs: number;
  /** async_fetch: fetch when the filter goes live and refresh before expiry, instead of on first use. */
  readonly asyncFetch: boolean;
  readonly failedRefetchMs: number;
}

export interface Provider {
  readonly name: string;
  readonly issuer: string;
  /** Normalised (no scheme, no trailing slash), as jwt_verify_lib compares them. */
  readonly audiences: ReadonlySet<string>;
  readonly localJwks: Jwks | undefined;
  readonly remote: RemoteJwks | undefined;
  readonly locations: readonly TokenLocation[];
  readonly forward: boolean;
  readonly forwardPayloadHeader: string;
  readonly padForwardPayloadHeader: boolean;
  readonly payloadInMetadata: string;
  readonly headerInMetadata: string;
  readonly spaceDelimitedClaims: readonly string[];
  readonly claimToHeaders: ReadonlyArray<{ readonly header: string; readonly claim: string }>;
  readonly clockSkewSec: number;
}

export type Requirement =
  | { readonly kind: 'provider'; readonly provider: Provider; readonly audiences: ReadonlySet<string> | undefined }
  | { readonly kind: 'any' | 'all'; readonly list: readonly Requirement[] }
  | { readonly kind: 'allow_missing' | 'allow_missing_or_failed' };

export interface JwtRule { readonly match: CompiledMatch; readonly requires: Requirement | undefined }

export interface JwtAuthnConfig {
  readonly providers: ReadonlyMap<string, Provider>;
  readonly rules: readonly JwtRule[];
  readonly requirementMap: ReadonlyMap<string, Requirement>;
  readonly bypassCorsPreflight: boolean;
  readonly stripFailureResponse: boolean;
  readonly statPrefix: string;
}

/** PerRouteConfig: off for the route, or a named requirement from requirement_map. */
export type JwtPerRoute = { readonly disabled: true } | { readonly disabled: false; readonly requires: Requirement };

const PROVIDER_FIELDS = ['issuer', 'audiences', 'remote_jwks', 'local_jwks', 'forward', 'from_headers', 'from_params', 'forward_payload_header',
  'pad_forward_payload_header', 'payload_in_metadata', 'header_in_metadata', 'normalize_payload_in_metadata', 'claim_to_headers',
  'clock_skew_seconds', 'jwt_cache_config', 'clear_route_cache', 'subjects', 'require_expiration', 'max_lifetime', 'from_cookies',
  'failed_status_in_metadata'];

function compileProvider(name: string, m: Msg): Provider {
  m.onlyFields(PROVIDER_FIELDS);
  for (const f of ['subjects', 'max_lifetime', 'from_cookies', 'failed_status_in_metadata']) if (m.has(f)) throw m.error(f, 'is not supported yet');
  if (m.bool('require_expiration')) throw m.error('require_expiration', 'is not supported yet');
  // clear_route_cache: routes are chosen before the filters run; nothing to clear.
  let localJwks: Jwks | undefined, remote: RemoteJwks | undefined;
  const local = m.msg('local_jwks');
  if (local) localJwks = readLocalJwks(local);
  const r = m.msg('remote_jwks');
  if (r) {
    const http = r.requiredMsg('http_uri');
    const uri = http.requiredStr('uri');
    try { new URL(uri); } catch { throw http.error('uri', `not a URL: ${uri}`); }
    if (r.has('retry_policy')) throw r.error('retry_policy', 'is not supported yet');
    const af = r.msg('async_fetch');
    remote = {
      uri, cluster: http.requiredStr('cluster'), timeoutMs: http.durationMs('timeout', 1000),
      cacheMs: r.durationMs('cache_duration', 600_000), asyncFetch: af !== undefined,
      failedRefetchMs: af?.durationMs('failed_refetch_duration', 1000) ?? 1000,
    };
  }
  if (!localJwks && !remote) throw m.error('', 'one of local_jwks, remote_jwks is required');
  const locations: TokenLocation[] = [
    ...m.list('from_headers').map((h) => ({ header: h.requiredStr('name').toLowerCase(), prefix: h.str('value_prefix') })),
    ...m.strList('from_params').map((p) => ({ param: p, prefix: '' })),
  ];
  if (locations.length === 0) locations.push({ header: 'authorization', prefix: 'Bearer ' }, { param: 'access_token', prefix: '' });
  const norm = m.msg('normalize_payload_in_metadata');
  return {
    name,
    issuer: m.str('issuer'),
    audiences: new Set(m.strList('audiences').map(normalizeAudience)),
    localJwks, remote, locations,
    forward: m.bool('forward'),
    forwardPayloadHeader: m.str('forward_payload_header').toLowerCase(),
    padForwardPayloadHeader: m.bool('pad_forward_payload_header'),
    payloadInMetadata: m.str('payload_in_metadata'),
    headerInMetadata: m.str('header_in_metadata'),
    spaceDelimitedClaims: norm?.strList('space_delimited_claims') ?? [],
    claimToHeaders: m.list('claim_to_headers').map((c) => ({ header: c.requiredStr('header_name').toLowerCase(), claim: c.requiredStr('claim_name') })),
    clockSkewSec: m.num('clock_skew_seconds', 60),
  };
}

function readLocalJwks(m: Msg): Jwks {
  let text: string;
  if (m.has('inline_string')) text = m.str('inline_string');
  else if (m.has('inline_bytes')) text = Buffer.from(m.str('inline_bytes'), 'base64').toString('utf8');
  else if (m.has('filename')) {
    try { text = readFileSync(m.str('filename'), 'utf8'); } catch (err) { throw m.error('filename', (err as Error).message); }
  } else throw m.error('', 'one of inline_string, inline_bytes, filename is required');
  try { return parseJwks(text); } catch (err) { throw m.error('', (err as Error).message); }
}

function compileRequirement(m: Msg, providers: ReadonlyMap<string, Provider>): Requirement {
  const provider = (pm: Msg, key: string): Provider => {
    const name = pm.requiredStr(key);
    const p = providers.get(name);
    if (!p) throw pm.error(key, `unknown provider ${JSON.stringify(name)}`);
    return p;
  };
  if (m.has('provider_name')) return { kind: 'provider', provider: provider(m, 'provider_name'), audiences: undefined };
  if (m.has('provider_and_audiences')) {
    const pa = m.requiredMsg('provider_and_audiences');
    return { kind: 'provider', provider: provider(pa, 'provider_name'), audiences: new Set(pa.strList('audiences').map(normalizeAudience)) };
  }
  for (const k of ['requires_any', 'requires_all'] as const) {
    if (!m.has(k)) continue;
    const list = m.requiredMsg(k).list('requirements').map((r) => compileRequirement(r, providers));
    if (list.length < 2) throw m.error(`${k}.requirements`, 'at least two requirements are required');
    return { kind: k === 'requires_any' ? 'any' : 'all', list };
  }
  if (m.has('allow_missing')) return { kind: 'allow_missing' };
  if (m.has('allow_missing_or_failed')) return { kind: 'allow_missing_or_failed' };
  throw m.error('', 'one of provider_name, provider_and_audiences, requires_any, requires_all, allow_missing, allow_missing_or_failed is required');
}

export function compileJwtAuthn(m: Msg): JwtAuthnConfig {
  m.onlyFields(['@type', 'providers', 'rules', 'requirement_map', 'bypass_cors_preflight', 'strip_failure_response', 'stat_prefix', 'filter_state_rules']);
  if (m.has('filter_state_rules')) throw m.error('filter_state_rules', 'is not supported yet');
  const providers = new Map<string, Provider>();
  const pm = m.msg('providers');
  for (const name of pm ? Object.keys(pm.raw) : []) providers.set(name, compileProvider(name, (pm as Msg).requiredMsg(name)));
  const requirementMap = new Map<string, Requirement>();
  const rm = m.msg('requirement_map');
  for (const name of rm ? Object.keys(rm.raw) : []) requirementMap.set(name, compileRequirement((rm as Msg).requiredMsg(name), providers));
  const rules = m.list('rules').map((r): JwtRule => {
    const match = compileRouteMatch(r.requiredMsg('match'));
    if (r.has('requires')) return { match, requires: compileRequirement(r.requiredMsg('requires'), providers) };
    if (r.has('requirement_name')) {
      const req = requirementMap.get(r.str('requirement_name'));
      if (!req) throw r.error('requirement_name', `not in requirement_map: ${r.str('requirement_name')}`);
      return { match, requires: req };
    }
    return { match, requires: undefined };
  });
  return {
    providers, rules, requirementMap,
    bypassCorsPreflight: m.bool('bypass_cors_preflight'),
    stripFailureResponse: m.bool('strip_failure_response'),
    statPrefix: m.str('stat_prefix'),
  };
}

function compilePerRoute(m: Msg, c: JwtAuthnConfig): JwtPerRoute {
  const type = m.str('@type');
  if (type && type !== PER_ROUTE_TYPE) throw m.error('@type', `expected ${PER_ROUTE_TYPE}, got ${type}`);
  if (m.bool('disabled')) return { disabled: true };
  const name = m.requiredStr('requirement_name');
  const req = c.requirementMap.get(name);
  if (!req) throw m.error('requirement_name', `not in the filter's requirement_map: ${name}`);
  return { disabled: false, requires: req };
}

export const JWT_AUTHN_EXTENSION: HttpFilterExtension = {
  typeUrl: JWT_AUTHN_TYPE,
  legacyName: 'envoy.filters.http.jwt_authn',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    const config = compileJwtAuthn(m ?? new Msg({}, name));
    return { name, perRoute: (pm: Msg) => compilePerRoute(pm, config), live: (scope) => liveJwtAuthn(name, config, scope) };
  },
};
