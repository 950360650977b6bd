import { Msg } from '../../../config/fields.ts';
import { compileEngine, type RbacEngine } from '../../../policy/engine.ts';
import type { NetworkFilterConfig, NetworkFilterExtension } from '../types.ts';
import { liveNetworkRbac } from './filter.ts';

export const NETWORK_RBAC_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';

const FIELDS = ['@type', 'rules', 'matcher', 'shadow_rules', 'shadow_matcher', 'shadow_rules_stat_prefix', 'stat_prefix', 'enforcement_type', 'delay_deny'];

export interface NetworkRbacConfig {
  readonly name: string;
  readonly engine: RbacEngine | undefined;
  readonly shadow: RbacEngine | undefined;
  /** `<stat_prefix>rbac.` as Envoy joins them. */
  readonly statPrefix: string;
  readonly shadowPrefix: string;
}

/** Envoy's statPrefixJoin: a prefix without a trailing dot gets one. */
function joinPrefix(prefix: string, token: string): string {
  if (prefix === '') return token;
  return prefix.endsWith('.') ? prefix + token : `${prefix}.${token}`;
}

/**
 * envoy.extensions.filters.network.rbac.v3.RBAC. The decision is taken when the connection is
 * handed to the filter chain (Envoy takes it on the first byte, ONE_TIME_ON_FIRST_BYTE); every
 * fact a network RBAC can see is known by then. CONTINUOUS enforcement only matters for
 * metadata other read filters set later, which Skua's read filters do not, so it is refused.
 */
export function compileNetworkRbac(name: string, m: Msg): NetworkRbacConfig {
  m.onlyFields(FIELDS);
  const mode = m.enumOf('enforcement_type', ['ONE_TIME_ON_FIRST_BYTE', 'CONTINUOUS'] as const);
  if (mode === 'CONTINUOUS') throw m.error('enforcement_type', 'CONTINUOUS is not supported yet');
  if (m.has('delay_deny')) throw m.error('delay_deny', 'is not supported yet');
  return {
    name,
    engine: compileEngine(m, 'rules', 'matcher', true),
    shadow: compileEngine(m, 'shadow_rules', 'shadow_matcher', true),
    statPrefix: joinPrefix(m.requiredStr('stat_prefix'), 'rbac.'),
    shadowPrefix: m.str('shadow_rules_stat_prefix'),
  };
}

export const NETWORK_RBAC_EXTENSION: NetworkFilterExtension = {
  typeUrl: NETWORK_RBAC_TYPE,
  legacyName: 'envoy.filters.network.rbac',
  compile(name: string, m: Msg | undefined): NetworkFilterConfig {
    const config = compileNetworkRbac(name, m ?? new Msg({}, name));
    return { name, live: (scope) => liveNetworkRbac(config, scope) };
  },
};
