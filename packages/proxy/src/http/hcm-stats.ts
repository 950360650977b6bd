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

  constructor(store: StatsStore, statPrefix: string) {
    const p = `http.${statPrefix}.`;
    this.rqTotal = store.counter(p + 'downstream_rq_total');
    this.rqActive = store.gauge(p + 'downstream_rq_active');
    this.rqTime = store.histogram(p + 'downstream_rq_time');
    this.codes = new CodeClassCounters(store, p + 'downstream_rq');
    this.cxTotal = store.counter(p + 'downstream_cx_total');
    this.cxActive = store.gauge(p + 'downstream_cx_active');
    this.cxHttp1Total = store.counter(p + 'downstream_cx_http1_total');
    this.cxHttp2Total = store.counter(p + 'downstream_cx_http2_total');
    this.cxProtocolError = store.counter(p + 'downstream_cx_protocol_error');
    this.rqHttp1Total = store.counter(p + 'downstream_rq_http1_total');
    this.rqHttp2Total = store.counter(p + 'downstream_rq_http2_total');
    this.rqTooLarge = store.counter(p + 'downstream_rq_too_large');
    this.upgradesTotal = store.counter(p + 'downstream_cx_upgrades_total');
  }
}
