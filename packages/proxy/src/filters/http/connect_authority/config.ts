import type { Msg } from '../../../config/fields.ts';
import type { HttpFilterConfig, HttpFilterExtension, LiveHttpFilter } from '../types.ts';
import { setFilterState, TunnelAuthority, INTERNAL_DST_AUTHORITY_KEY } from '../../../core/filter-state.ts';
import { unwrapAny } from '../../../config/typed-config.ts';

export const CONNECT_AUTHORITY_TYPE = 'type.googleapis.com/io.istio.http.connect_authority.Config';

interface ConnectAuthorityRoute {
  readonly enabled: boolean;
  readonly port: number;
}

function compileSettings(m: Msg): ConnectAuthorityRoute {
  m.onlyFields(['@type', 'enabled', 'port']);
  const port = m.num('port', 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw m.error('port', `invalid port ${port}`);
  return { enabled: m.bool('enabled'), port };
}

/**
 * io.istio.http.connect_authority: on routes whose typed_per_filter_config enables it, stores the
 * request's :authority (and the tunnel port override) as filter state `istio.set_internal_dst_address`,
 * shared with the upstream connection; set_internal_dst_address on the internal listener turns it
 * back into the connection's destination. Only the per-route setting counts (the filter's own
 * config is not consulted, as in istio-proxy).
 */
export const CONNECT_AUTHORITY_EXTENSION: HttpFilterExtension = {
  typeUrl: CONNECT_AUTHORITY_TYPE,
  legacyName: 'io.istio.http.connect_authority',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    if (m) compileSettings(m);
    const live: LiveHttpFilter = {
      decodeHeaders(cb) {
        const s = cb.perRoute<ConnectAuthorityRoute>(name);
        if (s?.enabled) setFilterState(cb.rec, INTERNAL_DST_AUTHORITY_KEY, new TunnelAuthority(cb.ex.authority, s.port, 'TRANSITIVE'));
        return 'continue';
      },
    };
    return {
      name,
      perRoute: (any: Msg) => {
        const t = unwrapAny(any);
        if (t.url !== CONNECT_AUTHORITY_TYPE) throw any.error('@type', `expected ${CONNECT_AUTHORITY_TYPE}, got ${t.url}`);
        return compileSettings(t.msg);
      },
      live: () => live,
    };
  },
};
