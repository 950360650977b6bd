import type { Counter } from '../../../stats/store.ts';
import type { Decision } from '../../../policy/engine.ts';
import { requestFacts } from '../../../policy/conn-facts.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterScope, LiveHttpFilter } from '../types.ts';
import type { HttpRbacSettings } from './config.ts';
import { logger } from '../../../core/log.ts';

const log = logger('rbac');

/** Metadata namespace Envoy's HTTP RBAC filter writes, whatever the filter's own name. */
export const RBAC_METADATA = 'envoy.filters.http.rbac';
export const DENIED_BODY = 'RBAC: access denied';

interface RbacCounters { readonly allowed: Counter; readonly denied: Counter; readonly shadowAllowed: Counter; readonly shadowDenied: Counter }

/** Deny reasons as Envoy's RESPONSE_CODE_DETAILS (and network CONNECTION_TERMINATION_DETAILS) say them. */
export function deniedDetails(policy: string): string {
  return `rbac_access_denied_matched_policy[${policy || 'none'}]`;
}

const FAILED: Decision = Object.freeze({ allowed: false, policy: '', log: false });

/** Evaluation must not throw past the filter: any failure denies (fail closed). */
function safeDecide(decide: () => Decision): Decision {
  try {
    return decide();
  } catch (err) {
    log.error(`rbac: evaluation failed, denying: ${(err as Error).message}`);
    return FAILED;
  }
}

/**
 * Envoy's HTTP RBAC filter: shadow rules counted and reported in dynamic metadata, then the
 * enforced rules; a deny is a 403 local reply. Stats: `http.<hcm prefix>.rbac.<rules prefix>allowed`
 * and `…denied`, `http.<hcm prefix>.rbac.<shadow prefix>shadow_allowed` and `…shadow_denied`.
 */
export function liveHttpRbac(name: string, base: HttpRbacSettings, scope: HttpFilterScope): LiveHttpFilter {
  const p = scope.store.scope('http', 'envoy_http_conn_manager_prefix', scope.statPrefix);
  const stats: RbacCounters = {
    allowed: p.counter(`rbac.${base.rulesPrefix}allowed`),
    denied: p.counter(`rbac.${base.rulesPrefix}denied`),
    shadowAllowed: p.counter(`rbac.${base.shadowPrefix}shadow_allowed`),
    shadowDenied: p.counter(`rbac.${base.shadowPrefix}shadow_denied`),
  };
  const useRemoteAddress = scope.useRemoteAddress ?? false;

  return {
    decodeHeaders(cb: FilterCallbacks): FilterStatus {
      const route = cb.perRoute<HttpRbacSettings>(name);
      const s = route ?? base;
      if (!s.engine && !s.shadow) return 'continue';
      // Route-local prefixes rename the metadata keys only when set (Envoy); stats stay the filter's.
      const rulesPrefix = route?.rulesPrefix || base.rulesPrefix;
      const shadowPrefix = route?.shadowPrefix || base.shadowPrefix;
      const rec = cb.rec;
      const facts = requestFacts(cb.ex.conn, cb.ex, rec.metadata, useRemoteAddress);
      const fields: Record<string, unknown> = {};
      if (s.shadow) {
        const shadow = s.shadow;
        const d = safeDecide(() => shadow.decide(facts));
        (d.allowed ? stats.shadowAllowed : stats.shadowDenied).inc();
        if (d.policy) fields[`${shadowPrefix}shadow_effective_policy_id`] = d.policy;
        fields[`${shadowPrefix}shadow_engine_result`] = d.allowed ? 'allowed' : 'denied';
      }
      if (s.engine) {
        const engine = s.engine;
        const d = safeDecide(() => engine.decide(facts));
        if (d.policy) fields[`${rulesPrefix}enforced_effective_policy_id`] = d.policy;
        fields[`${rulesPrefix}enforced_engine_result`] = d.allowed ? 'allowed' : 'denied';
        if (d.log && d.policy) rec.setMetadata('envoy.common', { access_log_hint: true });
        rec.setMetadata(RBAC_METADATA, fields);
        if (d.allowed) { stats.allowed.inc(); return 'continue'; }
        stats.denied.inc();
        // Envoy's RBAC sets no response flag: the deny shows in RESPONSE_CODE_DETAILS.
        cb.sendLocalReply(403, DENIED_BODY, '-', deniedDetails(d.policy));
        return 'stop';
      }
      rec.setMetadata(RBAC_METADATA, fields);
      return 'continue';
    },
  };
}
