import { CodeClassCounters, type Counter, type Gauge, type Histogram, type StatsStore } from '../stats/store.ts';

/** `http.<stat_prefix>.*` as Envoy names them. */
export class HcmStats {
  readonly rqTotal: Counter;
  readonly rqActive: Gauge;
  readonly rqTime: Histogram;
  readonly codes: CodeClassCounters;
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly cxHttp1Total: Counter;
  readonly cxHttp2Total: Counter;
  readonly cxProtocolError: Counter;
  readonly rqHttp1Total: Counter;
  readonly rqHttp2Total: Counter;
  readonly rqTooLarge: Counter;
  readonly upgradesTotal: Counter;
  readonly cxDestroy: Counter;
  readonly cxDestroyRemote: Counter;
  readonly cxDestroyLocal: Counter;
  readonly cxDestroyActiveRq: Counter;
  readonly cxDestroyRemoteActiveRq: Counter;
  readonly cxDestroyLocalActiveRq: Counter;
  readonly rqRxReset: Counter;
  readonly rqTooManyPrematureResets: Counter;
  /** Requests answered 503 by the overload action stop_accepting_requests. */
  readonly rqOverloadClose: Counter;

  constructor(store: StatsStore, statPrefix: string) {
    const p = store.scope('http', 'envoy_http_conn_manager_prefix', statPrefix);
    this.rqTotal = p.counter('downstream_rq_total');
    this.rqActive = p.gauge('downstream_rq_active');
    this.rqTime = p.histogram('downstream_rq_time');
    this.codes = new CodeClassCounters(p, 'downstream_rq');
    this.cxTotal = p.counter('downstream_cx_total');
    this.cxActive = p.gauge('downstream_cx_active');
    this.cxHttp1Total = p.counter('downstream_cx_http1_total');
    this.cxHttp2Total = p.counter('downstream_cx_http2_total');
    this.cxProtocolError = p.counter('downstream_cx_protocol_error');
    this.rqHttp1Total = p.counter('downstream_rq_http1_total');
    this.rqHttp2Total = p.counter('downstream_rq_http2_total');
    this.rqTooLarge = p.counter('downstream_rq_too_large');
    this.upgradesTotal = p.counter('downstream_cx_upgrades_total');
    this.cxDestroy = p.counter('downstream_cx_destroy');
    this.cxDestroyRemote = p.counter('downstream_cx_destroy_remote');
    this.cxDestroyLocal = p.counter('downstream_cx_destroy_local');
    this.cxDestroyActiveRq = p.counter('downstream_cx_destroy_active_rq');
    this.cxDestroyRemoteActiveRq = p.counter('downstream_cx_destroy_remote_active_rq');
    this.cxDestroyLocalActiveRq = p.counter('downstream_cx_destroy_local_active_rq');
    this.rqRxReset = p.counter('downstream_rq_rx_reset');
    this.rqTooManyPrematureResets = p.counter('downstream_rq_too_many_premature_resets');
    this.rqOverloadClose = p.counter('downstream_rq_overload_close');
  }
}
