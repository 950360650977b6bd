import type { Headers } from '../../../http/exchange.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import type { ClusterManager } from '../../../upstream/manager.ts';
import type { Host } from '../../../upstream/host.ts';
import type { FilterCallbacks, FilterStatus, LiveHttpFilter } from '../types.ts';
import type { DiscoveryMethod, PeerMetadataConfig, Propagation } from './config.ts';
import { setFilterState, parseIpPort } from '../../../core/filter-state.ts';
import { localExchange, peerFromHeader, DOWNSTREAM_PEER, UPSTREAM_PEER, type PeerInfo } from '../../../telemetry/istio/peer.ts';
import { DiscoveredPeer, toBaggage, workloadDiscovery, type PeerWorkloadFacts } from '../../../telemetry/istio/workload-peers.ts';
import { parseBaggage } from '../connect_baggage/config.ts';
import { PEER_METADATA, PEER_METADATA_ID } from '../metadata_exchange/filter.ts';

/** Which metadata exchange headers the downstream sent (downstream propagation answers with the same). */
const RECEIVED = 'io.istio.peer_metadata.received';

function single(v: string | string[] | number | undefined): string {
  return typeof v === 'string' ? v : Array.isArray(v) ? (v[0] ?? '') : '';
}

/**
 * One HCM's peer_metadata filter. Request: the downstream peer is discovered (first method that
 * finds one wins; an existing peer is kept), exchange headers are stripped, ours are added upstream.
 * Response: the upstream peer likewise (WDS by the upstream host's IP, or for an internal host the
 * destination its endpoint metadata names), then ours go downstream. The peers land in filter state
 * `wasm.downstream_peer` / `wasm.upstream_peer`, where istio.stats reads them.
 */
export class LivePeerMetadata implements LiveHttpFilter {
  private readonly config: PeerMetadataConfig;
  private readonly clusters: ClusterManager | undefined;
  private readonly stripsHeaders: { downstream: boolean; upstream: boolean };

  constructor(config: PeerMetadataConfig, clusters: ClusterManager | undefined) {
    this.config = config;
    this.clusters = clusters;
    this.stripsHeaders = { downstream: config.downstreamDiscovery.includes('istio_headers'), upstream: config.upstreamDiscovery.includes('istio_headers') };
  }

  decodeHeaders(cb: FilterCallbacks): FilterStatus {
    const h = cb.ex.headers;
    const rec = cb.rec;
    if (this.config.downstreamDiscovery.length) {
      const received = (single(h[PEER_METADATA_ID]) ? 1 : 0) | (single(h[PEER_METADATA]) ? 2 : 0);
      if (received) (rec.filterState ??= new Map()).set(RECEIVED, received);
      if (!hasPeer(rec, DOWNSTREAM_PEER)) {
        const shared = this.config.sharedWithUpstream;
        for (const method of this.config.downstreamDiscovery) {
          const peer = discover(method, h, rec.ex.conn.remoteAddress, shared);
          if (peer) { setFilterState(rec, DOWNSTREAM_PEER, peer); break; }
        }
      }
      if (this.stripsHeaders.downstream) { h[PEER_METADATA] = undefined; h[PEER_METADATA_ID] = undefined; }
    }
    const props = this.config.upstreamPropagation;
    if (props.length) {
      const route = cb.route?.action;
      inject(props, h, route?.kind === 'forward' ? route.cluster : '', 3, this.clusters);
    }
    return 'continue';
  }

  encodeHeaders(cb: FilterCallbacks, _status: number, h: Headers): void {
    const rec = cb.rec;
    if (this.config.upstreamDiscovery.length) {
      if (!hasPeer(rec, UPSTREAM_PEER)) {
        for (const method of this.config.upstreamDiscovery) {
          const peer = discover(method, h, upstreamPeerAddress(rec.upstreamHostInfo), false);
          if (peer) { setFilterState(rec, UPSTREAM_PEER, peer); break; }
        }
      }
      if (this.stripsHeaders.upstream) { h[PEER_METADATA] = undefined; h[PEER_METADATA_ID] = undefined; }
    }
    const props = this.config.downstreamPropagation;
    if (props.length) inject(props, h, rec.upstreamCluster, (rec.filterState?.get(RECEIVED) as number | undefined) ?? 0, this.clusters);
  }
}

function hasPeer(rec: RequestRecord, key: string): boolean {
  return rec.filterState?.has(key) === true || rec.ex.conn.filterState?.has(key) === true;
}

function discover(method: DiscoveryMethod, h: Headers, address: string, shared: boolean): PeerInfo | undefined {
  switch (method) {
    case 'workload_discovery': return address ? workloadDiscovery.lookup(address, shared) : undefined;
    case 'baggage': {
      const raw = h.baggage;
      const text = Array.isArray(raw) ? raw.join(',') : typeof raw === 'string' ? raw : '';
      return text ? baggagePeer(text, shared) : undefined;
    }
    case 'istio_headers': {
      const md = single(h[PEER_METADATA]);
      return md ? peerFromHeader(single(h[PEER_METADATA_ID]), md) ?? undefined : undefined;
    }
  }
}

/** The IP Istio looks the upstream workload up by: the host's, or for an internal host its endpoint's destination. */
function upstreamPeerAddress(host: Host | undefined): string {
  if (!host) return '';
  if (!host.internal) return host.address;
  const md = host.metadata;
  const dst = field(md?.['envoy.filters.listener.original_dst'], 'local') ?? field(md?.tunnel, 'destination');
  return dst ? parseIpPort(dst)?.address ?? '' : '';
}

function field(ns: unknown, key: string): string | undefined {
  const v = ns !== null && typeof ns === 'object' ? (ns as Record<string, unknown>)[key] : undefined;
  return typeof v === 'string' ? v : undefined;
}

/** Peers from baggage values, bounded like the metadata exchange cache (a mesh has few workloads). */
const MAX_BAGGAGE_PEERS = 1024;
const byBaggage = new Map<string, DiscoveredPeer | null>();

function baggagePeer(text: string, shared: boolean): DiscoveredPeer | undefined {
  const key = (shared ? '1' : '0') + text;
  let peer = byBaggage.get(key);
  if (peer === undefined) {
    const w = parseBaggage(text);
    const facts: PeerWorkloadFacts = { ...w, instance: '' };
    peer = w.workloadName || w.namespace || w.canonicalService ? new DiscoveredPeer(facts, shared ? 'ONCE' : 'NONE') : null;
    if (byBaggage.size >= MAX_BAGGAGE_PEERS) {
      let drop = MAX_BAGGAGE_PEERS >> 2;
      for (const k of byBaggage.keys()) { byBaggage.delete(k); if (--drop === 0) break; }
    }
    byBaggage.set(key, peer);
  }
  return peer ?? undefined;
}

/** This proxy as baggage, recomputed only when the node changes. */
let localBaggage: { node: object; text: string } | undefined;
function ownBaggage(): string {
  const ex = localExchange();
  if (localBaggage?.node === ex.node) return localBaggage.text;
  const p = ex.peer;
  const text = toBaggage({
    cluster: p.clusterId, namespace: p.namespace, workloadName: p.workloadName, workloadType: 'deployment',
    canonicalService: p.canonicalName, canonicalRevision: p.canonicalRevision, appName: p.app, appVersion: p.version, instance: p.name,
  });
  localBaggage = { node: ex.node, text };
  return text;
}

/**
 * Adds this proxy's metadata. Exchange headers: not towards PassthroughCluster or a cluster tagged
 * `istio.external` when skip_external_clusters, never towards one tagged `istio.disable_mx`; the id
 * and the metadata only where the request carried them (`which`: 1 id, 2 metadata; 3 for requests).
 */
function inject(props: readonly Propagation[], h: Headers, cluster: string, which: number, clusters: ClusterManager | undefined): void {
  for (const p of props) {
    if (p.kind === 'baggage') { h.baggage = ownBaggage(); continue; }
    if (skipExchange(p.skipExternalClusters, cluster, clusters)) continue;
    const local = localExchange();
    if (which & 1 && local.peer.id) h[PEER_METADATA_ID] = local.peer.id;
    if (which & 2 && local.header) h[PEER_METADATA] = local.header;
  }
}

function skipExchange(skipExternal: boolean, cluster: string, clusters: ClusterManager | undefined): boolean {
  if (!cluster) return false;
  if (skipExternal && cluster === 'PassthroughCluster') return true;
  const istio = clusters?.get(cluster)?.config.metadata?.istio as Record<string, unknown> | undefined;
  if (!istio) return false;
  return (skipExternal && istio.external === true) || istio.disable_mx === true;
}
