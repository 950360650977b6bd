import type { Msg } from '../../../config/fields.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { LivePeerMetadata } from './filter.ts';

export const PEER_METADATA_TYPE = 'type.googleapis.com/io.istio.http.peer_metadata.Config';

export type DiscoveryMethod = 'baggage' | 'workload_discovery' | 'istio_headers';
export interface Propagation { readonly kind: 'baggage' | 'istio_headers'; readonly skipExternalClusters: boolean }

/** io.istio.http.peer_metadata.Config, compiled once. */
export interface PeerMetadataConfig {
  readonly downstreamDiscovery: readonly DiscoveryMethod[];
  readonly upstreamDiscovery: readonly DiscoveryMethod[];
  readonly downstreamPropagation: readonly Propagation[];
  readonly upstreamPropagation: readonly Propagation[];
  /** The downstream peer travels to the upstream (internal) connection, once. */
  readonly sharedWithUpstream: boolean;
}

const DISCOVERY = ['baggage', 'workload_discovery', 'istio_headers', 'upstream_filter_state'] as const;

function oneOf(m: Msg, fields: readonly string[]): string {
  const set = fields.filter((f) => m.has(f));
  if (set.length !== 1) throw m.error('', `exactly one of ${fields.join(', ')} is required`);
  return set[0];
}

function discovery(list: Msg[]): DiscoveryMethod[] {
  return list.map((m) => {
    const kind = oneOf(m, DISCOVERY);
    // Filled by an upstream network filter Skua does not have: refused rather than silently empty.
    if (kind === 'upstream_filter_state') throw m.error(kind, 'is not supported yet');
    const inner = m.requiredMsg(kind);
    inner.onlyFields(kind === 'istio_headers' ? ['skip_external_clusters'] : []);
    return kind as DiscoveryMethod;
  });
}

function propagation(list: Msg[]): Propagation[] {
  return list.map((m) => {
    const kind = oneOf(m, ['istio_headers', 'baggage']) as Propagation['kind'];
    const inner = m.requiredMsg(kind);
    inner.onlyFields(kind === 'istio_headers' ? ['skip_external_clusters'] : []);
    return { kind, skipExternalClusters: inner.bool('skip_external_clusters') };
  });
}

export function compilePeerMetadata(m: Msg | undefined): PeerMetadataConfig {
  if (!m) return { downstreamDiscovery: [], upstreamDiscovery: [], downstreamPropagation: [], upstreamPropagation: [], sharedWithUpstream: false };
  m.onlyFields(['@type', 'downstream_discovery', 'upstream_discovery', 'downstream_propagation', 'upstream_propagation', 'shared_with_upstream', 'additional_labels']);
  if (m.strList('additional_labels').length) throw m.error('additional_labels', 'is not supported yet');
  return {
    downstreamDiscovery: discovery(m.list('downstream_discovery')),
    upstreamDiscovery: discovery(m.list('upstream_discovery')),
    downstreamPropagation: propagation(m.list('downstream_propagation')),
    upstreamPropagation: propagation(m.list('upstream_propagation')),
    sharedWithUpstream: m.bool('shared_with_upstream'),
  };
}

/**
 * io.istio.http.peer_metadata: discovers the downstream peer (request) and the upstream peer
 * (response) for Istio telemetry — from WDS by peer address, from `baggage`, or from Istio's
 * metadata exchange headers — and propagates this proxy's own metadata the same ways.
 */
export const PEER_METADATA_EXTENSION: HttpFilterExtension = {
  typeUrl: PEER_METADATA_TYPE,
  legacyName: 'io.istio.http.peer_metadata',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    const config = compilePeerMetadata(m);
    return { name, live: (scope) => new LivePeerMetadata(config, scope.clusters) };
  },
};
