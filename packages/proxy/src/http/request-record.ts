import type { Exchange } from './exchange.ts';
import type { ResponseFlag } from './response-flags.ts';

/** One request's outcome: the single source for stats and access logs. */
export class RequestRecord {
  readonly ex: Exchange;
  readonly startMs: number;
  readonly startTime: number;
  status = 0;
  flags: ResponseFlag | string = '-';
  bytesReceived = 0;
  bytesSent = 0;
  durationMs = 0;
  upstreamHost = '';
  upstreamCluster = '';
  upstreamServiceTimeMs = -1;
  routeName = '';
  /** The request's :path before any rewrite (Envoy's x-envoy-original-path). */
  readonly originalPath: string;
  readonly userAgent: string;
  readonly forwardedFor: string;
  requestId = '';
  responseHeaders: Record<string, string | string[] | number | undefined> | undefined;
  details = '';

  constructor(ex: Exchange, startMs: number) {
    this.ex = ex;
    this.startMs = startMs;
    this.startTime = Date.now();
    this.originalPath = ex.path;
    this.userAgent = (ex.headers['user-agent'] as string | undefined) ?? '';
    this.forwardedFor = (ex.headers['x-forwarded-for'] as string | undefined) ?? '';
  }
}
