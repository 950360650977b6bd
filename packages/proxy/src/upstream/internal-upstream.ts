import type { Socket } from 'node:net';
import { connectInternal, type InternalConnectMeta } from '../listener/internal.ts';
import { sharedWithUpstream, type FilterState } from '../core/filter-state.ts';
import type { Cluster } from './cluster.ts';
import type { Host } from './host.ts';

/**
 * Opens an in-process connection to the internal listener an envoy_internal_address host names.
 * With the internal_upstream transport socket, the listener's connection gets the configured host /
 * cluster metadata namespaces as dynamic metadata, and the filter state objects the downstream side
 * shares with its upstream (Envoy's SharedWithUpstreamConnection*). A raw transport passes bytes only.
 */
export function connectInternalHost(cluster: Cluster, host: Host, downstream: FilterState | undefined, request?: FilterState): Socket {
  const internal = host.internal!;
  const cfg = cluster.config.internalUpstream;
  let dynamicMetadata: Record<string, unknown> | undefined;
  if (cfg) {
    for (const p of cfg.passthrough) {
      const source = p.kind === 'host' ? host.metadata : cluster.config.metadata;
      const v = source?.[p.name];
      if (v !== undefined) (dynamicMetadata ??= {})[p.name] = v;
    }
  }
  const meta: InternalConnectMeta = {
    endpointId: internal.endpointId,
    dynamicMetadata,
    filterState: cfg ? sharedWithUpstream(downstream, request) : undefined,
  };
  // The internal socket implements the Socket surface the pools and proxies use.
  return connectInternal(internal.listener, meta) as unknown as Socket;
}
