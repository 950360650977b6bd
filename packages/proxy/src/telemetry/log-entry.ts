import type { ConnInfo } from '../listener/conn-info.ts';
import type { FilterState } from '../core/filter-state.ts';

/** What an access log line can say about one request (HTTP) or connection (TCP). */
export interface LogEntry {
  readonly startTime: number;
  readonly protocol: string;
  readonly status: number;
  readonly flags: string;
  readonly details: string;
  readonly bytesReceived: number;
  readonly bytesSent: number;
  readonly durationMs: number;
  readonly upstreamHost: string;
  readonly upstreamCluster: string;
  /** The upstream connection's local address ('' when none carried the request / connection). */
  readonly upstreamLocalAddress: string;
  readonly routeName: string;
  readonly conn: ConnInfo;
  /** The text of a local reply, for %LOCAL_REPLY_BODY% in local_reply_config formats. */
  readonly localReplyBody?: string;
  /** The request's own filter state (HTTP); %FILTER_STATE% falls back to the connection's. */
  readonly filterState?: FilterState | undefined;
  requestHeader(name: string): string | undefined;
  responseHeader(name: string): string | undefined;
}
