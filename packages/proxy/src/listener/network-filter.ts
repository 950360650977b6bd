/** Non-terminal network (read) filters: the interfaces extensions implement and the listener runs. */
import type { Socket } from 'node:net';
import type { Msg } from '../config/fields.ts';
import type { ConnInfo } from './conn-info.ts';
import type { StatsStore } from '../stats/store.ts';
import type { ClusterManager } from '../upstream/manager.ts';

/** What a network filter can reach when it is made live for one filter chain. */
export interface NetworkFilterScope {
  readonly store: StatsStore;
  readonly clusters: ClusterManager;
  /** The listener's traffic_direction (Istio's stats filter reports by it). */
  readonly direction?: 'UNSPECIFIED' | 'INBOUND' | 'OUTBOUND';
}

/**
 * A non-terminal network (read) filter made live for one filter chain: stateless across
 * connections, called once per accepted connection in chain order, after TLS.
 */
export interface LiveNetworkFilter {
  /**
   * 'close' ends the connection here (e.g. an RBAC deny); later filters and the terminal never see it.
   * 'stop' pauses the chain until the filter calls `resume` (e.g. after reading a metadata exchange
   * header); a filter that gives up instead destroys the socket and never calls it.
   */
  onConnection(socket: Socket, info: ConnInfo, resume: () => void): 'continue' | 'close' | 'stop';
}

/** A compiled `filters[]` entry that is not the terminal filter: immutable, made live once per chain. */
export interface NetworkFilterConfig {
  readonly name: string;
  live(scope: NetworkFilterScope): LiveNetworkFilter;
}

/**
 * A network filter extension by type URL. `m` is the typed_config message (or, for a
 * `udpa.type.v1.TypedStruct`/`xds.type.v3.TypedStruct`, its `value`), undefined when absent.
 */
export interface NetworkFilterExtension {
  readonly typeUrl: string;
  readonly legacyName: string;
  compile(name: string, m: Msg | undefined): NetworkFilterConfig;
}
