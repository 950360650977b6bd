import { CodeClassCounters, isNullStat, type Counter, type Gauge, type Histogram, type Scope, type StatsStore } from '../stats/store.ts';
import { SslStats } from '../tls/ssl-stats.ts';

/**
 * Envoy's cluster traffic stats (upstream_rq_*, upstream_cx_*, response codes, upstream_rq_time): made
 * with the cluster, or on first use under deferred_stat_options.enable_deferred_creation_stats, as Envoy
 * defers its ClusterTrafficStats — a cluster no request ever used then holds none.
 */
class TrafficStats {
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
  readonly rqReset: Counter;
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly cxConnectFail: Counter;
  readonly cxConnectTimeout: Counter;
  readonly cxNone: Counter;
  readonly bytesSent: Counter;
  readonly bytesReceived: Counter;
  readonly codes: CodeClassCounters;
  readonly rqTime: Histogram;

  constructor(p: Scope) {
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
    this.bytesSent = p.counter('upstream_cx_tx_bytes_total');
    this.bytesReceived = p.counter('upstream_cx_rx_bytes_total');
    this.codes = new CodeClassCounters(p, 'upstream_rq', true);
    this.rqTime = p.histogram('upstream_rq_time');
  }

  /** Whether the stats matcher rejected every one of them (each is a shared null stat). */
  get allNull(): boolean {
    for (const v of Object.values(this) as Array<Counter | Gauge | Histogram | CodeClassCounters>) {
      if (v instanceof CodeClassCounters ? !v.byClass.every(isNullStat) : !isNullStat(v)) return false;
    }
    return true;
  }
}

/** `cluster.<name>.*` as Envoy names them, resolved once per cluster (traffic stats: see TrafficStats). */
export class ClusterStats {
  readonly dnsFailure: Counter;
  readonly membershipTotal: Gauge;
  readonly membershipHealthy: Gauge;
  /** ssl.* and client_ssl_socket_factory.*, for clusters with a TLS transport socket. */
  readonly ssl: SslStats | undefined;
  /** `cluster.<name>.`: the cluster's circuit breakers and outlier detection make their stats here too. */
  readonly scope: Scope;
  private matchCounts: Map<string, Counter> | undefined;
  private traffic: TrafficStats | undefined;

  constructor(store: StatsStore, name: string, tls = false) {
    const p = store.scope('cluster', 'envoy_cluster_name', name);
    this.scope = p;
    this.ssl = tls ? clientSslStats(p) : undefined;
    this.dnsFailure = p.counter('update_failure');
    this.membershipTotal = p.gauge('membership_total');
    this.membershipHealthy = p.gauge('membership_healthy');
    if (!store.deferredClusterStats) {
      const traffic = new TrafficStats(p);
      // A stats_matcher that rejects them all (Istio's) leaves only null stats: not kept (~550 B of each
      // of 5,000 clusters); the first use makes them again, the same null stats.
      if (!traffic.allNull) this.traffic = traffic;
    }
  }

  private get t(): TrafficStats { return (this.traffic ??= new TrafficStats(this.scope)); }
  get rqTotal(): Counter { return this.t.rqTotal; }
  get rqActive(): Gauge { return this.t.rqActive; }
  get rqTimeout(): Counter { return this.t.rqTimeout; }
  get rqPendingOverflow(): Counter { return this.t.rqPendingOverflow; }
  get rqPendingTotal(): Counter { return this.t.rqPendingTotal; }
  get rqPendingActive(): Gauge { return this.t.rqPendingActive; }
  get rqPendingFailureEject(): Counter { return this.t.rqPendingFailureEject; }
  get rqCancelled(): Counter { return this.t.rqCancelled; }
  get rqRetryOverflow(): Counter { return this.t.rqRetryOverflow; }
  get cxOverflow(): Counter { return this.t.cxOverflow; }
  get rqCompleted(): Counter { return this.t.rqCompleted; }
  get rqReset(): Counter { return this.t.rqReset; }
  get cxTotal(): Counter { return this.t.cxTotal; }
  get cxActive(): Gauge { return this.t.cxActive; }
  get cxConnectFail(): Counter { return this.t.cxConnectFail; }
  get cxConnectTimeout(): Counter { return this.t.cxConnectTimeout; }
  get cxNone(): Counter { return this.t.cxNone; }
  get bytesSent(): Counter { return this.t.bytesSent; }
  get bytesReceived(): Counter { return this.t.bytesReceived; }
  get codes(): CodeClassCounters { return this.t.codes; }
  get rqTime(): Histogram { return this.t.rqTime; }

  /** Drops every stat made through the scope from the store (the cluster was removed). */
  release(): void {
    this.scope.release();
  }

  /** `<match name>.total_match_count`: endpoints given that transport socket ('default' = the cluster's). */
  matchCount(matchName: string): Counter {
    let c = this.matchCounts?.get(matchName);
    if (!c) {
      c = this.scope.counter(`${matchName}.total_match_count`);
      // A rejected one (a null stat) is not kept: asked again, it is rejected again.
      if (!isNullStat(c)) (this.matchCounts ??= new Map()).set(matchName, c);
    }
    return c;
  }
}

/** ssl.* counters that a stats_matcher rejects all of (Istio's) are null stats: one shared set of them. */
let nullClientSsl: SslStats | undefined;
function clientSslStats(p: Scope): SslStats {
  const ssl = new SslStats(p, 'client');
  if (!Object.values(ssl).every((c: Counter) => isNullStat(c))) return ssl;
  return (nullClientSsl ??= ssl);
}
