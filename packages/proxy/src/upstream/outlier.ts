import type { Msg } from '../config/fields.ts';
import type { Counter, Gauge, Scope } from '../stats/store.ts';
import type { Host } from './host.ts';

/**
 * Passive health checking with Envoy's semantics (Cluster.outlier_detection):
 * consecutive 5xx / gateway failure / local-origin failure ejections inline,
 * success-rate and failure-percentage ejections at the interval sweep, which
 * also returns hosts to service. Per-host state hangs off `Host.outlier`;
 * an ejection flips `Host.ejected`, which the load balancer sees on its next pick.
 */

/** One compiled OutlierDetection (defaults as in Envoy's proto). */
export interface OutlierConfig {
  readonly consecutive5xx: number;
  readonly consecutiveGatewayFailure: number;
  readonly consecutiveLocalOriginFailure: number;
  readonly enforcingConsecutive5xx: number;
  readonly enforcingConsecutiveGatewayFailure: number;
  readonly enforcingConsecutiveLocalOriginFailure: number;
  readonly enforcingSuccessRate: number;
  readonly enforcingLocalOriginSuccessRate: number;
  readonly successRateMinimumHosts: number;
  readonly successRateRequestVolume: number;
  /** success_rate_stdev_factor / 1000. */
  readonly successRateStdevFactor: number;
  readonly failurePercentageThreshold: number;
  readonly enforcingFailurePercentage: number;
  readonly enforcingFailurePercentageLocalOrigin: number;
  readonly failurePercentageMinimumHosts: number;
  readonly failurePercentageRequestVolume: number;
  readonly splitExternalLocalOriginErrors: boolean;
  readonly intervalMs: number;
  readonly baseEjectionTimeMs: number;
  readonly maxEjectionTimeMs: number;
  readonly maxEjectionTimeJitterMs: number;
  readonly maxEjectionPercent: number;
  readonly alwaysEjectOneHost: boolean;
}

const FIELDS = ['consecutive_5xx', 'interval', 'base_ejection_time', 'max_ejection_percent', 'enforcing_consecutive_5xx',
  'enforcing_success_rate', 'success_rate_minimum_hosts', 'success_rate_request_volume', 'success_rate_stdev_factor',
  'consecutive_gateway_failure', 'enforcing_consecutive_gateway_failure', 'split_external_local_origin_errors',
  'consecutive_local_origin_failure', 'enforcing_consecutive_local_origin_failure', 'enforcing_local_origin_success_rate',
  'failure_percentage_threshold', 'enforcing_failure_percentage', 'enforcing_failure_percentage_local_origin',
  'failure_percentage_minimum_hosts', 'failure_percentage_request_volume', 'max_ejection_time', 'max_ejection_time_jitter',
  'successful_active_health_check_uneject_host', 'always_eject_one_host'];

export function compileOutlierDetection(m: Msg): OutlierConfig {
  if (m.has('monitors')) throw m.error('monitors', 'outlier detection monitor extensions are not supported');
  if (m.has('detect_degraded_hosts')) throw m.error('detect_degraded_hosts', 'is not supported yet');
  m.onlyFields(FIELDS);
  const pct = (key: string, fallback: number): number => {
    const v = m.num(key, fallback);
    if (v < 0 || v > 100) throw m.error(key, 'must be a percentage between 0 and 100');
    return v;
  };
  const positiveMs = (key: string, fallback: number): number => {
    const v = m.durationMs(key, fallback);
    if (!(v > 0)) throw m.error(key, 'must be greater than 0s');
    return v;
  };
  const intervalMs = positiveMs('interval', 10_000);
  const baseEjectionTimeMs = positiveMs('base_ejection_time', 30_000);
  // Unset: 300 s or base_ejection_time, whichever is larger.
  const maxEjectionTimeMs = positiveMs('max_ejection_time', Math.max(300_000, baseEjectionTimeMs));
  if (maxEjectionTimeMs < baseEjectionTimeMs) throw m.error('max_ejection_time', "outlier detector's max_ejection_time cannot be smaller than base_ejection_time");
  return {
    consecutive5xx: m.num('consecutive_5xx', 5),
    consecutiveGatewayFailure: m.num('consecutive_gateway_failure', 5),
    consecutiveLocalOriginFailure: m.num('consecutive_local_origin_failure', 5),
    enforcingConsecutive5xx: pct('enforcing_consecutive_5xx', 100),
    enforcingConsecutiveGatewayFailure: pct('enforcing_consecutive_gateway_failure', 0),
    enforcingConsecutiveLocalOriginFailure: pct('enforcing_consecutive_local_origin_failure', 100),
    enforcingSuccessRate: pct('enforcing_success_rate', 100),
    enforcingLocalOriginSuccessRate: pct('enforcing_local_origin_success_rate', 100),
    successRateMinimumHosts: m.num('success_rate_minimum_hosts', 5),
    successRateRequestVolume: m.num('success_rate_request_volume', 100),
    successRateStdevFactor: m.num('success_rate_stdev_factor', 1900) / 1000,
    failurePercentageThreshold: pct('failure_percentage_threshold', 85),
    enforcingFailurePercentage: pct('enforcing_failure_percentage', 0),
    enforcingFailurePercentageLocalOrigin: pct('enforcing_failure_percentage_local_origin', 0),
    failurePercentageMinimumHosts: m.num('failure_percentage_minimum_hosts', 5),
    failurePercentageRequestVolume: m.num('failure_percentage_request_volume', 50),
    splitExternalLocalOriginErrors: m.bool('split_external_local_origin_errors'),
    intervalMs,
    baseEjectionTimeMs,
    maxEjectionTimeMs,
    maxEjectionTimeJitterMs: m.durationMs('max_ejection_time_jitter', 0),
    maxEjectionPercent: pct('max_ejection_percent', 10),
    alwaysEjectOneHost: m.bool('always_eject_one_host'),
  };
}

/**
 * What the router reports for one upstream attempt: the HTTP status of the
 * response head (100–599), or one of these local-origin events.
 */
export const UpstreamResult = {
  /** No connection: refused, connect timeout, unreachable, TLS handshake failure. */
  ConnectFailed: -1,
  /** Connected, then reset / closed / protocol error (before or after the response head). */
  Reset: -2,
  /** The request or per-try timeout fired with no response head. */
  Timeout: -3,
} as const;

/** An HTTP status (100–599) or an `UpstreamResult` value. */
export type UpstreamResultCode = number;

/** Envoy's OutlierEjectionType, as array indices for the stats below. */
const Type = { C5xx: 0, Gateway: 1, LocalOrigin: 2, SuccessRate: 3, SuccessRateLocal: 4, FailurePct: 5, FailurePctLocal: 6 } as const;
type EjectionType = (typeof Type)[keyof typeof Type];
const TYPE_STAT = ['consecutive_5xx', 'consecutive_gateway_failure', 'consecutive_local_origin_failure', 'success_rate',
  'local_origin_success_rate', 'failure_percentage', 'local_origin_failure_percentage'];

/** `cluster.<name>.outlier_detection.*`, created only for clusters that configure outlier detection. */
export class OutlierStats {
  readonly active: Gauge;
  readonly overflow: Counter;
  readonly enforcedTotal: Counter;
  readonly detected: Counter[];
  readonly enforced: Counter[];
  /** Deprecated Envoy counters, still emitted. */
  readonly total: Counter;
  readonly consecutive5xx: Counter;
  readonly successRate: Counter;

  /** `p`: the cluster's stats scope (ClusterStats.scope), which releases these with the cluster's. */
  constructor(p: Scope) {
    const n = (s: string): string => `outlier_detection.${s}`;
    this.active = p.gauge(n('ejections_active'));
    this.overflow = p.counter(n('ejections_overflow'));
    this.enforcedTotal = p.counter(n('ejections_enforced_total'));
    this.detected = TYPE_STAT.map((t) => p.counter(n(`ejections_detected_${t}`)));
    this.enforced = TYPE_STAT.map((t) => p.counter(n(`ejections_enforced_${t}`)));
    this.total = p.counter(n('ejections_total'));
    this.consecutive5xx = p.counter(n('ejections_consecutive_5xx'));
    this.successRate = p.counter(n('ejections_success_rate'));
  }

}

/** Requests and successes in the current interval and the one before (the one the sweep judges). */
class SuccessRateBuckets {
  total = 0;
  success = 0;
  lastTotal = 0;
  lastSuccess = 0;
  /** The last sweep's success rate for /clusters (-1: not enough volume). */
  rate = -1;
  swap(): void {
    this.lastTotal = this.total;
    this.lastSuccess = this.success;
    this.total = 0;
    this.success = 0;
    this.rate = -1;
  }
}

/** Per-host outlier state (Envoy's DetectorHostMonitor). */
export class HostOutlier {
  consecutive5xx = 0;
  consecutiveGateway = 0;
  consecutiveLocal = 0;
  numEjections = 0;
  /** Multiplier of base_ejection_time; grows per ejection, shrinks while the host stays healthy. */
  backoff = 0;
  jitterMs = 0;
  lastEjection = -1;
  lastUnejection = -1;
  readonly external = new SuccessRateBuckets();
  readonly local = new SuccessRateBuckets();
}

export interface DetectorOptions {
  /** Monotonic milliseconds (tests pass a fake clock). */
  readonly now?: () => number;
  /** [0, 1) (tests pass a fixed sequence). */
  readonly random?: () => number;
  /** Called after every ejection or un-ejection (membership gauges). */
  readonly onChange?: () => void;
}

export interface SuccessRateNumbers { readonly average: number; readonly threshold: number }

/** One cluster's outlier detector. */
export class OutlierDetector {
  readonly config: OutlierConfig;
  readonly stats: OutlierStats;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly onChange: () => void;
  /** Every host of the cluster: the sweep walks them, max_ejection_percent counts them. */
  private hosts: readonly Host[] = [];
  private ejectionsActive = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Last sweep's success-rate mean and threshold (-1 when not computed), for /clusters. */
  externalNumbers: SuccessRateNumbers = { average: -1, threshold: -1 };
  localNumbers: SuccessRateNumbers = { average: -1, threshold: -1 };

  constructor(config: OutlierConfig, stats: OutlierStats, opts: DetectorOptions = {}) {
    this.config = config;
    this.stats = stats;
    this.now = opts.now ?? performance.now.bind(performance);
    this.random = opts.random ?? Math.random;
    this.onChange = opts.onChange ?? noop;
  }

  /** Arms the interval sweep (unref'd). */
  start(): void {
    if (!this.timer) this.timer = setInterval(sweepNow, this.config.intervalMs, this).unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The cluster's current hosts; hosts no longer present stop counting as ejected. */
  setHosts(hosts: readonly Host[]): void {
    const keep = new Set(hosts);
    for (const h of this.hosts) {
      if (!keep.has(h) && h.ejected) { h.ejected = false; this.ejectionsActive--; }
    }
    this.hosts = hosts;
    this.stats.active.set(this.ejectionsActive);
  }

  get ejectedCount(): number { return this.ejectionsActive; }

  /** One attempt's outcome (see UpstreamResult). */
  record(host: Host, result: UpstreamResultCode): void {
    const s = host.outlier ?? (host.outlier = new HostOutlier());
    if (result > 0) {
      // A response head means the connection was fine: in split mode that is a local-origin success.
      if (this.config.splitExternalLocalOriginErrors) this.localSuccess(s);
      this.httpCode(host, s, result);
      return;
    }
    if (!this.config.splitExternalLocalOriginErrors) {
      // Not split: local-origin events are 5xx (connect failure and reset as 503, timeout as 504).
      this.httpCode(host, s, result === UpstreamResult.Timeout ? 504 : 503);
      return;
    }
    // Split: Envoy reports a connect success when the stream got its connection, then the failure;
    // only connect failures therefore add up to consecutive_local_origin_failure.
    if (result !== UpstreamResult.ConnectFailed) this.localSuccess(s);
    this.localFailure(host, s);
  }

  private httpCode(host: Host, s: HostOutlier, code: number): void {
    const c = this.config;
    s.external.total++;
    if (code >= 500 && code < 600) {
      if (code >= 502 && code <= 504) {
        if (++s.consecutiveGateway === c.consecutiveGatewayFailure) this.consecutive(host, s, Type.Gateway);
      } else s.consecutiveGateway = 0;
      if (++s.consecutive5xx === c.consecutive5xx) this.consecutive(host, s, Type.C5xx);
    } else {
      s.external.success++;
      s.consecutive5xx = 0;
      s.consecutiveGateway = 0;
    }
  }

  private localSuccess(s: HostOutlier): void {
    s.local.total++;
    s.local.success++;
    s.consecutiveLocal = 0;
  }

  private localFailure(host: Host, s: HostOutlier): void {
    s.local.total++;
    if (++s.consecutiveLocal === this.config.consecutiveLocalOriginFailure) this.consecutive(host, s, Type.LocalOrigin);
  }

  /** A consecutive-error threshold was reached. An ejected host keeps its count (Envoy ignores the event). */
  private consecutive(host: Host, s: HostOutlier, type: EjectionType): void {
    if (host.ejected || !this.hosts.includes(host)) return;
    this.stats.detected[type].inc();
    this.eject(host, s, type);
    if (type === Type.C5xx) { this.stats.consecutive5xx.inc(); s.consecutive5xx = 0; }
    else if (type === Type.Gateway) s.consecutiveGateway = 0;
    else s.consecutiveLocal = 0;
  }

  private enforcing(type: EjectionType): number {
    const c = this.config;
    switch (type) {
      case Type.C5xx: return c.enforcingConsecutive5xx;
      case Type.Gateway: return c.enforcingConsecutiveGatewayFailure;
      case Type.LocalOrigin: return c.enforcingConsecutiveLocalOriginFailure;
      case Type.SuccessRate: return c.enforcingSuccessRate;
      case Type.SuccessRateLocal: return c.enforcingLocalOriginSuccessRate;
      case Type.FailurePct: return c.enforcingFailurePercentage;
      default: return c.enforcingFailurePercentageLocalOrigin;
    }
  }

  /**
   * Ejects unless that would take the ejected share above max_ejection_percent
   * (always_eject_one_host lets the first one through regardless), and only with
   * the type's enforcing_* probability.
   */
  private eject(host: Host, s: HostOutlier, type: EjectionType): void {
    const c = this.config;
    const total = this.hosts.length;
    const allowed = (100 * (this.ejectionsActive + 1)) / total <= c.maxEjectionPercent || (c.alwaysEjectOneHost && this.ejectionsActive === 0);
    if (!allowed) { this.stats.overflow.inc(); return; }
    if (type === Type.C5xx || type === Type.SuccessRate) this.stats.total.inc();
    const pct = this.enforcing(type);
    if (pct <= 0 || (pct < 100 && this.random() * 100 >= pct)) return;
    this.ejectionsActive++;
    this.stats.active.set(this.ejectionsActive);
    this.stats.enforcedTotal.inc();
    this.stats.enforced[type].inc();
    s.numEjections++;
    s.lastEjection = this.now();
    s.jitterMs = c.maxEjectionTimeJitterMs > 0 ? Math.floor(this.random() * (c.maxEjectionTimeJitterMs + 1)) : 0;
    if (s.backoff * c.baseEjectionTimeMs < c.maxEjectionTimeMs + c.baseEjectionTimeMs) s.backoff++;
    host.ejected = true;
    this.onChange();
  }

  private uneject(host: Host, s: HostOutlier, now: number): void {
    this.ejectionsActive--;
    this.stats.active.set(this.ejectionsActive);
    host.ejected = false;
    // Fresh counters, so a host close to a threshold is not re-ejected on its first error.
    s.consecutive5xx = 0;
    s.consecutiveGateway = 0;
    s.consecutiveLocal = 0;
    s.lastUnejection = now;
    this.onChange();
  }

  /** The ejection time a host serves now: base × backoff, capped at max, plus its jitter. */
  ejectionTimeMs(s: HostOutlier): number {
    return Math.min(this.config.baseEjectionTimeMs * s.backoff, this.config.maxEjectionTimeMs) + s.jitterMs;
  }

  /** The interval sweep: un-eject served time, judge the last interval's success rates, decay backoff. */
  sweep(): void {
    const now = this.now();
    const hosts = this.hosts;
    for (let i = 0; i < hosts.length; i++) {
      const h = hosts[i];
      const s = h.outlier ?? (h.outlier = new HostOutlier());
      if (h.ejected && now - s.lastEjection >= this.ejectionTimeMs(s)) this.uneject(h, s, now);
      s.external.swap();
      s.local.swap();
    }
    this.externalNumbers = this.successRateEjections(false);
    this.localNumbers = this.successRateEjections(true);
    for (let i = 0; i < hosts.length; i++) {
      const s = hosts[i].outlier as HostOutlier;
      if (!hosts[i].ejected && s.lastUnejection >= 0 && now - s.lastUnejection >= this.config.intervalMs && s.backoff > 0) s.backoff--;
    }
  }

  /** Success-rate (mean − factor × stdev) and failure-percentage ejections over one bucket kind. */
  private successRateEjections(local: boolean): SuccessRateNumbers {
    const c = this.config;
    const hosts = this.hosts;
    const none = { average: -1, threshold: -1 };
    if (hosts.length < c.successRateMinimumHosts && hosts.length < c.failurePercentageMinimumHosts) return none;
    const srHosts: Host[] = [];
    const srRates: number[] = [];
    const fpHosts: Host[] = [];
    const fpRates: number[] = [];
    let sum = 0;
    for (const h of hosts) {
      if (h.ejected) continue;
      const b = local ? (h.outlier as HostOutlier).local : (h.outlier as HostOutlier).external;
      if (b.lastTotal === 0) continue;
      const rate = (b.lastSuccess * 100) / b.lastTotal;
      if (b.lastTotal >= Math.min(c.successRateRequestVolume, c.failurePercentageRequestVolume)) b.rate = rate;
      if (b.lastTotal >= c.successRateRequestVolume) { srHosts.push(h); srRates.push(rate); sum += rate; }
      if (b.lastTotal >= c.failurePercentageRequestVolume) { fpHosts.push(h); fpRates.push(rate); }
    }
    let numbers = none;
    if (srHosts.length > 0 && srHosts.length >= c.successRateMinimumHosts) {
      const mean = sum / srHosts.length;
      let variance = 0;
      for (const r of srRates) variance += (r - mean) * (r - mean);
      variance /= srHosts.length;
      const threshold = mean - c.successRateStdevFactor * Math.sqrt(variance);
      numbers = { average: mean, threshold };
      const type = local ? Type.SuccessRateLocal : Type.SuccessRate;
      for (let i = 0; i < srHosts.length; i++) {
        if (srRates[i] < threshold && !srHosts[i].ejected) {
          this.stats.successRate.inc();
          this.stats.detected[type].inc();
          this.eject(srHosts[i], srHosts[i].outlier as HostOutlier, type);
        }
      }
    }
    if (fpHosts.length > 0 && fpHosts.length >= c.failurePercentageMinimumHosts) {
      const type = local ? Type.FailurePctLocal : Type.FailurePct;
      for (let i = 0; i < fpHosts.length; i++) {
        if (100 - fpRates[i] >= c.failurePercentageThreshold && !fpHosts[i].ejected) {
          this.stats.detected[type].inc();
          this.eject(fpHosts[i], fpHosts[i].outlier as HostOutlier, type);
        }
      }
    }
    return numbers;
  }
}

function noop(): void { /* nothing to update */ }

function sweepNow(d: OutlierDetector): void {
  d.sweep();
}
