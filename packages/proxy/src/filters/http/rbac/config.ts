import { Msg } from '../../../config/fields.ts';
import { compileEngine, type RbacEngine } from '../../../policy/engine.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { liveHttpRbac } from './filter.ts';

export const HTTP_RBAC_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';
const PER_ROUTE_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute';

const FIELDS = ['@type', 'rules', 'rules_stat_prefix', 'matcher', 'shadow_rules', 'shadow_matcher', 'shadow_rules_stat_prefix', 'track_per_rule_stats'];

/** One level of HTTP RBAC (the filter, or a route's RBACPerRoute): engines undefined = not enforced. */
export interface HttpRbacSettings {
  readonly engine: RbacEngine | undefined;
  readonly shadow: RbacEngine | undefined;
  readonly rulesPrefix: string;
  readonly shadowPrefix: string;
}

/** envoy.extensions.filters.http.rbac.v3.RBAC compiled once. */
export function compileHttpRbac(m: Msg): HttpRbacSettings {
  m.onlyFields(FIELDS);
  if (m.bool('track_per_rule_stats')) throw m.error('track_per_rule_stats', 'per-rule stats are not supported yet');
  return {
    engine: compileEngine(m, 'rules', 'matcher', false),
    shadow: compileEngine(m, 'shadow_rules', 'shadow_matcher', false),
    rulesPrefix: m.str('rules_stat_prefix'),
    shadowPrefix: m.str('shadow_rules_stat_prefix'),
  };
}

/** A route with RBACPerRoute and no `rbac` turns RBAC off there (Envoy: "If absent, RBAC policy will be disabled"). */
export const RBAC_OFF: HttpRbacSettings = Object.freeze({ engine: undefined, shadow: undefined, rulesPrefix: '', shadowPrefix: '' });

export function compileRbacPerRoute(m: Msg): HttpRbacSettings {
  const type = m.str('@type');
  if (type && type !== PER_ROUTE_TYPE) throw m.error('@type', `expected ${PER_ROUTE_TYPE}, got ${type}`);
  const inner = m.msg('rbac');
  return inner ? compileHttpRbac(inner) : RBAC_OFF;
}

export const HTTP_RBAC_EXTENSION: HttpFilterExtension = {
  typeUrl: HTTP_RBAC_TYPE,
  legacyName: 'envoy.filters.http.rbac',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    const settings = compileHttpRbac(m ?? new Msg({}, name));
    return {
      name,
      perRoute: compileRbacPerRoute,
      live: (scope) => liveHttpRbac(name, settings, scope),
    };
  },
};
