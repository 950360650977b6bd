import type { Msg } from '../config/fields.ts';

/**
 * Priority levels, panic mode and locality weighting as Envoy computes them
 * (arch overview "Priority levels", "Panic threshold", "Locality weighted load
 * balancing", "Overprovisioning factor"). Everything here is built once per
 * host-set or health change; a pick is one random number and no allocation.
 */

/** What this module reads of a host. `Host` (host.ts) satisfies it; the optional fields default as noted. */
export interface LbHost {
  readonly priority: number;
  readonly weight: number;
  /** Available for traffic (Envoy: healthy or degraded). */
  readonly healthy: boolean;
  /** Available but degraded (EDS health_status DEGRADED): only used once healthy hosts run short. Default false. */
  readonly degraded?: boolean;
  readonly zone: string;
  readonly region?: string;
  readonly subZone?: string;
  /**
   * LocalityLbEndpoints.load_balancing_weight of the host's locality. Envoy reads an unset
   * weight as 0, which only matters with locality_weighted_lb_config. Default 0.
   */
  readonly localityWeight?: number;
}

/** The cluster settings that shape priority and locality choice. */
export interface LocalityLbOptions {
  /** ClusterLoadAssignment.policy.overprovisioning_factor, percent (default 140). */
  readonly overprovisioningFactor: number;
  /** common_lb_config.healthy_panic_threshold, percent (default 50; 0 disables panic). */
  readonly panicThreshold: number;
  /** ClusterLoadAssignment.policy.weighted_priority_health: priority health from host weights, not counts. */
  readonly weightedPriorityHealth: boolean;
  /** common_lb_config.locality_weighted_lb_config is present. */
  readonly localityWeighted: boolean;
  /** common_lb_config.zone_aware_lb_config.fail_traffic_on_panic: a level in panic gets no host at all. */
  readonly failTrafficOnPanic: boolean;
}

export const DEFAULT_LOCALITY_LB: LocalityLbOptions = Object.freeze({
  overprovisioningFactor: 140,
  panicThreshold: 50,
  weightedPriorityHealth: false,
  localityWeighted: false,
  failTrafficOnPanic: false,
});

/** Reads the LocalityLbOptions fields of one Cluster (its load_assignment.policy and common_lb_config). */
export function compileLocalityLbOptions(cluster: Msg): LocalityLbOptions {
  const policy = compileLoadAssignmentPolicy(cluster.msg('load_assignment'));
  const c = cluster.msg('common_lb_config');
  let panicThreshold = 50;
  let localityWeighted = false;
  let failTrafficOnPanic = false;
  if (c) {
    const t = c.msg('healthy_panic_threshold');
    if (t) {
      const v = t.num('value');
      if (v < 0 || v > 100) throw c.error('healthy_panic_threshold', 'must be a percentage between 0 and 100');
      panicThreshold = Math.round(v);
    }
    localityWeighted = c.has('locality_weighted_lb_config');
    const za = c.msg('zone_aware_lb_config');
    if (za) {
      if (localityWeighted) throw c.error('zone_aware_lb_config', 'cannot be combined with locality_weighted_lb_config (one locality_config_specifier)');
      failTrafficOnPanic = za.bool('fail_traffic_on_panic');
    }
  }
  return { ...policy, panicThreshold, localityWeighted, failTrafficOnPanic };
}

/** ClusterLoadAssignment.policy: overprovisioning_factor and weighted_priority_health (EDS sends these per assignment). */
export function compileLoadAssignmentPolicy(cla: Msg | undefined): { overprovisioningFactor: number; weightedPriorityHealth: boolean } {
  const p = cla?.msg('policy');
  if (!p) return { overprovisioningFactor: 140, weightedPriorityHealth: false };
  const f = p.num('overprovisioning_factor', 140);
  if (!Number.isInteger(f) || f <= 0) throw p.error('overprovisioning_factor', 'must be a positive integer (percent)');
  return { overprovisioningFactor: f, weightedPriorityHealth: p.bool('weighted_priority_health') };
}

// ---------------------------------------------------------------------------------------------
// Priority load

/** Host counts (and weight sums) of one priority level, what the priority load is computed from. */
export interface PriorityCounts {
  readonly hosts: number;
  readonly healthy: number;
  readonly degraded: number;
  readonly totalWeight: number;
  readonly healthyWeight: number;
  readonly degradedWeight: number;
}

/** How traffic splits over priority levels, in whole percent, and which levels are in panic. */
export interface PriorityLoad {
  /** Percent of traffic for the healthy hosts of each level. */
  readonly healthy: readonly number[];
  /** Percent of traffic for the degraded hosts of each level (healthy + degraded sums to 100). */
  readonly degraded: readonly number[];
  /** Each level's healthy availability: min(100, factor × healthy / total). */
  readonly health: readonly number[];
  readonly degradedHealth: readonly number[];
  /** min(100, Σ health + Σ degraded health). */
  readonly normalizedTotalAvailability: number;
  readonly panic: readonly boolean[];
  /** Every level in panic: load follows host counts instead of health. */
  readonly totalPanic: boolean;
}

/**
 * Envoy's LoadBalancerBase::recalculatePerPriorityState + recalculatePerPriorityPanic, integer
 * arithmetic included: availability per level, load handed out from P=0 down, the rounding
 * remainder to the first available level; panic is only considered when the normalized total
 * availability is below 100, and when every level is in panic the load follows host counts.
 */
export function computePriorityLoad(
  levels: readonly PriorityCounts[],
  opts: Pick<LocalityLbOptions, 'overprovisioningFactor' | 'panicThreshold' | 'weightedPriorityHealth'> = DEFAULT_LOCALITY_LB,
): PriorityLoad {
  const n = Math.max(levels.length, 1);
  const health = new Array<number>(n).fill(0);
  const degradedHealth = new Array<number>(n).fill(0);
  const healthy = new Array<number>(n).fill(0);
  const degraded = new Array<number>(n).fill(0);
  const panic = new Array<boolean>(n).fill(false);
  const factor = opts.overprovisioningFactor;
  for (let i = 0; i < levels.length; i++) {
    const l = levels[i];
    if (l.hosts === 0) continue;
    const total = opts.weightedPriorityHealth ? l.totalWeight : l.hosts;
    const hw = opts.weightedPriorityHealth ? l.healthyWeight : l.healthy;
    const dw = opts.weightedPriorityHealth ? l.degradedWeight : l.degraded;
    if (total <= 0) continue;
    health[i] = Math.min(100, Math.floor((factor * hw) / total));
    degradedHealth[i] = Math.min(100, Math.floor((factor * dw) / total));
  }
  let sum = 0;
  for (let i = 0; i < n; i++) sum += health[i] + degradedHealth[i];
  const normalized = Math.min(100, sum);

  if (normalized > 0) {
    const h = distributeLoad(healthy, health, 100, normalized);
    const d = distributeLoad(degraded, degradedHealth, h.remaining, normalized);
    // Rounding leftovers go to the first available level, healthy before degraded.
    if (d.remaining !== 0) {
      if (h.first !== -1) healthy[h.first] += d.remaining;
      else degraded[d.first] += d.remaining;
    }
  }

  const threshold = Math.min(100, opts.panicThreshold);
  let totalPanic = false;
  if (threshold === 0 && normalized === 0) {
    // Panic disabled and nothing available: P=0 nominally takes the load; no host will be found.
    healthy[0] = 100;
  } else {
    totalPanic = true;
    for (let i = 0; i < n; i++) {
      // Never panic while the levels together can carry all traffic.
      panic[i] = normalized === 100 ? false : levelInPanic(levels[i], threshold);
      totalPanic = totalPanic && panic[i];
    }
    if (totalPanic) loadInTotalPanic(levels, healthy, degraded);
  }
  return { healthy, degraded, health, degradedHealth, normalizedTotalAvailability: normalized, panic, totalPanic };
}

/** Assigns each level min(what is left, availability × 100 / normalized); returns the first available level. */
function distributeLoad(load: number[], availability: readonly number[], total: number, normalized: number): { first: number; remaining: number } {
  let first = -1;
  for (let i = 0; i < availability.length; i++) {
    if (first < 0 && availability[i] > 0) first = i;
    load[i] = Math.min(total, Math.floor((availability[i] * 100) / normalized));
    total -= load[i];
  }
  return { first, remaining: total };
}

function levelInPanic(l: PriorityCounts | undefined, threshold: number): boolean {
  const count = l?.hosts ?? 0;
  const healthyPercent = count === 0 ? 0 : (100 * l!.healthy) / count;
  const degradedPercent = count === 0 ? 0 : (100 * l!.degraded) / count;
  return healthyPercent + degradedPercent < threshold;
}

/** Every level in panic: each gets 100 × its hosts / all hosts, the remainder to the first non-empty one. */
function loadInTotalPanic(levels: readonly PriorityCounts[], healthy: number[], degraded: number[]): void {
  let all = 0;
  for (const l of levels) all += l.hosts;
  healthy.fill(0);
  degraded.fill(0);
  if (all === 0) { healthy[0] = 100; return; }
  let left = 100;
  let first = -1;
  for (let i = 0; i < levels.length; i++) {
    if (first === -1 && levels[i].hosts !== 0) first = i;
    const share = Math.floor((100 * levels[i].hosts) / all);
    healthy[i] = share;
    left -= share;
  }
  healthy[first] += left;
}

// ---------------------------------------------------------------------------------------------
// Localities

/** The hosts of one locality within one priority level. */
export interface Locality<T> {
  /** region/zone/sub_zone joined with '/', the identity of the locality. */
  readonly key: string;
  readonly region: string;
  readonly zone: string;
  readonly subZone: string;
  /** LocalityLbEndpoints.load_balancing_weight (0 when unset). */
  readonly weight: number;
  readonly hosts: readonly T[];
  readonly healthy: readonly T[];
  readonly degraded: readonly T[];
}

/**
 * Envoy's HostSetImpl::effectiveLocalityWeight: the locality weight scaled by its availability
 * with the overprovisioning factor, min(1, factor/100 × eligible/total).
 */
export function effectiveLocalityWeight(weight: number, eligible: number, total: number, overprovisioningFactor: number): number {
  if (total === 0) return 0;
  return weight * Math.min(1, (overprovisioningFactor / 100) * (eligible / total));
}

/**
 * Weighted choice over the localities of one level (effective weights > 0 only). Envoy walks
 * an EDF schedule; one uniform random number gives the same shares without per-pick state.
 */
export class LocalityPicker<T> {
  readonly localities: readonly Locality<T>[];
  /** The eligible hosts (healthy or degraded) of each entry of `localities`. */
  readonly eligible: readonly (readonly T[])[];
  readonly effectiveWeights: readonly number[];
  /** Running sums of effectiveWeights; the last is the total. */
  readonly cumulative: Float64Array;
  readonly total: number;

  constructor(localities: readonly Locality<T>[], eligible: readonly (readonly T[])[], weights: readonly number[]) {
    this.localities = localities;
    this.eligible = eligible;
    this.effectiveWeights = weights;
    this.cumulative = new Float64Array(weights.length);
    let acc = 0;
    for (let i = 0; i < weights.length; i++) { acc += weights[i]; this.cumulative[i] = acc; }
    this.total = acc;
  }

  /** The eligible hosts of the locality that `r` (uniform in [0, 1)) lands in. */
  pick(r: number): readonly T[] {
    const x = r * this.total;
    const c = this.cumulative;
    const last = c.length - 1;
    let i = 0;
    while (i < last && x >= c[i]) i++;
    return this.eligible[i];
  }

  /** Each locality's share of this level's traffic (effective weight / Σ), for tests and admin output. */
  shares(): number[] {
    return this.effectiveWeights.map((w) => w / this.total);
  }
}

/** Builds the picker for healthy (or degraded) hosts; undefined when no locality has an effective weight. */
function localityPicker<T extends LbHost>(localities: readonly Locality<T>[], which: 'healthy' | 'degraded', factor: number): LocalityPicker<T> | undefined {
  const picked: Locality<T>[] = [];
  const eligible: (readonly T[])[] = [];
  const weights: number[] = [];
  for (const l of localities) {
    const hosts = which === 'healthy' ? l.healthy : l.degraded;
    const w = effectiveLocalityWeight(l.weight, hosts.length, l.hosts.length, factor);
    if (w > 0) { picked.push(l); eligible.push(hosts); weights.push(w); }
  }
  return picked.length ? new LocalityPicker(picked, eligible, weights) : undefined;
}

/** Localities of one level, ordered like Envoy's LocalityLess: by region, then zone, then sub_zone. */
export function groupLocalities<T extends LbHost>(hosts: readonly T[]): Locality<T>[] {
  const byKey = new Map<string, { region: string; zone: string; subZone: string; weight: number; hosts: T[]; healthy: T[]; degraded: T[] }>();
  for (const h of hosts) {
    const region = h.region ?? '', zone = h.zone, subZone = h.subZone ?? '';
    const key = `${region}/${zone}/${subZone}`;
    let l = byKey.get(key);
    if (!l) { l = { region, zone, subZone, weight: 0, hosts: [], healthy: [], degraded: [] }; byKey.set(key, l); }
    l.weight = h.localityWeight ?? 0;
    l.hosts.push(h);
    if (isHealthy(h)) l.healthy.push(h);
    else if (isDegraded(h)) l.degraded.push(h);
  }
  const out: Locality<T>[] = [];
  for (const [key, l] of byKey) out.push({ key, ...l });
  out.sort((a, b) => cmp(a.region, b.region) || cmp(a.zone, b.zone) || cmp(a.subZone, b.subZone));
  return out;
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function isHealthy(h: LbHost): boolean {
  return h.healthy && h.degraded !== true;
}

export function isDegraded(h: LbHost): boolean {
  return h.healthy && h.degraded === true;
}

// ---------------------------------------------------------------------------------------------
// The plan a host set picks from

/** One priority level with everything a pick needs, precomputed. */
export interface PriorityLevel<T> {
  readonly priority: number;
  readonly hosts: readonly T[];
  readonly healthy: readonly T[];
  readonly degraded: readonly T[];
  readonly localities: readonly Locality<T>[];
  /** Percent of all traffic that goes to this level's healthy / degraded hosts. */
  readonly healthyLoad: number;
  readonly degradedLoad: number;
  readonly panic: boolean;
  /** Locality choice among healthy (degraded) hosts; undefined unless locality weighting is on and some locality has weight. */
  readonly healthyLocalities: LocalityPicker<T> | undefined;
  readonly degradedLocalities: LocalityPicker<T> | undefined;
}

const EMPTY: readonly never[] = Object.freeze([]);

/**
 * The priority/locality structure of one host set: hold one per HostSet (rebuild it when
 * membership or health changes) and call `hostsForRandom()` (or `hostsFor(r)`) per pick, then
 * run the cluster's algorithm (round robin, least request, random) over the returned hosts.
 */
export class PriorityPlan<T extends LbHost> {
  readonly options: LocalityLbOptions;
  readonly levels: readonly PriorityLevel<T>[];
  readonly load: PriorityLoad;
  /** Cumulative healthy loads then degraded loads, 2 × levels entries, for choosePriority. */
  private readonly cumulative: Int32Array;

  constructor(hosts: readonly T[], options: LocalityLbOptions = DEFAULT_LOCALITY_LB) {
    this.options = options;
    let maxPriority = 0;
    for (const h of hosts) if (h.priority > maxPriority) maxPriority = h.priority;
    const byPriority: T[][] = Array.from({ length: maxPriority + 1 }, () => []);
    for (const h of hosts) byPriority[h.priority].push(h);

    const counts: PriorityCounts[] = byPriority.map((level) => {
      let healthy = 0, degraded = 0, totalWeight = 0, healthyWeight = 0, degradedWeight = 0;
      for (const h of level) {
        totalWeight += h.weight;
        if (isHealthy(h)) { healthy++; healthyWeight += h.weight; } else if (isDegraded(h)) { degraded++; degradedWeight += h.weight; }
      }
      return { hosts: level.length, healthy, degraded, totalWeight, healthyWeight, degradedWeight };
    });
    const load = computePriorityLoad(counts, options);
    this.load = load;

    const factor = options.overprovisioningFactor;
    this.levels = byPriority.map((level, p) => {
      const localities = groupLocalities(level);
      return {
        priority: p,
        hosts: level,
        healthy: level.filter(isHealthy),
        degraded: level.filter(isDegraded),
        localities,
        healthyLoad: load.healthy[p],
        degradedLoad: load.degraded[p],
        panic: load.panic[p],
        healthyLocalities: options.localityWeighted ? localityPicker(localities, 'healthy', factor) : undefined,
        degradedLocalities: options.localityWeighted ? localityPicker(localities, 'degraded', factor) : undefined,
      };
    });

    const n = this.levels.length;
    this.cumulative = new Int32Array(2 * n);
    let acc = 0;
    for (let i = 0; i < n; i++) { acc += load.healthy[i]; this.cumulative[i] = acc; }
    for (let i = 0; i < n; i++) { acc += load.degraded[i]; this.cumulative[n + i] = acc; }
  }

  /**
   * Envoy's choosePriority for `bucket` = hash % 100 + 1 (1..100): returns the priority for
   * healthy hosts, or priority + levels.length when the bucket falls in a degraded share.
   */
  chooseSlot(bucket: number): number {
    const c = this.cumulative;
    for (let i = 0; i < c.length; i++) if (bucket <= c[i]) return i;
    return 0;
  }

  /** hostsFor with a random number of randomInt32's: allocation-free (Math.random() allocates a heap number). */
  hostsForRandom(): readonly T[] {
    return this.select(randomInt32() >>> 2);
  }

  /**
   * The hosts one pick should choose among, from one uniform random `r` in [0, 1): the
   * priority from r's first two decimal digits, the locality from the rest. Empty when
   * there is nothing to pick (no host, or a level in panic with fail_traffic_on_panic).
   */
  hostsFor(r: number): readonly T[] {
    return this.select((r * TWO_30) | 0);
  }

  /**
   * `q` uniform in [0, 2^30): an integer, because a double passed to a call that is not
   * inlined is boxed (one allocation per pick); the doubles stay inside this function.
   */
  private select(q: number): readonly T[] {
    const x = (q * 100) / TWO_30;
    const whole = Math.floor(x);
    const slot = this.chooseSlot(whole + 1);
    const n = this.levels.length;
    const isDegradedSlot = slot >= n;
    const level = this.levels[isDegradedSlot ? slot - n : slot];
    if (level.panic) return this.options.failTrafficOnPanic ? EMPTY : level.hosts;
    const localities = isDegradedSlot ? level.degradedLocalities : level.healthyLocalities;
    if (localities === undefined) return isDegradedSlot ? level.degraded : level.healthy;
    const c = localities.cumulative;
    const y = (x - whole) * localities.total;
    const last = c.length - 1;
    let i = 0;
    while (i < last && y >= c[i]) i++;
    return localities.eligible[i];
  }
}

const TWO_30 = 1073741824;

let rng = (Math.random() * 4294967296) | 0 || 1;

/**
 * A uniform random int32 from a xorshift32 generator seeded once from Math.random(). Load
 * balancing needs spread, not secrecy; unlike Math.random() (a new heap number per call in
 * Node 24) the state is a small integer and nothing is allocated.
 */
export function randomInt32(): number {
  let x = rng;
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  rng = x;
  return x;
}
