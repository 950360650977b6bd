import type { LabelledFamily } from './labelled.ts';

/**
 * Envoy-style stats: flat dotted names (`cluster.backend.upstream_rq_total`).
 * The hot path holds Counter/Gauge objects and bumps plain numbers; names and
 * Prometheus tags are only worked out at scrape time.
 */
export class Counter {
  value = 0;
  inc(n = 1): void { this.value += n; }
}

export class Gauge {
  value = 0;
  inc(n = 1): void { this.value += n; }
  dec(n = 1): void { this.value -= n; }
  set(n: number): void { this.value = n; }
}

/** A histogram with Envoy's default bucket bounds (milliseconds). */
export const HISTOGRAM_BOUNDS = [0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000];

export class Histogram {
  readonly buckets = new Float64Array(HISTOGRAM_BOUNDS.length);
  count = 0;
  sum = 0;
  record(v: number): void {
    this.count++;
    this.sum += v;
    for (let i = 0; i < HISTOGRAM_BOUNDS.length; i++) {
      if (v <= HISTOGRAM_BOUNDS[i]) { this.buckets[i]++; return; }
    }
  }
}

/**
 * How the stats of one scope show in Prometheus: a stat named `prefix + rest` is `base + rest` with
 * the tags. One record per scope, shared by its stats (20,000 clusters have 860,000 stats).
 */
export interface StatTags {
  readonly prefix: string;
  readonly base: string;
  readonly tags: ReadonlyArray<readonly [string, string]>;
}

/** A stat's name with its tag values removed (`cluster.backend.upstream_rq_total` → `cluster.upstream_rq_total`). */
export function statBase(name: string, t: StatTags): string {
  return t.base + name.slice(t.prefix.length);
}

export class StatsStore {
  /** Labelled metric families (Istio's istio_* metrics), by exported name: see labelled.ts. */
  readonly families = new Map<string, LabelledFamily>();
  readonly counters = new Map<string, Counter>();
  readonly gauges = new Map<string, Gauge>();
  readonly histograms = new Map<string, Histogram>();
  /** Tags of stats created through a scope (names like Istio's cluster names contain dots, so they cannot be parsed back). */
  readonly tags = new Map<string, StatTags>();

  /** `scope('cluster', 'envoy_cluster_name', name)` → stats named `cluster.<name>.<stat>`, tagged. */
  scope(kind: string, tag: string, value: string): Scope {
    return new Scope(this, `${kind}.${value}.`, `${kind}.`, [[tag, value]]);
  }

  counter(name: string): Counter {
    let c = this.counters.get(name);
    if (!c) { c = new Counter(); this.counters.set(name, c); }
    return c;
  }

  gauge(name: string): Gauge {
    let g = this.gauges.get(name);
    if (!g) { g = new Gauge(); this.gauges.set(name, g); }
    return g;
  }

  histogram(name: string): Histogram {
    let h = this.histograms.get(name);
    if (!h) { h = new Histogram(); this.histograms.set(name, h); }
    return h;
  }
}

/**
 * Response-code counters: by class (`<prefix>_2xx`) and, when `exact`, by code
 * (`<prefix>_200`, created on first use), as Envoy's upstream stats have both.
 */
export class CodeClassCounters {
  readonly byClass: Counter[];
  private readonly exact: Array<Counter | undefined> | undefined;
  private readonly scope: Scope;
  private readonly prefix: string;
  constructor(scope: Scope, prefix: string, exact = false) {
    this.scope = scope;
    this.prefix = prefix;
    this.byClass = [1, 2, 3, 4, 5].map((c) => scope.counter(`${prefix}_${c}xx`));
    this.exact = exact ? [] : undefined;
  }
  record(status: number): void {
    const c = this.byClass[((status / 100) | 0) - 1];
    if (c) c.value++;
    if (this.exact && status >= 100 && status < 600) {
      (this.exact[status] ??= this.scope.counter(`${this.prefix}_${status}`)).value++;
    }
  }
}

/** A named group of stats sharing a prefix and Prometheus tags. */
export class Scope {
  private readonly store: StatsStore;
  private readonly prefix: string;
  private readonly record: StatTags;
  /** Every name handed out, for release(). */
  private readonly created: string[] = [];

  constructor(store: StatsStore, prefix: string, base: string, tags: ReadonlyArray<readonly [string, string]>) {
    this.store = store;
    this.prefix = prefix;
    this.record = { prefix, base, tags };
  }

  private tag(suffix: string): string {
    const name = this.prefix + suffix;
    if (!this.store.tags.has(name)) this.store.tags.set(name, this.record);
    this.created.push(name);
    return name;
  }

  /**
   * Deletes every stat this scope handed out (a removed cluster's: Envoy drops a cluster's stats
   * with it). Holders of the old objects may still bump them; they are no longer published.
   */
  release(): void {
    const s = this.store;
    for (const name of this.created) { s.counters.delete(name); s.gauges.delete(name); s.histograms.delete(name); s.tags.delete(name); }
    this.created.length = 0;
  }

  counter(suffix: string): Counter { return this.store.counter(this.tag(suffix)); }
  gauge(suffix: string): Gauge { return this.store.gauge(this.tag(suffix)); }
  histogram(suffix: string): Histogram { return this.store.histogram(this.tag(suffix)); }
}
