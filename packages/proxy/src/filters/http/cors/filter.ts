import type { Headers } from '../../../http/exchange.ts';
import type { Route } from '../../../http/route-config.ts';
import { FILTER_DISABLED } from '../../../http/per-filter-config.ts';
import { Flag } from '../../../http/response-flags.ts';
import type { Counter, StatsStore } from '../../../stats/store.ts';
import type { FilterCallbacks, FilterStatus, LiveHttpFilter } from '../types.ts';
import { mergeCorsPolicies, type CorsPolicy, type EffectiveCors } from './config.ts';

class CorsStats {
  readonly originValid: Counter;
  readonly originInvalid: Counter;
  constructor(store: StatsStore, statPrefix: string) {
    const p = store.scope('http', 'envoy_http_conn_manager_prefix', statPrefix);
    this.originValid = p.counter('cors.origin_valid');
    this.originInvalid = p.counter('cors.origin_invalid');
  }
}

function single(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(',') : v;
}

function draw(probability: number): boolean {
  return probability >= 1 || (probability > 0 && Math.random() < probability);
}

function isAllowed(p: EffectiveCors, origin: string): boolean {
  if (p.allowAnyOrigin) return true;
  const matchers = p.allowOrigins;
  for (let i = 0; i < matchers.length; i++) if (matchers[i](origin)) return true;
  return false;
}

/**
 * Envoy's CORS filter. Preflights (OPTIONS with Origin and Access-Control-Request-Method) are
 * answered here with 200 and never forwarded, unless the origin is not allowed and
 * forward_not_matching_preflights (default true) says to pass them on. Other requests from an
 * allowed origin get access-control-allow-origin (the origin echoed), -allow-credentials and
 * -expose-headers on the response. Routes without a policy, direct responses and redirects are
 * left alone.
 */
export function liveCors(name: string, scope: { store: StatsStore; statPrefix: string }): LiveHttpFilter {
  const stats = new CorsStats(scope.store, scope.statPrefix);
  /** The merged policy per route (a Route belongs to one virtual host and one table); null = none. */
  const effective = new WeakMap<Route, EffectiveCors | null>();
  /** The allowed Origin of an enforced CORS request, for its response. */
  const latched = new WeakMap<FilterCallbacks, string>();

  const policyFor = (cb: FilterCallbacks, route: Route): EffectiveCors | undefined => {
    let p = effective.get(route);
    if (p === undefined) {
      const levels: CorsPolicy[] = [];
      const r = route.perFilter?.get(name);
      const v = cb.vhost?.perFilter?.get(name);
      if (r !== undefined && r !== FILTER_DISABLED) levels.push(r as CorsPolicy);
      if (v !== undefined && v !== FILTER_DISABLED) levels.push(v as CorsPolicy);
      // The route-configuration level is only reachable through perRoute when the route and the
      // virtual host have nothing (see the report: a FilterCallbacks hook would give all levels).
      if (r === undefined && v === undefined) {
        const t = cb.perRoute<CorsPolicy>(name);
        if (t !== undefined) levels.push(t);
      }
      p = mergeCorsPolicies(levels) ?? null;
      effective.set(route, p);
    }
    return p ?? undefined;
  };

  return {
    decodeHeaders(cb: FilterCallbacks): FilterStatus {
      const route = cb.route;
      if (route === undefined || route.action.kind !== 'forward') return 'continue';
      const p = policyFor(cb, route);
      if (p === undefined) return 'continue';
      const enabled = draw(p.filterEnabled);
      if (!enabled && !draw(p.shadowEnabled)) return 'continue';
      const headers = cb.ex.headers;
      const origin = single(headers.origin);
      if (!origin) return 'continue';
      const allowed = isAllowed(p, origin);
      if (allowed) stats.originValid.inc(); else stats.originInvalid.inc();
      if (!enabled) return 'continue'; // shadow mode: counted, not enforced
      if (allowed) latched.set(cb, origin);
      if (cb.ex.method !== 'OPTIONS') return 'continue';
      const requestMethod = single(headers['access-control-request-method']);
      if (!requestMethod) return 'continue';
      if (!allowed && p.forwardNotMatchingPreflights) return 'continue';
      const h: Headers = {};
      if (allowed) h['access-control-allow-origin'] = origin;
      if (p.allowCredentials) h['access-control-allow-credentials'] = 'true';
      if (p.allowMethods) h['access-control-allow-methods'] = p.allowMethods === '*' ? requestMethod : p.allowMethods;
      if (p.allowHeaders) {
        h['access-control-allow-headers'] = p.allowHeaders === '*' ? single(headers['access-control-request-headers']) ?? '' : p.allowHeaders;
      }
      if (p.maxAge) h['access-control-max-age'] = p.maxAge;
      if (p.allowPrivateNetworkAccess && single(headers['access-control-request-private-network']) === 'true') {
        h['access-control-allow-private-network'] = 'true';
      }
      cb.sendLocalReply(200, undefined, Flag.None, 'cors_response', h);
      return 'stop';
    },

    encodeHeaders(cb: FilterCallbacks, _status: number, headers: Headers): void {
      const origin = latched.get(cb);
      if (origin === undefined || cb.route === undefined) return;
      const p = policyFor(cb, cb.route);
      if (p === undefined) return;
      headers['access-control-allow-origin'] = origin;
      if (p.allowCredentials) headers['access-control-allow-credentials'] = 'true';
      if (p.exposeHeaders) headers['access-control-expose-headers'] = p.exposeHeaders;
    },
  };
}
