import type { Msg } from '../../../config/fields.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterConfig, HttpFilterExtension, LiveHttpFilter } from '../types.ts';

/** Istio's ALPN override filter: the ALPN list an upstream TLS handshake offers, by upstream protocol. */
export const ALPN_TYPE = 'type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig';
/** Request filter state: the AlpnOverrides the router applies to its upstream TLS connection. */
export const ALPN_OVERRIDE_STATE = 'istio.alpn_override';

const PROTOCOLS = ['HTTP10', 'HTTP11', 'HTTP2'] as const;
export type UpstreamHttpProtocol = (typeof PROTOCOLS)[number];

/** upstream protocol → ALPN list (absent: the cluster's own ALPN). */
export type AlpnOverrides = Readonly<Partial<Record<UpstreamHttpProtocol, readonly string[]>>>;

export function compileAlpn(m: Msg | undefined): AlpnOverrides {
  const out: Partial<Record<UpstreamHttpProtocol, readonly string[]>> = {};
  if (!m) return out;
  m.onlyFields(['@type', 'alpn_override']);
  for (const o of m.list('alpn_override')) {
    o.onlyFields(['upstream_protocol', 'alpn_override']);
    const protocol = o.enumOf('upstream_protocol', PROTOCOLS);
    const list = o.strList('alpn_override');
    list.forEach((p, i) => { if (p === '' || p.length > 255) throw o.error(`alpn_override[${i}]`, 'must be 1 to 255 bytes'); });
    out[protocol] = list;
  }
  return out;
}

class LiveAlpn implements LiveHttpFilter {
  private readonly overrides: AlpnOverrides;
  constructor(o: AlpnOverrides) { this.overrides = o; }
  decodeHeaders(cb: FilterCallbacks): FilterStatus {
    (cb.rec.filterState ??= new Map()).set(ALPN_OVERRIDE_STATE, this.overrides);
    return 'continue';
  }
}

class AlpnFilterConfig implements HttpFilterConfig {
  readonly name: string;
  private readonly live_: LiveAlpn;
  constructor(name: string, o: AlpnOverrides) { this.name = name; this.live_ = new LiveAlpn(o); }
  live(): LiveHttpFilter { return this.live_; }
}

export const ALPN_EXTENSION: HttpFilterExtension = {
  typeUrl: ALPN_TYPE,
  legacyName: 'istio.alpn',
  compile: (name, m) => new AlpnFilterConfig(name, compileAlpn(m)),
};
