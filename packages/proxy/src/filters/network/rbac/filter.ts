import type { Socket } from 'node:net';
import type { ConnInfo } from '../../../listener/conn-info.ts';
import type { Decision } from '../../../policy/engine.ts';
import { connectionFacts } from '../../../policy/conn-facts.ts';
import { deniedDetails } from '../../http/rbac/filter.ts';
import { logger } from '../../../core/log.ts';
import type { LiveNetworkFilter, NetworkFilterScope } from '../types.ts';
import type { NetworkRbacConfig } from './config.ts';

const log = logger('rbac');

const NETWORK_RBAC_METADATA = 'envoy.filters.network.rbac';
const FAILED: Decision = Object.freeze({ allowed: false, policy: '', log: false });

function decideSafely(engine: { decide(f: ReturnType<typeof connectionFacts>): Decision }, facts: ReturnType<typeof connectionFacts>): Decision {
  try {
    return engine.decide(facts);
  } catch (err) {
    log.error(`network rbac: evaluation failed, denying: ${(err as Error).message}`);
    return FAILED;
  }
}

/**
 * Envoy's network RBAC filter: shadow rules counted and written to the connection's dynamic
 * metadata, enforced rules close the connection with CONNECTION_TERMINATION_DETAILS
 * `rbac_access_denied_matched_policy[…]`. Stats `<stat_prefix>rbac.allowed|denied` and
 * `<stat_prefix>rbac.<shadow prefix>shadow_allowed|shadow_denied`.
 */
export function liveNetworkRbac(c: NetworkRbacConfig, scope: NetworkFilterScope): LiveNetworkFilter {
  const store = scope.store;
  const allowed = store.counter(`${c.statPrefix}allowed`);
  const denied = store.counter(`${c.statPrefix}denied`);
  const shadowAllowed = store.counter(`${c.statPrefix}${c.shadowPrefix}shadow_allowed`);
  const shadowDenied = store.counter(`${c.statPrefix}${c.shadowPrefix}shadow_denied`);
  return {
    onConnection(_socket: Socket, info: ConnInfo): 'continue' | 'close' {
      if (!c.engine && !c.shadow) return 'continue';
      const facts = connectionFacts(info);
      if (c.shadow) {
        const d = decideSafely(c.shadow, facts);
        (d.allowed ? shadowAllowed : shadowDenied).inc();
        const fields: Record<string, unknown> = { [`${c.shadowPrefix}shadow_engine_result`]: d.allowed ? 'allowed' : 'denied' };
        if (d.policy) fields[`${c.shadowPrefix}shadow_effective_policy_id`] = d.policy;
        const md = (info.metadata ??= new Map());
        md.set(NETWORK_RBAC_METADATA, { ...md.get(NETWORK_RBAC_METADATA), ...fields });
      }
      if (!c.engine) return 'continue';
      const d = decideSafely(c.engine, facts);
      if (d.allowed) { allowed.inc(); return 'continue'; }
      denied.inc();
      info.terminationDetails = deniedDetails(d.policy);
      return 'close';
    },
  };
}
