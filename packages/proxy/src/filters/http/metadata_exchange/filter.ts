import type { Headers } from '../../../http/exchange.ts';
import { localExchange, peerFromHeader, DOWNSTREAM_PEER, DOWNSTREAM_PEER_ID, UPSTREAM_PEER, UPSTREAM_PEER_ID } from '../../../telemetry/istio/peer.ts';
import type { FilterCallbacks, FilterStatus, LiveHttpFilter, TrafficDirection } from '../types.ts';

export const PEER_METADATA = 'x-envoy-peer-metadata';
export const PEER_METADATA_ID = 'x-envoy-peer-metadata-id';
/** Which of the two headers the downstream sent: we answer with the same ones. */
const RECEIVED = 'istio.metadata_exchange.received';

function single(v: string | string[] | undefined): string {
  return typeof v === 'string' ? v : Array.isArray(v) ? (v[0] ?? '') : '';
}

/**
 * Istio's HTTP metadata exchange (the built-in `envoy.wasm.metadata_exchange` plugin): the peer's
 * x-envoy-peer-metadata(-id) are read and stripped from requests (downstream peer) and responses
 * (upstream peer); ours are added to requests unless inbound, and to responses unless outbound,
 * so the app never sees them and each side's stats learn the other's workload.
 */
export class LiveMetadataExchange implements LiveHttpFilter {
  private readonly direction: TrafficDirection;
  constructor(direction: TrafficDirection) { this.direction = direction; }

  decodeHeaders(cb: FilterCallbacks): FilterStatus {
    const h = cb.ex.headers;
    const id = single(h[PEER_METADATA_ID]);
    const md = single(h[PEER_METADATA]);
    if (id || md) {
      const state = (cb.rec.filterState ??= new Map());
      state.set(RECEIVED, (id ? 1 : 0) | (md ? 2 : 0));
      if (id) { h[PEER_METADATA_ID] = undefined; state.set(DOWNSTREAM_PEER_ID, id); }
      if (md) {
        h[PEER_METADATA] = undefined;
        const peer = peerFromHeader(id, md);
        if (peer) state.set(DOWNSTREAM_PEER, peer);
      }
    }
    if (this.direction !== 'INBOUND') {
      const local = localExchange();
      if (local.header) h[PEER_METADATA] = local.header;
      if (local.peer.id) h[PEER_METADATA_ID] = local.peer.id;
    }
    return 'continue';
  }

  encodeHeaders(cb: FilterCallbacks, _status: number, h: Headers): void {
    const id = single(h[PEER_METADATA_ID]);
    const md = single(h[PEER_METADATA]);
    if (id || md) {
      const state = (cb.rec.filterState ??= new Map());
      if (id) { h[PEER_METADATA_ID] = undefined; state.set(UPSTREAM_PEER_ID, id); }
      if (md) {
        h[PEER_METADATA] = undefined;
        const peer = peerFromHeader(id, md);
        if (peer) state.set(UPSTREAM_PEER, peer);
      }
    }
    if (this.direction !== 'OUTBOUND') {
      const received = (cb.rec.filterState?.get(RECEIVED) as number | undefined) ?? 0;
      const local = localExchange();
      if (received & 2 && local.header) h[PEER_METADATA] = local.header;
      if (received & 1 && local.peer.id) h[PEER_METADATA_ID] = local.peer.id;
    }
  }
}
