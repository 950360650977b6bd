import type { Msg } from '../../config/fields.ts';
import type { Exchange, Headers } from '../../http/exchange.ts';
import type { Route, VirtualHost } from '../../http/route-config.ts';
import type { RequestRecord } from '../../http/request-record.ts';
import type { StatsStore } from '../../stats/store.ts';
import type { ClusterManager } from '../../upstream/manager.ts';

/** The listener's traffic_direction (Istio's filters read it to tell inbound from outbound). */
export type TrafficDirection = 'UNSPECIFIED' | 'INBOUND' | 'OUTBOUND';

/** What an HTTP filter can reach when it is made live for one HCM. */
export interface HttpFilterScope {
  readonly store: StatsStore;
  readonly statPrefix: string;
  readonly direction?: TrafficDirection;
  readonly clusters?: ClusterManager;
  /** The HCM's use_remote_address: whether x-forwarded-for decides the client address. */
  readonly useRemoteAddress?: boolean;
}

export type FilterStatus = 'continue' | 'stop';

/** What a decoder filter sees of one request, and how it steers the chain. */
export interface FilterCallbacks {
  readonly ex: Exchange;
  readonly rec: RequestRecord;
  readonly route: Route | undefined;
  readonly vhost: VirtualHost | undefined;
  /** The most specific typed_per_filter_config for this filter (route, then virtual host, then route config). */
  perRoute<T>(filterName: string): T | undefined;
  /** Every typed_per_filter_config for this filter, least specific first (route config, virtual host, route): for filters that merge them. */
  perRouteAll<T>(filterName: string): readonly T[];
  /** Resume the chain after a filter returned 'stop'. */
  continueDecoding(): void;
  /**
   * Pause for `ms` (fault delays). Then `wake` runs and the chain resumes unless it returns false
   * (it answered itself). If the downstream leaves first, `cancelled` runs and the request ends there.
   */
  continueAfter(ms: number, wake: () => boolean, cancelled: () => void): void;
  /**
   * For a filter that returned 'stop' to wait on a call (ext_authz): if the downstream leaves before
   * continueDecoding or sendLocalReply, `cancelled` runs and the request ends there.
   */
  onCancel(cancelled: () => void): void;
  /** Answer locally; the chain ends. */
  sendLocalReply(status: number, body: string | undefined, flag: string, details: string, headers?: Headers): void;
}

/** One HTTP filter made live for an HCM: stateless across requests; per-request state lives in the callbacks. */
export interface LiveHttpFilter {
  decodeHeaders(cb: FilterCallbacks): FilterStatus;
  /** Response headers (upstream or local reply) on their way downstream, in reverse filter order. */
  encodeHeaders?(cb: FilterCallbacks, status: number, headers: Headers): void;
  /** The request is over (response sent, reset or abandoned): Envoy's access-log hook, for telemetry. */
  onComplete?(rec: RequestRecord): void;
}

/** A compiled http_filters entry: immutable, made live once per HCM. */
export interface HttpFilterConfig {
  readonly name: string;
  /** Compiles this filter's typed_per_filter_config value (the inner message). */
  perRoute?(m: Msg): unknown;
  live(scope: HttpFilterScope): LiveHttpFilter;
}

/** An HTTP filter extension by type URL. */
export interface HttpFilterExtension {
  readonly typeUrl: string;
  readonly legacyName: string;
  compile(name: string, m: Msg | undefined): HttpFilterConfig;
}
