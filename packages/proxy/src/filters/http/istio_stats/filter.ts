import type { Msg } from '../../../config/fields.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import { IstioMetrics, type PeerFacts, type Role } from '../../../telemetry/istio/metrics.ts';
import { peerOf, principals, serviceOf } from '../../../telemetry/istio/facts.ts';
import { DOWNSTREAM_PEER, UPSTREAM_PEER } from '../../../telemetry/istio/peer.ts';
import type { AttrContext } from '../../../telemetry/istio/attributes.ts';
import type { ClusterManager } from '../../../upstream/manager.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterConfig, HttpFilterExtension, HttpFilterScope, LiveHttpFilter, TrafficDirection } from '../types.ts';
import { compileIstioStats, ISTIO_STATS_TYPE, type IstioStatsConfig } from './config.ts';
import { GRPC_STATS_STATE, type GrpcMessageCounts } from '../grpc_stats/filter.ts';
import { upstreamSans } from '../../../tls/upstream-sans.ts';

/** The reporter label: from the config (SERVER_GATEWAY) or the listener direction; outbound is the default. */
export function roleFor(config: IstioStatsConfig, direction: TrafficDirection | undefined): Role {
  if (config.serverGateway) return 'waypoint';
  return direction === 'INBOUND' ? 'destination' : 'source';
}

function isGrpc(rec: RequestRecord): boolean {
  const ct = rec.ex.headers['content-type'];
  return typeof ct === 'string' && ct.startsWith('application/grpc');
}

function grpcStatusText(rec: RequestRecord): string {
  const v = rec.responseTrailers?.['grpc-status'] ?? rec.responseHeaders?.['grpc-status'];
  return v === undefined ? '' : String(Array.isArray(v) ? v[0] : v);
}

const CODES: string[] = Array.from({ length: 600 }, (_, i) => String(i));

/**
 * istio_requests_total, istio_request_duration_milliseconds, istio_request_bytes and
 * istio_response_bytes, recorded when the request completes (istio-proxy reports from its
 * access-log hook). Labels are resolved through IstioMetrics' cache: per request only the
 * varying values are looked up, and the counters are plain numbers.
 */
class LiveIstioStats implements LiveHttpFilter {
  private readonly metrics: IstioMetrics;
  private readonly config: IstioStatsConfig;
  private readonly clusters: ClusterManager | undefined;
  private readonly facts: PeerFacts = { peer: null, endpointPeer: null, peerSan: '', localSan: '', serviceHost: '', serviceName: '' };
  private readonly tail: string[] = ['', '', '', '', ''];

  constructor(config: IstioStatsConfig, scope: HttpFilterScope) {
    this.config = config;
    this.clusters = scope.clusters;
    this.metrics = new IstioMetrics(scope.store, config, roleFor(config, scope.direction), false);
  }

  decodeHeaders(_cb: FilterCallbacks): FilterStatus { return 'continue'; }

  onComplete(rec: RequestRecord): void {
    const conn = rec.ex.conn;
    const role = this.metrics.role;
    const f = this.facts;
    const state = rec.filterState;
    f.peer = peerOf(role === 'source' ? UPSTREAM_PEER : DOWNSTREAM_PEER, state, conn);
    f.endpointPeer = role === 'waypoint' ? peerOf(UPSTREAM_PEER, state, conn) : null;
    if (role === 'source') {
      // A client sidecar's principals are those of its upstream TLS session (the endpoint's last handshake).
      const up = upstreamSans(rec.upstreamHost);
      f.peerSan = up?.peer ?? '';
      f.localSan = up?.local ?? '';
    } else {
      const sans = principals(conn);
      f.peerSan = sans.peerSan;
      f.localSan = sans.localSan;
    }
    const svc = serviceOf(this.clusters, rec.upstreamCluster, rec.routeName, rec.ex.authority, !this.config.disableHostHeaderFallback);
    f.serviceHost = svc.host;
    f.serviceName = svc.name;
    const grpc = isGrpc(rec);
    const tail = this.tail;
    tail[0] = grpc ? 'grpc' : 'http';
    tail[1] = CODES[rec.status] ?? String(rec.status);
    tail[2] = grpc ? grpcStatusText(rec) : '';
    tail[3] = rec.flags;
    tail[4] = role === 'source' ? 'unknown' : f.peerSan && f.localSan ? 'mutual_tls' : 'none';
    const ctx = this.config.exprs.length || this.metrics.hasCustom ? this.context(rec) : undefined;
    const exprValues = ctx ? this.metrics.evaluate(ctx) : [];
    const set = this.metrics.resolve(f, tail, exprValues);
    f.peer = f.endpointPeer = null;
    const requests = set[0]?.counter();
    if (requests) requests.value++;
    set[1]?.histogram().record(rec.durationMs);
    set[2]?.histogram().record(rec.bytesReceived);
    set[3]?.histogram().record(rec.bytesSent);
    if (grpc) {
      const counts = state?.get(GRPC_STATS_STATE) as GrpcMessageCounts | undefined;
      if (counts) {
        set[4]?.counter().inc(counts.requestMessages);
        set[5]?.counter().inc(counts.responseMessages);
      }
    }
    if (ctx && this.metrics.hasCustom) this.metrics.recordCustom(ctx, exprValues);
  }

  private context(rec: RequestRecord): AttrContext {
    const conn = rec.ex.conn;
    return {
      conn, rec, upstreamCluster: rec.upstreamCluster,
      downstreamPeer: peerOf(DOWNSTREAM_PEER, rec.filterState, conn),
      upstreamPeer: peerOf(UPSTREAM_PEER, rec.filterState, conn),
    };
  }
}

class IstioStatsFilterConfig implements HttpFilterConfig {
  readonly name: string;
  private readonly config: IstioStatsConfig;
  constructor(name: string, config: IstioStatsConfig) { this.name = name; this.config = config; }
  live(scope: HttpFilterScope): LiveHttpFilter { return new LiveIstioStats(this.config, scope); }
}

export const ISTIO_STATS_HTTP_EXTENSION: HttpFilterExtension = {
  typeUrl: ISTIO_STATS_TYPE,
  legacyName: 'istio.stats',
  compile: (name: string, m: Msg | undefined) => new IstioStatsFilterConfig(name, compileIstioStats(m)),
};
