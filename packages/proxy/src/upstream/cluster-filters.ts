/**
 * Cluster.filters, the upstream network filters. istiod sets one on every mTLS outbound
 * cluster: Istio's TCP metadata exchange (its upstream side runs in tcp_proxy once the TLS
 * session negotiated the exchange's ALPN). Any other upstream filter is refused, not ignored:
 * ignoring this one let the peer's metadata bytes reach the app.
 */
import type { Msg } from '../config/fields.ts';

const METADATA_EXCHANGE = 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange';

/** The metadata exchange's ALPN protocol (istio-peer-exchange), or undefined without the filter. */
export function readUpstreamMetadataExchange(m: Msg): string | undefined {
  let protocol: string | undefined;
  for (const [i, f] of m.list('filters').entries()) {
    const tc = f.msg('typed_config');
    if (!tc || tc.str('@type') !== METADATA_EXCHANGE) throw m.error(`filters[${i}]`, `upstream network filter ${f.str('name') || tc?.str('@type') || '(unnamed)'} is not supported yet`);
    tc.onlyFields(['@type', 'protocol', 'enable_discovery', 'additional_labels']);
    if (tc.bool('enable_discovery')) throw tc.error('enable_discovery', 'workload discovery (WDS) is not supported');
    if (tc.strList('additional_labels').length) throw tc.error('additional_labels', 'is not supported');
    protocol = tc.requiredStr('protocol');
  }
  return protocol;
}
