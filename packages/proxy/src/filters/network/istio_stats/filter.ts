import type { Socket } from 'node:net';
import type { Msg } from '../../../config/fields.ts';
import type { ConnInfo } from '../../../listener/conn-info.ts';
import { downstreamBytes } from '../../../listener/conn-bytes.ts';
import type { ClusterManager } from '../../../upstream/manager.ts';
import { IstioMetrics, type PeerFacts, type SeriesSet } from '../../../telemetry/istio/metrics.ts';
import { peerOf, principals, serviceOf } from '../../../telemetry/istio/facts.ts';
import { DOWNSTREAM_PEER, DOWNSTREAM_PEER_ID, PEER_UNKNOWN, UPSTREAM_PEER, UPSTREAM_PEER_ID } from '../../../telemetry/istio/peer.ts';
import { compileIstioStats, ISTIO_STATS_TYPE, type IstioStatsConfig } from '../../http/istio_stats/config.ts';
import { roleFor } from '../../http/istio_stats/filter.ts';
import { UPSTREAM_CLUSTER_STATE, UPSTREAM_HOST_STATE } from '../tcp_proxy/filter.ts';
import { upstreamSans } from '../../../tls/upstream-sans.ts';
import type { LiveNetworkFilter, NetworkFilterConfig, NetworkFilterExtension, NetworkFilterScope } from '../types.ts';

const OPENED = 0, CLOSED = 1, SENT = 2, RECEIVED = 3;

/** One connection's reporting state. */
class ConnReport {
  readonly socket: Socket;
  readonly info: ConnInfo;
  series: SeriesSet | undefined;
  sent = 0;
  received = 0;
  timer: NodeJS.Timeout | undefined;
  constructor(socket: Socket, info: ConnInfo) { this.socket = socket; this.info = info; }
}

/**
 * Istio's TCP metrics: istio_tcp_connections_opened_total once the peer is known (metadata exchange
 * done) or at close, istio_tcp_sent/received_bytes_total as deltas every tcp_reporting_duration and
 * at close, istio_tcp_connections_closed_total at close. Bytes come from the socket counters plus the
 * splice engine's, so the data path is never wrapped.
 */
class LiveTcpStats implements LiveNetworkFilter {
  private readonly metrics: IstioMetrics;
  private readonly config: IstioStatsConfig;
  private readonly clusters: ClusterManager;

  constructor(config: IstioStatsConfig, scope: NetworkFilterScope) {
    this.config = config;
    this.clusters = scope.clusters;
    this.metrics = new IstioMetrics(scope.store, config, roleFor(config, scope.direction), true);
  }

  onConnection(socket: Socket, info: ConnInfo): 'continue' {
    const r = new ConnReport(socket, info);
    // The terminal picks the upstream cluster synchronously after this: report once it has.
    queueMicrotask(() => this.tick(r, false));
    if (this.config.tcpReportingMs > 0) {
      r.timer = setInterval(tick, this.config.tcpReportingMs, this, r);
      r.timer.unref();
    }
    socket.once('close', () => this.tick(r, true));
    return 'continue';
  }

  private peerRead(info: ConnInfo): boolean {
    const s = info.filterState;
    if (!s) return false;
    return s.has(PEER_UNKNOWN) || s.has(this.metrics.role === 'source' ? UPSTREAM_PEER_ID : DOWNSTREAM_PEER_ID);
  }

  tick(r: ConnReport, end: boolean): void {
    if (r.series === undefined) {
      if (!end && !this.peerRead(r.info)) return;
      r.series = this.resolve(r.info);
      r.series[OPENED]?.counter().inc();
    }
    const [rx, tx] = downstreamBytes(r.socket, r.info);
    // istio-proxy adds both byte deltas (0 included) on every report, so both series exist from the first.
    const sent = r.series[SENT]?.counter(), received = r.series[RECEIVED]?.counter();
    // Counters only grow: a socket torn down mid-write must not report negative bytes.
    if (tx > r.sent) { sent?.inc(tx - r.sent); r.sent = tx; }
    if (rx > r.received) { received?.inc(rx - r.received); r.received = rx; }
    if (end) {
      if (r.timer) clearInterval(r.timer);
      r.series[CLOSED]?.counter().inc();
      if (this.metrics.hasCustom) this.metrics.recordCustom(this.context(r.info), this.metrics.evaluate(this.context(r.info)));
    }
  }

  private resolve(info: ConnInfo): SeriesSet {
    const role = this.metrics.role;
    // A client sidecar's principals are those of its upstream TLS session; a server's, the downstream one's.
    const up = role === 'source' ? upstreamSans((info.filterState?.get(UPSTREAM_HOST_STATE) as string | undefined) ?? '') : undefined;
    const sans = role === 'source' ? { peerSan: up?.peer ?? '', localSan: up?.local ?? '' } : principals(info);
    const cluster = (info.filterState?.get(UPSTREAM_CLUSTER_STATE) as string | undefined) ?? '';
    const svc = serviceOf(this.clusters, cluster, '', '', false);
    const f: PeerFacts = {
      peer: peerOf(role === 'source' ? UPSTREAM_PEER : DOWNSTREAM_PEER, undefined, info),
      endpointPeer: role === 'waypoint' ? peerOf(UPSTREAM_PEER, undefined, info) : null,
      peerSan: sans.peerSan,
      localSan: sans.localSan,
      serviceHost: svc.host, serviceName: svc.name,
    };
    const policy = role === 'source' ? 'unknown' : f.peerSan && f.localSan ? 'mutual_tls' : 'none';
    const exprValues = this.config.exprs.length ? this.metrics.evaluate(this.context(info)) : [];
    return this.metrics.resolve(f, ['tcp', '-', policy], exprValues);
  }

  private context(info: ConnInfo): Parameters<IstioMetrics['evaluate']>[0] {
    return {
      conn: info, rec: undefined, upstreamCluster: (info.filterState?.get(UPSTREAM_CLUSTER_STATE) as string | undefined) ?? '',
      downstreamPeer: peerOf(DOWNSTREAM_PEER, undefined, info), upstreamPeer: peerOf(UPSTREAM_PEER, undefined, info),
    };
  }
}

function tick(f: LiveTcpStats, r: ConnReport): void { f.tick(r, false); }

class TcpStatsConfig implements NetworkFilterConfig {
  readonly name: string;
  private readonly config: IstioStatsConfig;
  constructor(name: string, config: IstioStatsConfig) { this.name = name; this.config = config; }
  live(scope: NetworkFilterScope): LiveNetworkFilter { return new LiveTcpStats(this.config, scope); }
}

export const ISTIO_STATS_NETWORK_EXTENSION: NetworkFilterExtension = {
  typeUrl: ISTIO_STATS_TYPE,
  legacyName: 'istio.stats',
  compile: (name: string, m: Msg | undefined) => new TcpStatsConfig(name, compileIstioStats(m)),
};
