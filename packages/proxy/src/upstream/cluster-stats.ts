import { CodeClassCounters, type Counter, type Gauge, type StatsStore } from '../stats/store.ts';

/** `cluster.<name>.*` as Envoy names them, resolved once per cluster. */
export class ClusterStats {
  readonly rqTotal: Counter;
  readonly rqActive: Gauge;
  readonly rqTimeout: Counter;
  readonly rqPendingOverflow: Counter;
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
  readonly bytesSent: Counter;
  readonly bytesReceived: Counter;

  constructor(store: StatsStore, name: string) {
    const p = `cluster.${name}.`;
    this.rqTotal = store.counter(p + 'upstream_rq_total');
    this.rqActive = store.gauge(p + 'upstream_rq_active');
    this.rqTimeout = store.counter(p + 'upstream_rq_timeout');
    this.rqPendingOverflow = store.counter(p + 'upstream_rq_pending_overflow');
    this.rqCompleted = store.counter(p + 'upstream_rq_completed');
    this.rqReset = store.counter(p + 'upstream_rq_rx_reset');
    this.cxTotal = store.counter(p + 'upstream_cx_total');
    this.cxActive = store.gauge(p + 'upstream_cx_active');
    this.cxConnectFail = store.counter(p + 'upstream_cx_connect_fail');
    this.cxConnectTimeout = store.counter(p + 'upstream_cx_connect_timeout');
    this.cxNone = store.counter(p + 'upstream_cx_none_healthy');
    this.dnsFailure = store.counter(p + 'update_failure');
    this.membershipTotal = store.gauge(p + 'membership_total');
    this.membershipHealthy = store.gauge(p + 'membership_healthy');
    this.codes = new CodeClassCounters(store, p + 'upstream_rq');
    this.bytesSent = store.counter(p + 'upstream_cx_tx_bytes_total');
    this.bytesReceived = store.counter(p + 'upstream_cx_rx_bytes_total');
  }
}
