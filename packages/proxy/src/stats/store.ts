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

const NO_SAMPLES: ArrayLike<number> = Object.freeze(new Array<number>(HISTOGRAM_BOUNDS.length).fill(0));

export class Histogram {
  /** Made on the first sample: most of 20,000 clusters' upstream_rq_time never get one. */
  private counts: Float64Array | undefined;
  count = 0;
  sum = 0;

  /** Samples per bucket (HISTOGRAM_BOUNDS), not cumulative. */
  get buckets(): ArrayLike<number> {
    return this.counts ?? NO_SAMPLES;
  }

  record(v: number): void {
    this.count++;
    this.sum += v;
    for (let i = 0; i < HISTOGRAM_BOUNDS.length; i++) {
      if (v <= HISTOGRAM_BOUNDS[i]) { (this.counts ??= new Float64Array(HISTOGRAM_BOUNDS.length))[i]++; return; }
    }
  }

  /** Adds another histogram's samples (another thread's, at scrape time). */
  add(buckets: ArrayLike<number>, count: number, sum: number): void {
    this.count += count;
    this.sum += sum;
    const counts = (this.counts ??= new Float64Array(HISTOGRAM_BOUNDS.length));
    for (let i = 0; i < counts.length; i++) counts[i] += buckets[i];
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
  h.add = () => {};
  return Object.freeze(h) as Histogram;
})();

/** Whether a stat is one of the shared null stats (the matcher rejected it). */
export function isNullStat(s: Counter | Gauge | Histogram): boolean {
  return s === NULL_COUNTER || s === NULL_GAUGE || s === NULL_HISTOGRAM;
}

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

export type StatKind = 'counters' | 'gauges' | 'histograms';
export interface StatOf { counters: Counter; gauges: Gauge; histograms: Histogram }
/** Calls `fn` for every stat of a kind with its name. */
export type EachStat = <K extends StatKind>(kind: K, fn: (name: string, stat: StatOf[K]) => void) => void;
type Stat = Counter | Gauge | Histogram;

/**
 * The names of the stats that groups of one base (`cluster.`) have, each at a fixed slot, shared by
 * every such group: 20,000 clusters hold their ~45 stats each in three small arrays instead of three
 * maps, and the names once.
 */
export class StatSchema {
  private readonly slots = { counters: new Map<string, number>(), gauges: new Map<string, number>(), histograms: new Map<string, number>() };
  readonly names: Readonly<Record<StatKind, string[]>> = { counters: [], gauges: [], histograms: [] };

  slot(kind: StatKind, rest: string): number {
    let i = this.slots[kind].get(rest);
    if (i === undefined) {
      i = this.names[kind].length;
      this.names[kind].push(rest);
      this.slots[kind].set(rest, i);
    }
    return i;
  }

  find(kind: StatKind, rest: string): number | undefined {
    return this.slots[kind].get(rest);
  }
}

/**
 * The stats under one scope prefix (`cluster.<name>.`), by their slot in the base's schema. Scoped
 * stats live here, not in one process-wide map: 20,000 clusters make ~1.2M stats, and growing a Map
 * that size rehashes it in one 50–250 ms step; full names are only built when stats are read.
 */
export class StatGroup {
  readonly tags: StatTags;
  readonly schema: StatSchema;
  private readonly stats: { counters: Array<Counter | undefined>; gauges: Array<Gauge | undefined>; histograms: Array<Histogram | undefined> } =
    { counters: [], gauges: [], histograms: [] };
  private live = 0;

  constructor(tags: StatTags, schema: StatSchema) {
    this.tags = tags;
    this.schema = schema;
  }

  get empty(): boolean { return this.live === 0; }

  at<K extends StatKind>(kind: K, slot: number): StatOf[K] | undefined {
    return this.stats[kind][slot] as StatOf[K] | undefined;
  }

  /** The stat in `slot`, made by `make` if there is none. */
  ensure<K extends StatKind>(kind: K, slot: number, make: () => StatOf[K]): StatOf[K] {
    const list = this.stats[kind] as Array<StatOf[K] | undefined>;
    let stat = list[slot];
    if (stat === undefined) {
      // Slots are handed out in order: fill any gap so the array stays packed.
      while (list.length < slot) list.push(undefined);
      stat = make();
      list[slot] = stat;
      this.live++;
    }
    return stat;
  }

  delete(kind: StatKind, slot: number): void {
    const list = this.stats[kind] as Array<Stat | undefined>;
    if (list[slot] === undefined) return;
    list[slot] = undefined;
    this.live--;
  }

  /** Every stat of a kind by the rest of its name. */
  each<K extends StatKind>(kind: K, fn: (rest: string, stat: StatOf[K]) => void): void {
    const list = this.stats[kind] as Array<StatOf[K] | undefined>;
    const names = this.schema.names[kind];
    for (let i = 0; i < list.length; i++) {
      const stat = list[i];
      if (stat !== undefined) fn(names[i], stat);
    }
  }

  get<K extends StatKind>(kind: K, rest: string): StatOf[K] | undefined {
    const slot = this.schema.find(kind, rest);
    return slot === undefined ? undefined : this.at(kind, slot);
  }
}

export class StatsStore {
  /** Labelled metric families (Istio's istio_* metrics), by exported name: see labelled.ts. */
  readonly families = new Map<string, LabelledFamily>();
  /** Stats created by full name, outside any scope. */
  readonly counters = new Map<string, Counter>();
  readonly gauges = new Map<string, Gauge>();
  readonly histograms = new Map<string, Histogram>();
  /** Scoped stats by scope prefix (names like Istio's cluster names contain dots, so prefixes cannot be parsed back). */
  readonly groups = new Map<string, StatGroup>();
  /** The stat names of each scope base (`cluster.`). */
  private readonly schemas = new Map<string, StatSchema>();
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
    if (!g) {
      let schema = this.schemas.get(base);
      if (!schema) { schema = new StatSchema(); this.schemas.set(base, schema); }
      g = new StatGroup({ prefix, base, tags }, schema);
      this.groups.set(prefix, g);
    }
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

  /** The stats created by full name, outside any scope. */
  eachUnscoped<K extends StatKind>(kind: K, fn: (name: string, stat: StatOf[K]) => void): void {
    for (const [name, stat] of this[kind] as Map<string, StatOf[K]>) fn(name, stat);
  }

  /** Every stat of a kind with its full name and, for scoped stats, its scope's tags (read paths only). */
  each<K extends StatKind>(kind: K, fn: (name: string, stat: StatOf[K], tags: StatTags | undefined) => void): void {
    for (const [name, stat] of this[kind] as Map<string, StatOf[K]>) fn(name, stat, undefined);
    for (const g of this.groups.values()) g.each(kind, (rest, stat) => fn(g.tags.prefix + rest, stat, g.tags));
  }

  /** A stat by its full name, scoped or not, without creating it (admin and tests). */
  find<K extends StatKind>(kind: K, name: string): StatOf[K] | undefined {
    const flat = (this[kind] as Map<string, StatOf[K]>).get(name);
    if (flat) return flat;
    for (let dot = name.indexOf('.'); dot !== -1; dot = name.indexOf('.', dot + 1)) {
      const stat = this.groups.get(name.slice(0, dot + 1))?.get(kind, name.slice(dot + 1));
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

const CLASS_NAMES = new Map<string, readonly string[]>();

/** `<prefix>_1xx` … `<prefix>_5xx`, built once per prefix. */
function classNames(prefix: string): readonly string[] {
  let names = CLASS_NAMES.get(prefix);
  if (!names) { names = [1, 2, 3, 4, 5].map((c) => `${prefix}_${c}xx`); CLASS_NAMES.set(prefix, names); }
  return names;
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
    this.byClass = classNames(prefix).map((name) => scope.counter(name));
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
  /** Made with the first stat kept: a scope whose stats the matcher all rejects has no group at all. */
  private group_: StatGroup | undefined;
  /**
   * Which slots this scope handed out, for release(): a bit set per kind, 31 slots a word (small
   * integers), word `w` of kind `k` at index 3w + k.
   */
  private readonly created: number[] = [];

  constructor(store: StatsStore, prefix: string, base: string, tags: ReadonlyArray<readonly [string, string]>) {
    this.store = store;
    this.prefix = prefix;
    this.base = base;
    this.tags = tags;
  }

  private get group(): StatGroup {
    return (this.group_ ??= this.store.group(this.prefix, this.base, this.tags));
  }

  /**
   * Deletes every stat this scope handed out (a removed cluster's: Envoy drops a cluster's stats
   * with it). Holders of the old objects may still bump them; they are no longer published.
   */
  release(): void {
    const g = this.group_;
    if (!g) return;
    for (let i = 0; i < this.created.length; i++) {
      const kind = KINDS[i % 3];
      const base = Math.floor(i / 3) * BITS;
      for (let bits = this.created[i]; bits !== 0; bits &= bits - 1) g.delete(kind, base + 31 - Math.clz32(bits & -bits));
    }
    this.created.length = 0;
    if (g.empty && this.store.groups.get(g.tags.prefix) === g) this.store.groups.delete(g.tags.prefix);
  }

  counter(rest: string): Counter {
    return this.keep(rest) ? this.get('counters', rest, newCounter) : NULL_COUNTER;
  }

  gauge(rest: string): Gauge {
    return this.keep(rest) ? this.get('gauges', rest, newGauge) : NULL_GAUGE;
  }

  histogram(rest: string): Histogram {
    return this.keep(rest) ? this.get('histograms', rest, newHistogram) : NULL_HISTOGRAM;
  }

  /** stats_config.stats_matcher on the full name (a rejected stat is a null stat). */
  private keep(rest: string): boolean {
    return this.store.matcher === undefined || this.store.accepts(this.prefix + rest);
  }

  private get<K extends StatKind>(kind: K, rest: string, make: () => StatOf[K]): StatOf[K] {
    const slot = this.group.schema.slot(kind, rest);
    const word = Math.floor(slot / BITS) * 3 + KINDS.indexOf(kind);
    while (this.created.length <= word) this.created.push(0);
    this.created[word] |= 1 << (slot % BITS);
    return this.group.ensure(kind, slot, make);
  }
}

const KINDS: readonly StatKind[] = ['counters', 'gauges', 'histograms'];
const BITS = 31;
const newCounter = (): Counter => new Counter();
const newGauge = (): Gauge => new Gauge();
const newHistogram = (): Histogram => new Histogram();
