import { CodeClassCounters, type Counter, type Gauge, type Histogram, type Scope, type StatsStore } from '../stats/store.ts';
import { SslStats } from '../tls/ssl-stats.ts';

/** `cluster.<name>.*` as Envoy names them, resolved once per cluster. */
export class ClusterStats {
  readonly rqTotal: Counter;
  readonly rqActive: Gauge;
  readonly rqTimeout: Counter;
  readonly rqPendingOverflow: Counter;
  readonly rqPendingTotal: Counter;
  readonly rqPendingActive: Gauge;
  readonly rqPendingFailureEject: Counter;
  readonly rqCancelled: Counter;
  readonly rqRetryOverflow: Counter;
  readonly cxOverflow: Counter;
  readonly rqCompleted: Counter;
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly cxConnectFail: Counter;
  readonly cxConnectTimeout: Counter;
  readonly cxNone: Counter;
  readonly rqReset: Counter;
  readonly dnsFailure: Counter;
  readonly membershipTotal: Gauge;
  readonly membershipHealthy: Gauge;
  readonly codes: CodeClassCounters;
  readonly rqTime: Histogram;
  readonly bytesSent: Counter;
  readonly bytesReceived: Counter;
  /** ssl.* and client_ssl_socket_factory.*, for clusters with a TLS transport socket. */
  readonly ssl: SslStats | undefined;
  /** `cluster.<name>.`: the cluster's circuit breakers and outlier detection make their stats here too. */
  readonly scope: Scope;
  private readonly matchCounts = new Map<string, Counter>();

  constructor(store: StatsStore, name: string, tls = false) {
    const p = store.scope('cluster', 'envoy_cluster_name', name);
    this.scope = p;
    this.ssl = tls ? new SslStats(p, 'client') : undefined;
    this.rqTotal = p.counter('upstream_rq_total');
    this.rqActive = p.gauge('upstream_rq_active');
    this.rqTimeout = p.counter('upstream_rq_timeout');
    this.rqPendingOverflow = p.counter('upstream_rq_pending_overflow');
    this.rqPendingTotal = p.counter('upstream_rq_pending_total');
    this.rqPendingActive = p.gauge('upstream_rq_pending_active');
    this.rqPendingFailureEject = p.counter('upstream_rq_pending_failure_eject');
    this.rqCancelled = p.counter('upstream_rq_cancelled');
    this.rqRetryOverflow = p.counter('upstream_rq_retry_overflow');
    this.cxOverflow = p.counter('upstream_cx_overflow');
    this.rqCompleted = p.counter('upstream_rq_completed');
    this.rqReset = p.counter('upstream_rq_rx_reset');
    this.cxTotal = p.counter('upstream_cx_total');
    this.cxActive = p.gauge('upstream_cx_active');
    this.cxConnectFail = p.counter('upstream_cx_connect_fail');
    this.cxConnectTimeout = p.counter('upstream_cx_connect_timeout');
    this.cxNone = p.counter('upstream_cx_none_healthy');
    this.dnsFailure = p.counter('update_failure');
    this.membershipTotal = p.gauge('membership_total');
    this.membershipHealthy = p.gauge('membership_healthy');
    this.codes = new CodeClassCounters(p, 'upstream_rq', true);
    this.rqTime = p.histogram('upstream_rq_time');
    this.bytesSent = p.counter('upstream_cx_tx_bytes_total');
    this.bytesReceived = p.counter('upstream_cx_rx_bytes_total');
  }

  /** Drops every stat made through the scope from the store (the cluster was removed). */
  release(): void {
    this.scope.release();
  }

  /** `<match name>.total_match_count`: endpoints given that transport socket ('default' = the cluster's). */
  matchCount(matchName: string): Counter {
    let c = this.matchCounts.get(matchName);
    if (!c) { c = this.scope.counter(`${matchName}.total_match_count`); this.matchCounts.set(matchName, c); }
    return c;
  }
}
