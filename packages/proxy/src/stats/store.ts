import type { LabelledFamily } from './labelled.ts';
import type { StatsMatcher } from './matcher.ts';

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
 * Envoy's null stats: what a stat the stats matcher rejects is. One of each, shared: writes are
 * dropped and reads see 0, so a rejected stat costs no memory at all (5,000 clusters under Istio's
 * inclusion list hold ~170,000 of them).
 */
function nullStat<T extends Counter | Gauge>(stat: T): T {
  Object.defineProperty(stat, 'value', { get: () => 0, set: () => {} });
  return Object.freeze(stat);
}
export const NULL_COUNTER: Counter = nullStat(new Counter());
export const NULL_GAUGE: Gauge = nullStat(new Gauge());
export const NULL_HISTOGRAM: Histogram = (() => {
  const h = new Histogram();
  h.record = () => {};
  return Object.freeze(h);
})();

/**
 * How the stats of one scope show in Prometheus: a stat named `prefix + rest` is `base + rest` with
 * the tags. One record per scope prefix, shared by its stats.
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

/**
 * The stats under one scope prefix (`cluster.<name>.`), by the rest of their names. Scoped stats live
 * here, not in one process-wide map: 20,000 clusters make ~1.2M stats, and growing a Map that size
 * rehashes it in one 50–250 ms step; full names are only built when stats are read.
 */
export class StatGroup {
  readonly tags: StatTags;
  readonly counters = new Map<string, Counter>();
  readonly gauges = new Map<string, Gauge>();
  readonly histograms = new Map<string, Histogram>();
  constructor(tags: StatTags) { this.tags = tags; }
  get empty(): boolean { return this.counters.size === 0 && this.gauges.size === 0 && this.histograms.size === 0; }
}

type StatKind = 'counters' | 'gauges' | 'histograms';
interface StatOf { counters: Counter; gauges: Gauge; histograms: Histogram }

export class StatsStore {
  /** Labelled metric families (Istio's istio_* metrics), by exported name: see labelled.ts. */
  readonly families = new Map<string, LabelledFamily>();
  /** Stats created by full name, outside any scope. */
  readonly counters = new Map<string, Counter>();
  readonly gauges = new Map<string, Gauge>();
  readonly histograms = new Map<string, Histogram>();
  /** Scoped stats by scope prefix (names like Istio's cluster names contain dots, so prefixes cannot be parsed back). */
  readonly groups = new Map<string, StatGroup>();
  /**
   * stats_config.stats_matcher. A stat it rejects is a shared null stat (NULL_COUNTER...): its holder
   * may bump it as always, nothing is kept or published, and it reads 0, as Envoy's null stats do.
   */
  matcher: StatsMatcher | undefined;
  /** deferred_stat_options.enable_deferred_creation_stats: cluster traffic stats made on first use. */
  deferredClusterStats = false;

  /** Whether a stat of this full name is instantiated (no matcher: every stat). */
  accepts(name: string): boolean {
    return this.matcher === undefined || this.matcher.accepts(name);
  }

  /** `scope('cluster', 'envoy_cluster_name', name)` → stats named `cluster.<name>.<stat>`, tagged. */
  scope(kind: string, tag: string, value: string): Scope {
    return new Scope(this, `${kind}.${value}.`, `${kind}.`, [[tag, value]]);
  }

  group(prefix: string, base: string, tags: ReadonlyArray<readonly [string, string]>): StatGroup {
    let g = this.groups.get(prefix);
    if (!g) { g = new StatGroup({ prefix, base, tags }); this.groups.set(prefix, g); }
    return g;
  }

  counter(name: string): Counter {
    let c = this.counters.get(name);
    if (!c) {
      if (!this.accepts(name)) return NULL_COUNTER;
      c = new Counter();
      this.counters.set(name, c);
    }
    return c;
  }

  gauge(name: string): Gauge {
    let g = this.gauges.get(name);
    if (!g) {
      if (!this.accepts(name)) return NULL_GAUGE;
      g = new Gauge();
      this.gauges.set(name, g);
    }
    return g;
  }

  histogram(name: string): Histogram {
    let h = this.histograms.get(name);
    if (!h) {
      if (!this.accepts(name)) return NULL_HISTOGRAM;
      h = new Histogram();
      this.histograms.set(name, h);
    }
    return h;
  }

  /** Every stat of a kind with its full name and, for scoped stats, its scope's tags (read paths only). */
  each<K extends StatKind>(kind: K, fn: (name: string, stat: StatOf[K], tags: StatTags | undefined) => void): void {
    for (const [name, stat] of this[kind] as Map<string, StatOf[K]>) fn(name, stat, undefined);
    for (const g of this.groups.values()) {
      for (const [rest, stat] of g[kind] as Map<string, StatOf[K]>) fn(g.tags.prefix + rest, stat, g.tags);
    }
  }

  /** A stat by its full name, scoped or not, without creating it (admin and tests). */
  find<K extends StatKind>(kind: K, name: string): StatOf[K] | undefined {
    const flat = (this[kind] as Map<string, StatOf[K]>).get(name);
    if (flat) return flat;
    for (let dot = name.indexOf('.'); dot !== -1; dot = name.indexOf('.', dot + 1)) {
      const g = this.groups.get(name.slice(0, dot + 1));
      const stat = g && (g[kind] as Map<string, StatOf[K]>).get(name.slice(dot + 1));
      if (stat) return stat;
    }
    return undefined;
  }

  /** The tags of a scoped stat by its full name. */
  tagsOf(name: string): StatTags | undefined {
    for (let dot = name.indexOf('.'); dot !== -1; dot = name.indexOf('.', dot + 1)) {
      const g = this.groups.get(name.slice(0, dot + 1));
      if (g) return g.tags;
    }
    return undefined;
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

/** A named group of stats sharing a prefix and Prometheus tags; several scopes may share one prefix. */
export class Scope {
  private readonly store: StatsStore;
  private readonly prefix: string;
  private readonly base: string;
  private readonly tags: ReadonlyArray<readonly [string, string]>;
  /** Made with the first stat kept: a scope whose stats the matcher rejects has no group at all. */
  private group_: StatGroup | undefined;
  /** Every name this scope handed out, for release(). */
  private readonly created: string[] = [];

  constructor(store: StatsStore, prefix: string, base: string, tags: ReadonlyArray<readonly [string, string]>) {
    this.store = store;
    this.prefix = prefix;
    this.base = base;
    this.tags = tags;
  }

  private get group(): StatGroup {
    return (this.group_ ??= this.store.group(this.prefix, this.base, this.tags));
  }

  /** The group, when this scope or another one of its prefix made it already. */
  private existing(): StatGroup | undefined {
    return (this.group_ ??= this.store.groups.get(this.prefix));
  }

  /**
   * Deletes every stat this scope handed out (a removed cluster's: Envoy drops a cluster's stats
   * with it). Holders of the old objects may still bump them; they are no longer published.
   */
  release(): void {
    const g = this.group_;
    if (!g) return;
    for (const rest of this.created) { g.counters.delete(rest); g.gauges.delete(rest); g.histograms.delete(rest); }
    this.created.length = 0;
    if (g.empty && this.store.groups.get(g.tags.prefix) === g) this.store.groups.delete(g.tags.prefix);
  }

  /** stats_config.stats_matcher on the full name (a rejected stat is a null stat). */
  private keep(rest: string): boolean {
    return this.store.matcher === undefined || this.store.accepts(this.prefix + rest);
  }

  counter(rest: string): Counter {
    let c = this.existing()?.counters.get(rest);
    if (!c) {
      if (!this.keep(rest)) return NULL_COUNTER;
      c = new Counter();
      this.group.counters.set(rest, c);
    }
    this.created.push(rest);
    return c;
  }

  gauge(rest: string): Gauge {
    let g = this.existing()?.gauges.get(rest);
    if (!g) {
      if (!this.keep(rest)) return NULL_GAUGE;
      g = new Gauge();
      this.group.gauges.set(rest, g);
    }
    this.created.push(rest);
    return g;
  }

  histogram(rest: string): Histogram {
    let h = this.existing()?.histograms.get(rest);
    if (!h) {
      if (!this.keep(rest)) return NULL_HISTOGRAM;
      h = new Histogram();
      this.group.histograms.set(rest, h);
    }
    this.created.push(rest);
    return h;
  }
}
