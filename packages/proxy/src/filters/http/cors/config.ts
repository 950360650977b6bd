import { Msg } from '../../../config/fields.ts';
import { probability } from '../../../config/percent.ts';
import { compileStringMatcher } from '../../../matchers/string-matcher.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { liveCors } from './filter.ts';

export const CORS_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors';
export const CORS_POLICY_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy';
export const CORS_NAME = 'envoy.filters.http.cors';


const POLICY_FIELDS = ['@type', 'allow_origin_string_match', 'allow_methods', 'allow_headers', 'expose_headers', 'max_age',
  'allow_credentials', 'allow_private_network_access', 'forward_not_matching_preflights', 'filter_enabled', 'shadow_enabled'] as const;

/**
 * One level's envoy.extensions.filters.http.cors.v3.CorsPolicy (route, virtual host or route
 * configuration typed_per_filter_config), compiled once. Unset fields stay unset so that a
 * less specific level can supply them, as in Envoy.
 */
export interface CorsPolicy {
  readonly allowOrigins: ReadonlyArray<(origin: string) => boolean>;
  /** Some allow_origin_string_match matches the literal "*": every origin is allowed (Envoy). */
  readonly allowAnyOrigin: boolean;
  readonly allowMethods: string;
  readonly allowHeaders: string;
  readonly exposeHeaders: string;
  readonly maxAge: string;
  readonly allowCredentials: boolean | undefined;
  readonly allowPrivateNetworkAccess: boolean | undefined;
  readonly forwardNotMatchingPreflights: boolean | undefined;
  /** filter_enabled.default_value as a probability; undefined = enabled. */
  readonly filterEnabled: number | undefined;
  /** shadow_enabled.default_value as a probability; undefined = off. */
  readonly shadowEnabled: number | undefined;
}

/** RuntimeFractionalPercent → probability (default_value only: Skua has no runtime layer). */
function runtimeFraction(m: Msg | undefined): number | undefined {
  if (!m) return undefined;
  return probability(m.msg('default_value'), 0);
}

function optBool(m: Msg, key: string): boolean | undefined {
  return m.has(key) ? m.bool(key) : undefined;
}

export function compileCorsPolicy(m: Msg): CorsPolicy {
  const type = m.str('@type');
  if (type && type !== CORS_POLICY_TYPE) throw m.error('@type', `expected ${CORS_POLICY_TYPE}, got ${type}`);
  m.onlyFields(POLICY_FIELDS);
  const allowOrigins = m.list('allow_origin_string_match').map(compileStringMatcher);
  return {
    allowOrigins,
    allowAnyOrigin: allowOrigins.some((match) => match('*')),
    allowMethods: m.str('allow_methods'),
    allowHeaders: m.str('allow_headers'),
    exposeHeaders: m.str('expose_headers'),
    maxAge: m.str('max_age'),
    allowCredentials: optBool(m, 'allow_credentials'),
    allowPrivateNetworkAccess: optBool(m, 'allow_private_network_access'),
    forwardNotMatchingPreflights: optBool(m, 'forward_not_matching_preflights'),
    filterEnabled: runtimeFraction(m.msg('filter_enabled')),
    shadowEnabled: runtimeFraction(m.msg('shadow_enabled')),
  };
}

/**
 * The policy a request sees: each field from the most specific level that sets it (a non-empty
 * list or string, a set BoolValue), enabled/shadow from the most specific level only (Envoy's
 * CorsFilter accessors over getAllPerFilterConfig).
 */
export interface EffectiveCors {
  readonly allowOrigins: ReadonlyArray<(origin: string) => boolean>;
  readonly allowAnyOrigin: boolean;
  readonly allowMethods: string;
  readonly allowHeaders: string;
  readonly exposeHeaders: string;
  readonly maxAge: string;
  readonly allowCredentials: boolean;
  readonly allowPrivateNetworkAccess: boolean;
  readonly forwardNotMatchingPreflights: boolean;
  readonly filterEnabled: number;
  readonly shadowEnabled: number;
}

/** `levels[0]` is the most specific (route), then virtual host, then route configuration. */
export function mergeCorsPolicies(levels: readonly CorsPolicy[]): EffectiveCors | undefined {
  if (levels.length === 0) return undefined;
  const origins = levels.find((p) => p.allowOrigins.length > 0);
  const str = (k: 'allowMethods' | 'allowHeaders' | 'exposeHeaders' | 'maxAge'): string => levels.find((p) => p[k] !== '')?.[k] ?? '';
  const bool = (k: 'allowCredentials' | 'allowPrivateNetworkAccess' | 'forwardNotMatchingPreflights', fallback: boolean): boolean =>
    levels.find((p) => p[k] !== undefined)?.[k] ?? fallback;
  return {
    allowOrigins: origins?.allowOrigins ?? [],
    allowAnyOrigin: origins?.allowAnyOrigin ?? false,
    allowMethods: str('allowMethods'),
    allowHeaders: str('allowHeaders'),
    exposeHeaders: str('exposeHeaders'),
    maxAge: str('maxAge'),
    allowCredentials: bool('allowCredentials', false),
    allowPrivateNetworkAccess: bool('allowPrivateNetworkAccess', false),
    forwardNotMatchingPreflights: bool('forwardNotMatchingPreflights', true),
    filterEnabled: levels[0].filterEnabled ?? 1,
    shadowEnabled: levels[0].shadowEnabled ?? 0,
  };
}

export const CORS_EXTENSION: HttpFilterExtension = {
  typeUrl: CORS_TYPE,
  legacyName: CORS_NAME,
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    // envoy.extensions.filters.http.cors.v3.Cors has no fields: policies come per route.
    (m ?? new Msg({}, name)).onlyFields(['@type']);
    return {
      name,
      perRoute: (pm: Msg) => compileCorsPolicy(pm),
      live: (scope) => liveCors(name, scope),
    };
  },
};
