import type { Msg } from '../../../config/fields.ts';

export const ROUTER_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

export interface RouterFilterConfig {
  readonly suppressEnvoyHeaders: boolean;
}

/** envoy.extensions.filters.http.router.v3.Router: the terminal HTTP filter. */
export function compileRouterFilter(m: Msg | undefined): RouterFilterConfig {
  if (m) {
    for (const f of ['upstream_http_filters', 'strict_check_headers', 'respect_expected_rq_timeout']) {
      if (m.has(f)) throw m.error(f, 'is not supported yet');
    }
  }
  return { suppressEnvoyHeaders: m?.bool('suppress_envoy_headers') ?? false };
}
