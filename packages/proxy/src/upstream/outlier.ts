import type { Counter, Gauge, Scope } from '../stats/store.ts';
import type { Host } from './host.ts';
import type { OutlierConfig } from './outlier-config.ts';
import { clusterCells, ClusterWord, hostCells, HostWord as W, sweepsOutliers, type OutlierCells } from './shared-outlier.ts';

/**
 * Passive health checking with Envoy's semantics (Cluster.outlier_detection):
 * consecutive 5xx / gateway failure / local-origin failure ejections inline,
 * success-rate and failure-percentage ejections at the interval sweep, which
 * also returns hosts to service. Per-host state lives in Int32 cells (shared-outlier.ts: shared by every
 * thread with --concurrency N) reached through `Host.outlier`; an ejection flips `Host.ejected`, which the
 * load balancer sees on its next pick (other threads' ejections at their next pick, via `sync`).
 */

export { compileOutlierDetection, type OutlierConfig } from './outlier-config.ts';

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

/** The interval the sweep judged: its requests and successes, and the success rate shown by /clusters. */
class SuccessRateBuckets {
  lastTotal = 0;
  lastSuccess = 0;
  /** The last sweep's success rate for /clusters (-1: not enough volume). */
  rate = -1;
  swap(total: number, success: number): void {
    this.lastTotal = total;
    // A success counted between the two exchanges lands in the interval after its request.
    this.lastSuccess = success < total ? success : total;
    this.rate = -1;
  }
}

/** Per-host outlier state (Envoy's DetectorHostMonitor): its cells, and what the last sweep judged. */
export class HostOutlier {
  readonly cells: Int32Array;
  readonly at: number;
  readonly external = new SuccessRateBuckets();
  readonly local = new SuccessRateBuckets();
  constructor(c: OutlierCells) { this.cells = c.cells; this.at = c.at; }
  word(w: number): number { return Atomics.load(this.cells, this.at + w); }
  get consecutive5xx(): number { return this.word(W.Consecutive5xx); }
  get numEjections(): number { return this.word(W.NumEjections); }
  /** Multiplier of base_ejection_time; grows per ejection, shrinks while the host stays healthy. */
  get backoff(): number { return this.word(W.Backoff); }
  get jitterMs(): number { return this.word(W.JitterMs); }
  get ejected(): boolean { return this.word(W.Ejected) === 1; }
}

export interface DetectorOptions {
  /** Monotonic milliseconds (tests pass a fake clock). */
  readonly now?: () => number;
  /** [0, 1) (tests pass a fixed sequence). */
  readonly random?: () => number;
  /** Called after every ejection or un-ejection (membership gauges). */
  readonly onChange?: () => void;
  /** The cluster's name: its state is shared with the other threads' detectors of that name (when they share). */
  readonly cluster?: string;
}

export interface SuccessRateNumbers { readonly average: number; readonly threshold: number }

/** Milliseconds every thread reads alike (performance.now() starts at each thread's own origin). */
function processClock(): number {
  return performance.timeOrigin + performance.now();
}

/** `a - b` for times kept modulo 2^32. */
function since(a: number, b: number): number {
  return ((a | 0) - b) | 0;
}

/** One cluster's outlier detector. */
export class OutlierDetector {
  readonly config: OutlierConfig;
  readonly stats: OutlierStats;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly onChange: () => void;
  private readonly name: string | undefined;
  /** Generation and active ejections of the cluster. */
  private readonly cc: Int32Array;
  private readonly ca: number;
  private readonly shared: boolean;
  /** The cluster generation this thread's hosts' `ejected` flags reflect. */
  private seen = 0;
  /** Every host of the cluster: the sweep walks them, max_ejection_percent counts them. */
  private hosts: readonly Host[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Last sweep's success-rate mean and threshold (-1 when not computed), for /clusters. */
  externalNumbers: SuccessRateNumbers = { average: -1, threshold: -1 };
  localNumbers: SuccessRateNumbers = { average: -1, threshold: -1 };

  constructor(config: OutlierConfig, stats: OutlierStats, opts: DetectorOptions = {}) {
    this.config = config;
    this.stats = stats;
    this.now = opts.now ?? processClock;
    this.random = opts.random ?? Math.random;
    this.onChange = opts.onChange ?? noop;
    this.name = opts.cluster;
    const c = clusterCells(opts.cluster);
    this.cc = c.cells;
    this.ca = c.at;
    this.shared = c.shared;
    this.seen = Atomics.load(this.cc, this.ca + ClusterWord.Generation);
  }

  /** Whether this thread sweeps and publishes ejections_active: always alone, only the main thread when shared. */
  private get sweeps(): boolean { return !this.shared || sweepsOutliers(); }

  /** Arms the interval sweep (unref'd) on the thread that sweeps. */
  start(): void {
    if (!this.timer && this.sweeps) this.timer = setInterval(sweepNow, this.config.intervalMs, this).unref();
  }

  /**
   * The cluster is closed (removed, or replaced by an update). Its ejections end with it, as a new
   * cluster's hosts start fresh in Envoy; shared entries outlive the cluster, so the sweeping thread
   * gives them back.
   */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.shared && this.sweeps) for (const h of this.hosts) this.release(h, this.state(h));
  }

  private state(h: Host): HostOutlier {
    return h.outlier ?? (h.outlier = new HostOutlier(hostCells(this.name, h.hostPort)));
  }

  /**
   * The cluster's current hosts. The sweeping thread (the first to apply an update) gives hosts that
   * left while ejected back their place among the active ejections, and new hosts fresh counters.
   */
  setHosts(hosts: readonly Host[]): void {
    if (this.sweeps) {
      const keep = new Set(hosts);
      for (const h of this.hosts) {
        if (!keep.has(h)) this.release(h, this.state(h));
      }
      const had = this.shared ? new Set(this.hosts) : undefined;
      for (const h of hosts) {
        if (had === undefined || had.has(h)) continue;
        // An entry kept from an earlier host of that address: its counts are not this host's.
        const s = this.state(h);
        s.cells.fill(0, s.at, s.at + W.Ejected);
      }
      this.publishActive();
    }
    this.hosts = hosts;
    this.seen = NaN; // no generation equals it: the next sync walks the new hosts
    this.sync();
  }

  get ejectedCount(): number { return Atomics.load(this.cc, this.ca + ClusterWord.Active); }

  /**
   * Brings this thread's hosts' `ejected` flags up to the cluster's shared state: called before each
   * pick, it costs one atomic load unless another thread ejected or un-ejected a host since.
   */
  sync(): void {
    const g = Atomics.load(this.cc, this.ca + ClusterWord.Generation);
    if (g === this.seen) return;
    this.seen = g;
    let changed = false;
    for (const h of this.hosts) {
      const e = this.state(h).ejected;
      if (h.ejected !== e) { h.ejected = e; changed = true; }
    }
    if (changed) this.onChange();
  }

  /** ejections_active from the shared count (the sweeping thread publishes it; merged stats add threads up). */
  publishActive(): void {
    if (this.sweeps) this.stats.active.set(this.ejectedCount);
  }

  /** One attempt's outcome (see UpstreamResult). */
  record(host: Host, result: UpstreamResultCode): void {
    const s = this.state(host);
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

  // Counts are added atomically: of the threads whose errors reach a threshold together, exactly one sees it.
  private httpCode(host: Host, s: HostOutlier, code: number): void {
    const c = this.config, cells = s.cells, at = s.at;
    Atomics.add(cells, at + W.ExternalTotal, 1);
    if (code >= 500 && code < 600) {
      if (code >= 502 && code <= 504) {
        if (Atomics.add(cells, at + W.ConsecutiveGateway, 1) + 1 === c.consecutiveGatewayFailure) this.consecutive(host, s, Type.Gateway);
      } else Atomics.store(cells, at + W.ConsecutiveGateway, 0);
      if (Atomics.add(cells, at + W.Consecutive5xx, 1) + 1 === c.consecutive5xx) this.consecutive(host, s, Type.C5xx);
    } else {
      Atomics.add(cells, at + W.ExternalSuccess, 1);
      Atomics.store(cells, at + W.Consecutive5xx, 0);
      Atomics.store(cells, at + W.ConsecutiveGateway, 0);
    }
  }

  private localSuccess(s: HostOutlier): void {
    Atomics.add(s.cells, s.at + W.LocalTotal, 1);
    Atomics.add(s.cells, s.at + W.LocalSuccess, 1);
    Atomics.store(s.cells, s.at + W.ConsecutiveLocal, 0);
  }

  private localFailure(host: Host, s: HostOutlier): void {
    Atomics.add(s.cells, s.at + W.LocalTotal, 1);
    if (Atomics.add(s.cells, s.at + W.ConsecutiveLocal, 1) + 1 === this.config.consecutiveLocalOriginFailure) this.consecutive(host, s, Type.LocalOrigin);
  }

  /** A consecutive-error threshold was reached. An ejected host keeps its count (Envoy ignores the event). */
  private consecutive(host: Host, s: HostOutlier, type: EjectionType): void {
    if (s.ejected || !this.hosts.includes(host)) return;
    this.stats.detected[type].inc();
    this.eject(host, s, type);
    const w = type === Type.C5xx ? W.Consecutive5xx : type === Type.Gateway ? W.ConsecutiveGateway : W.ConsecutiveLocal;
    if (type === Type.C5xx) this.stats.consecutive5xx.inc();
    Atomics.store(s.cells, s.at + w, 0);
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

  /** Whether one more ejection fits max_ejection_percent (always_eject_one_host lets the first one through). */
  private allowed(active: number): boolean {
    const c = this.config;
    return (100 * (active + 1)) / this.hosts.length <= c.maxEjectionPercent || (c.alwaysEjectOneHost && active === 0);
  }

  /**
   * Ejects unless that would take the ejected share above max_ejection_percent, and only with the
   * type's enforcing_* probability. The host's flag and the cluster's count are claimed with
   * compare-and-swap, so two threads never eject one host twice nor together pass the cap.
   */
  private eject(host: Host, s: HostOutlier, type: EjectionType): void {
    const c = this.config, cc = this.cc, active = this.ca + ClusterWord.Active;
    if (!this.allowed(Atomics.load(cc, active))) { this.stats.overflow.inc(); return; }
    if (type === Type.C5xx || type === Type.SuccessRate) this.stats.total.inc();
    const pct = this.enforcing(type);
    if (pct <= 0 || (pct < 100 && this.random() * 100 >= pct)) return;
    const cells = s.cells, at = s.at;
    if (Atomics.compareExchange(cells, at + W.Ejected, 0, 1) !== 0) return;
    for (;;) {
      const n = Atomics.load(cc, active);
      if (!this.allowed(n)) { Atomics.store(cells, at + W.Ejected, 0); this.stats.overflow.inc(); return; }
      if (Atomics.compareExchange(cc, active, n, n + 1) === n) break;
    }
    this.stats.enforcedTotal.inc();
    this.stats.enforced[type].inc();
    Atomics.add(cells, at + W.NumEjections, 1);
    Atomics.store(cells, at + W.LastEjection, this.now() | 0);
    Atomics.store(cells, at + W.JitterMs, c.maxEjectionTimeJitterMs > 0 ? Math.floor(this.random() * (c.maxEjectionTimeJitterMs + 1)) : 0);
    const backoff = Atomics.load(cells, at + W.Backoff);
    if (backoff * c.baseEjectionTimeMs < c.maxEjectionTimeMs + c.baseEjectionTimeMs) Atomics.store(cells, at + W.Backoff, backoff + 1);
    this.changed(host, true);
  }

  /** The host is no longer ejected, and no longer counts among the active ejections. */
  private release(host: Host, s: HostOutlier): void {
    if (Atomics.compareExchange(s.cells, s.at + W.Ejected, 1, 0) !== 1) return;
    Atomics.sub(this.cc, this.ca + ClusterWord.Active, 1);
    this.changed(host, false);
  }

  private changed(host: Host, ejected: boolean): void {
    // This thread's flags stay current through its own change: sync() walks the hosts only when another
    // thread changed one since (the generation moved by more than this change).
    if (Atomics.add(this.cc, this.ca + ClusterWord.Generation, 1) === this.seen) this.seen++;
    host.ejected = ejected;
    this.publishActive();
    this.onChange();
  }

  private uneject(host: Host, s: HostOutlier, now: number): void {
    // Fresh counters, so a host close to a threshold is not re-ejected on its first error.
    s.cells.fill(0, s.at + W.Consecutive5xx, s.at + W.ConsecutiveLocal + 1);
    Atomics.store(s.cells, s.at + W.LastUnejection, now | 0);
    Atomics.store(s.cells, s.at + W.Unejected, 1);
    this.release(host, s);
  }

  /** The ejection time a host serves now: base × backoff, capped at max, plus its jitter. */
  ejectionTimeMs(s: HostOutlier): number {
    return Math.min(this.config.baseEjectionTimeMs * s.backoff, this.config.maxEjectionTimeMs) + s.jitterMs;
  }

  /** The interval sweep: un-eject served time, judge the last interval's success rates, decay backoff. */
  sweep(): void {
    this.sync();
    const now = this.now();
    const hosts = this.hosts;
    for (let i = 0; i < hosts.length; i++) {
      const h = hosts[i];
      const s = this.state(h);
      if (s.ejected && since(now, s.word(W.LastEjection)) >= this.ejectionTimeMs(s)) this.uneject(h, s, now);
      const c = s.cells, at = s.at;
      s.external.swap(Atomics.exchange(c, at + W.ExternalTotal, 0), Atomics.exchange(c, at + W.ExternalSuccess, 0));
      s.local.swap(Atomics.exchange(c, at + W.LocalTotal, 0), Atomics.exchange(c, at + W.LocalSuccess, 0));
    }
    this.externalNumbers = this.successRateEjections(false);
    this.localNumbers = this.successRateEjections(true);
    for (let i = 0; i < hosts.length; i++) {
      const s = this.state(hosts[i]);
      const backoff = s.backoff;
      if (!s.ejected && s.word(W.Unejected) === 1 && since(now, s.word(W.LastUnejection)) >= this.config.intervalMs && backoff > 0) {
        Atomics.store(s.cells, s.at + W.Backoff, backoff - 1);
      }
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
