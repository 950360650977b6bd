import type { Msg } from '../../../config/fields.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import { Scope, type Counter, type Histogram, type StatsStore } from '../../../stats/store.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterConfig, HttpFilterExtension, HttpFilterScope, LiveHttpFilter } from '../types.ts';

export const GRPC_STATS_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig';
/** The filter state key Envoy's grpc_stats emits (`request_message_count,response_message_count`). */
export const GRPC_STATS_STATE = 'envoy.filters.http.grpc_stats';

/** gRPC messages seen in each direction of one call (the emitted filter state object). */
export interface GrpcMessageCounts {
  requestMessages: number;
  responseMessages: number;
}

interface GrpcStatsConfig {
  readonly emitFilterState: boolean;
  readonly allMethods: boolean;
  /** individual_method_stats_allowlist: service → method names. */
  readonly allowlist: ReadonlyMap<string, ReadonlySet<string>> | undefined;
  readonly upstreamStats: boolean;
  readonly replaceDots: boolean;
}

function compile(m: Msg | undefined): GrpcStatsConfig {
  if (!m) return { emitFilterState: false, allMethods: false, allowlist: undefined, upstreamStats: false, replaceDots: false };
  m.onlyFields(['@type', 'emit_filter_state', 'stats_for_all_methods', 'individual_method_stats_allowlist', 'enable_upstream_stats', 'replace_dots_in_grpc_service_name']);
  const list = m.msg('individual_method_stats_allowlist');
  if (list && m.has('stats_for_all_methods')) throw m.error('stats_for_all_methods', 'cannot be combined with individual_method_stats_allowlist');
  let allowlist: Map<string, Set<string>> | undefined;
  if (list) {
    allowlist = new Map();
    for (const s of list.list('services')) allowlist.set(s.requiredStr('name'), new Set(s.strList('method_names')));
  }
  return {
    emitFilterState: m.bool('emit_filter_state'),
    allMethods: m.bool('stats_for_all_methods'),
    allowlist,
    upstreamStats: m.bool('enable_upstream_stats'),
    replaceDots: m.bool('replace_dots_in_grpc_service_name'),
  };
}

/** Counts length-prefixed gRPC messages (1 flag byte + 4-byte big-endian length) across chunk boundaries. */
export class FrameCounter {
  count = 0;
  /** Bytes of the current prefix still to read (5..1), or 0 while inside a message body. */
  private need = 5;
  private len = 0;
  private body = 0;
  feed(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.need > 0) {
        if (this.need <= 4) this.len = this.len * 256 + chunk[i];
        i++;
        if (--this.need === 0) { this.count++; this.body = this.len; this.len = 0; if (this.body === 0) this.need = 5; }
      } else {
        const take = Math.min(this.body, chunk.length - i);
        i += take;
        this.body -= take;
        if (this.body === 0) this.need = 5;
      }
    }
  }
}

/** One gRPC call's tap on the bodies (called by the router for each chunk). */
class CallTap implements GrpcMessageCounts {
  private readonly req = new FrameCounter();
  private readonly res = new FrameCounter();
  request(chunk: Buffer): void { this.req.feed(chunk); }
  response(chunk: Buffer): void { this.res.feed(chunk); }
  get requestMessages(): number { return this.req.count; }
  get responseMessages(): number { return this.res.count; }
}

interface CallStats { success: Counter; failure: Counter; total: Counter; reqMsgs: Counter; resMsgs: Counter; time: Histogram | undefined }

function isGrpc(ct: unknown): boolean {
  return typeof ct === 'string' && ct.startsWith('application/grpc');
}

/**
 * Envoy's grpc_stats: per upstream cluster (and per service/method when configured) call
 * outcomes by grpc-status and message counts, under `cluster.<name>.grpc.`.
 */
class LiveGrpcStats implements LiveHttpFilter {
  private readonly c: GrpcStatsConfig;
  private readonly store: StatsStore;
  private readonly byKey = new Map<string, CallStats>();

  constructor(c: GrpcStatsConfig, store: StatsStore) { this.c = c; this.store = store; }

  decodeHeaders(cb: FilterCallbacks): FilterStatus {
    if (!isGrpc(cb.ex.headers['content-type'])) return 'continue';
    const tap = new CallTap();
    cb.rec.dataTap = tap;
    if (this.c.emitFilterState) (cb.rec.filterState ??= new Map()).set(GRPC_STATS_STATE, tap);
    return 'continue';
  }

  onComplete(rec: RequestRecord): void {
    const tap = rec.dataTap;
    if (!(tap instanceof CallTap) || !rec.upstreamCluster) return;
    const raw = rec.responseTrailers?.['grpc-status'] ?? rec.responseHeaders?.['grpc-status'];
    const s = raw === undefined ? undefined : String(Array.isArray(raw) ? raw[0] : raw);
    const stats = this.stats(rec.upstreamCluster, rec.ex.path);
    stats.reqMsgs.inc(tap.requestMessages);
    stats.resMsgs.inc(tap.responseMessages);
    stats.time?.record(rec.upstreamServiceTimeMs >= 0 ? rec.upstreamServiceTimeMs : rec.durationMs);
    // Envoy charges the outcome only when the response carried a grpc-status.
    if (s === undefined || !/^\d+$/.test(s)) return;
    stats.total.value++;
    if (s === '0') stats.success.value++; else stats.failure.value++;
  }

  /** `/package.Service/Method` → per-method stats when configured, else the cluster-wide grpc stats. */
  private stats(cluster: string, path: string): CallStats {
    let service = '', method = '';
    const m = /^\/([^/]+)\/([^/?]+)/.exec(path);
    if (m && (this.c.allMethods || this.c.allowlist?.get(m[1])?.has(m[2]))) { service = m[1]; method = m[2]; }
    const key = `${cluster}\u0001${service}\u0001${method}`;
    let st = this.byKey.get(key);
    if (!st) {
      const svc = this.c.replaceDots ? service.replace(/\./g, '_') : service;
      const tags: Array<readonly [string, string]> = [['envoy_cluster_name', cluster]];
      if (service) tags.unshift(['envoy_grpc_bridge_method', method], ['envoy_grpc_bridge_service', svc]);
      const scope = new Scope(this.store, `cluster.${cluster}.grpc.${service ? `${svc}.${method}.` : ''}`, 'cluster.grpc.', tags);
      st = {
        success: scope.counter('success'), failure: scope.counter('failure'), total: scope.counter('total'),
        reqMsgs: scope.counter('request_message_count'), resMsgs: scope.counter('response_message_count'),
        time: this.c.upstreamStats ? scope.histogram('upstream_rq_time') : undefined,
      };
      this.byKey.set(key, st);
    }
    return st;
  }
}

class GrpcStatsFilterConfig implements HttpFilterConfig {
  readonly name: string;
  private readonly c: GrpcStatsConfig;
  constructor(name: string, c: GrpcStatsConfig) { this.name = name; this.c = c; }
  live(scope: HttpFilterScope): LiveHttpFilter { return new LiveGrpcStats(this.c, scope.store); }
}

export const GRPC_STATS_EXTENSION: HttpFilterExtension = {
  typeUrl: GRPC_STATS_TYPE,
  legacyName: 'envoy.filters.http.grpc_stats',
  compile: (name, m) => new GrpcStatsFilterConfig(name, compile(m)),
};
