import type { Exchange } from './exchange.ts';
import type { ResponseFlag } from './response-flags.ts';
import type { LogEntry } from '../telemetry/log-entry.ts';
import type { ConnInfo } from '../listener/conn-info.ts';
import type { Host } from '../upstream/host.ts';
import type { BodyEncoder } from './body-encoder.ts';
import { wallClockMs } from '../core/clock.ts';

/** One request's outcome: the single source for stats and access logs. */
export class RequestRecord implements LogEntry {
  readonly ex: Exchange;
  readonly startMs: number;
  readonly startTime: number;
  status = 0;
  flags: ResponseFlag | string = '-';
  bytesReceived = 0;
  bytesSent = 0;
  durationMs = 0;
  upstreamHost = '';
  /** The host behind upstreamHost (its address kind and endpoint metadata: peer_metadata's upstream discovery). */
  upstreamHostInfo: Host | undefined = undefined;
  upstreamCluster = '';
  /** The upstream connection's local address (%UPSTREAM_LOCAL_ADDRESS%); '' before one carried the request. */
  upstreamLocalAddress = '';
  upstreamServiceTimeMs = -1;
  routeName = '';
  /** The request's :path before any rewrite (Envoy's x-envoy-original-path). */
  readonly originalPath: string;
  readonly userAgent: string;
  readonly forwardedFor: string;
  requestId = '';
  responseHeaders: Record<string, string | string[] | number | undefined> | undefined;
  responseTrailers: Record<string, string | string[] | undefined> | undefined = undefined;
  /** Per-request facts filters hand to later filters and to telemetry (Envoy's stream filter state), made on first use. */
  filterState: Map<string, unknown> | undefined = undefined;
  /** Sees the request body as it goes upstream (first attempt) and the response body as it comes back (grpc_stats). */
  dataTap: { request(chunk: Buffer): void; response(chunk: Buffer): void } | undefined = undefined;
  details = '';
  localReplyBody: string | undefined;
  /** Envoy's dynamic metadata: filter namespace → fields, made on first use (RBAC, jwt_authn). */
  metadata: Map<string, Record<string, unknown>> | undefined;
  /** Set by an encoder filter (the compressor) from encodeHeaders: the response body goes through it. */
  bodyEncoder: BodyEncoder | undefined = undefined;
  /** Set when the HCM has HTTP filters: response headers pass through them. */
  filters: { encodeHeaders(status: number, headers: Record<string, string | string[] | undefined>): void } | undefined;

  constructor(ex: Exchange, startMs: number) {
    this.ex = ex;
    this.startMs = startMs;
    this.startTime = wallClockMs(startMs);
    this.originalPath = ex.path;
    this.userAgent = (ex.headers['user-agent'] as string | undefined) ?? '';
    this.forwardedFor = (ex.headers['x-forwarded-for'] as string | undefined) ?? '';
  }

  /** Merges `fields` into one metadata namespace, as Envoy's setDynamicMetadata does. */
  setMetadata(namespace: string, fields: Record<string, unknown>): void {
    const md = (this.metadata ??= new Map());
    const ns = md.get(namespace);
    if (ns) Object.assign(ns, fields); else md.set(namespace, { ...fields });
  }

  get protocol(): string { return this.ex.protocol; }
  get conn(): ConnInfo { return this.ex.conn; }

  requestHeader(name: string): string | undefined {
    switch (name) {
      case ':method': return this.ex.method;
      case ':path': return this.originalPath;
      case ':authority': return this.ex.authority;
      case ':scheme': return this.ex.scheme;
    }
    const v = this.ex.headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  }

  responseHeader(name: string): string | undefined {
    const v = this.responseHeaders?.[name];
    return v === undefined ? undefined : Array.isArray(v) ? v.join(',') : String(v);
  }
}
