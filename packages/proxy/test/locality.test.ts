import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { Host } from '../src/upstream/host.ts';
import {
  compileLocalityLbOptions, computePriorityLoad, DEFAULT_LOCALITY_LB, effectiveLocalityWeight, groupLocalities, PriorityPlan, randomInt32,
  type LbHost, type LocalityLbOptions, type PriorityCounts,
} from '../src/upstream/locality.ts';

// Expected numbers follow Envoy's load_balancer_impl arithmetic (integer percentages, floor
// division, rounding leftovers to the first available level). Where Envoy's prose tables round
// differently the code's numbers are used and the difference is noted.

/** A level of `total` hosts of which `healthy` are healthy (and `degraded` degraded). */
const level = (total: number, healthy: number, degraded = 0): PriorityCounts => ({
  hosts: total, healthy, degraded, totalWeight: total, healthyWeight: healthy, degradedWeight: degraded,
});

const loads = (...levels: PriorityCounts[]): number[] => computePriorityLoad(levels).healthy.slice();

interface TestHost extends LbHost { readonly name: string }
function hosts(n: number, spec: { priority?: number; healthy?: number; degraded?: number; zone?: string; region?: string; localityWeight?: number; weight?: number; prefix?: string }): TestHost[] {
  const healthy = spec.healthy ?? n;
  const degraded = spec.degraded ?? 0;
  return Array.from({ length: n }, (_, i) => ({
    name: `${spec.prefix ?? spec.zone ?? 'p' + (spec.priority ?? 0)}-${i}`,
    priority: spec.priority ?? 0,
    weight: spec.weight ?? 1,
    healthy: i < healthy + degraded,
    degraded: i >= healthy && i < healthy + degraded,
    zone: spec.zone ?? '',
    region: spec.region,
    localityWeight: spec.localityWeight,
  }));
}

/** Sweeps r over [0, 1) in `n` even steps and counts which host list hostsFor returns, by the name of its first host. */
function sweep<T extends TestHost>(plan: PriorityPlan<T>, n: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const list = plan.hostsFor((i + 0.5) / n);
    const key = list.length ? list[0].name.replace(/-\d+$/, '') : '(none)';
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

const opts = (o: Partial<LocalityLbOptions>): LocalityLbOptions => ({ ...DEFAULT_LOCALITY_LB, ...o });

describe('priority load (arch overview "Priority levels")', () => {
  test('two levels, P=1 fully healthy: P=0 keeps everything until below 72% healthy', () => {
    const p1 = level(100, 100);
    assert.deepEqual(loads(level(100, 100), p1), [100, 0]);
    assert.deepEqual(loads(level(100, 72), p1), [100, 0]);
    assert.deepEqual(loads(level(100, 71), p1), [99, 1]);
    assert.deepEqual(loads(level(100, 50), p1), [70, 30]);
    assert.deepEqual(loads(level(100, 25), p1), [35, 65]);
    assert.deepEqual(loads(level(100, 0), p1), [0, 100]);
  });

  test('both levels degrade together', () => {
    assert.deepEqual(loads(level(100, 71), level(100, 71)), [99, 1]);
    assert.deepEqual(loads(level(100, 50), level(100, 50)), [70, 30]);
    assert.deepEqual(loads(level(100, 25), level(100, 100)), [35, 65]);
  });

  test('three levels', () => {
    assert.deepEqual(loads(level(100, 72), level(100, 72), level(100, 100)), [100, 0, 0]);
    assert.deepEqual(loads(level(100, 71), level(100, 71), level(100, 100)), [99, 1, 0]);
    assert.deepEqual(loads(level(100, 25), level(100, 100), level(100, 100)), [35, 65, 0]);
    assert.deepEqual(loads(level(100, 25), level(100, 25), level(100, 100)), [35, 35, 30]);
    // Health 35/35/28 sums to 98: floor(35 × 100 / 98) = 35, 35, 28, and the 2 left over go to P=0
    // (the docs' table, which leaves panic aside, rounds this to 36/36/28).
    const noPanic = opts({ panicThreshold: 0 });
    assert.deepEqual(computePriorityLoad([level(100, 25), level(100, 25), level(100, 20)], noPanic).healthy, [37, 35, 28]);
    // With the default 50% threshold all three levels are below it and the total is under 100: total panic.
    assert.deepEqual(loads(level(100, 25), level(100, 25), level(100, 20)), [34, 33, 33]);
  });

  test('total health below 100 is normalized: health {20, 30} gives {40, 60}', () => {
    const r = computePriorityLoad([level(10, 2), level(10, 3)], opts({ overprovisioningFactor: 100, panicThreshold: 0 }));
    assert.deepEqual(r.healthy, [40, 60]);
    assert.equal(r.normalizedTotalAvailability, 50);
  });

  test('overprovisioning factor 100: P=0 at 80% keeps 80%', () => {
    assert.deepEqual(computePriorityLoad([level(10, 8), level(10, 10)], opts({ overprovisioningFactor: 100 })).healthy, [80, 20]);
  });

  test('weighted_priority_health counts weights, not hosts', () => {
    // P=0: a weight-1 healthy host and a weight-3 unhealthy one.
    const p0: PriorityCounts = { hosts: 2, healthy: 1, degraded: 0, totalWeight: 4, healthyWeight: 1, degradedWeight: 0 };
    assert.deepEqual(computePriorityLoad([p0, level(1, 1)]).healthy, [70, 30]);
    assert.deepEqual(computePriorityLoad([p0, level(1, 1)], opts({ weightedPriorityHealth: true })).healthy, [35, 65]);
  });

  test('degraded hosts take what healthy ones cannot: 10/20/10% health, 20/10/0% degraded → 16/28/14 and 28/14/0', () => {
    const r = computePriorityLoad([level(10, 1, 2), level(10, 2, 1), level(10, 1, 0)], opts({ overprovisioningFactor: 100, panicThreshold: 0 }));
    assert.deepEqual(r.healthy, [16, 28, 14]);
    assert.deepEqual(r.degraded, [28, 14, 0]);
    // Every level is under 50% available and the total is 70: with the default threshold that is total panic.
    const p = computePriorityLoad([level(10, 1, 2), level(10, 2, 1), level(10, 1, 0)], opts({ overprovisioningFactor: 100 }));
    assert.equal(p.totalPanic, true);
    assert.deepEqual(p.healthy, [34, 33, 33]);
    assert.deepEqual(p.degraded, [0, 0, 0]);
  });
});

describe('panic threshold', () => {
  test('no panic while the levels together are 100% available, however low one level is', () => {
    const r = computePriorityLoad([level(100, 5), level(100, 100)]);
    assert.deepEqual(r.panic, [false, false]);
    assert.deepEqual(r.healthy, [7, 93]);
  });

  test('below 100% total: each level below the threshold panics', () => {
    // 5% and 65% healthy: availability 7 + 91 = 98; P=0 panics (5% < 50%), P=1 does not.
    const r = computePriorityLoad([level(100, 5), level(100, 65)]);
    assert.equal(r.normalizedTotalAvailability, 98);
    assert.deepEqual(r.panic, [true, false]);
    assert.equal(r.totalPanic, false);
    // floor(700/98) = 7, floor(9100/98) = 92, the 1 left over to P=0 (the docs show 7/93).
    assert.deepEqual(r.healthy, [8, 92]);
  });

  test('every level in panic: load follows host counts', () => {
    const r = computePriorityLoad([level(100, 25), level(100, 25)]);
    assert.deepEqual(r.panic, [true, true]);
    assert.equal(r.totalPanic, true);
    assert.deepEqual(r.healthy, [50, 50]);
    assert.deepEqual(computePriorityLoad([level(3, 0), level(1, 0)]).healthy, [75, 25]);
    assert.deepEqual(computePriorityLoad([level(2, 0), level(1, 0)]).healthy, [67, 33]);
  });

  test('threshold 0 never panics: with nothing healthy P=0 nominally takes the load', () => {
    const r = computePriorityLoad([level(3, 0), level(1, 0)], opts({ panicThreshold: 0 }));
    assert.deepEqual(r.panic, [false, false]);
    assert.deepEqual(r.healthy, [100, 0]);
  });

  test('degraded hosts count as available for the panic check', () => {
    const r = computePriorityLoad([level(10, 2, 3), level(10, 0)]);
    assert.equal(r.panic[0], false);
  });

  test('a plan in panic returns all hosts of the level; fail_traffic_on_panic returns none', () => {
    const all = hosts(4, { healthy: 1 });
    const plan = new PriorityPlan(all);
    assert.equal(plan.levels[0].panic, true);
    assert.equal(plan.hostsFor(0.3), plan.levels[0].hosts);
    assert.equal(plan.hostsFor(0.3).length, 4);
    assert.equal(new PriorityPlan(all, opts({ failTrafficOnPanic: true })).hostsFor(0.3).length, 0);
  });
});

describe('PriorityPlan.hostsFor', () => {
  test('one random number splits picks by priority load (70/30 for P=0 half healthy)', () => {
    const plan = new PriorityPlan([...hosts(2, { priority: 0, healthy: 1 }), ...hosts(2, { priority: 1 })]);
    const c = sweep(plan, 10_000);
    assert.equal(c.get('p0'), 7000);
    assert.equal(c.get('p1'), 3000);
    assert.deepEqual(plan.hostsFor(0.1).map((h) => h.name), ['p0-0'], 'only the healthy host of P=0');
  });

  test('healthy hosts first, degraded ones once healthy hosts run short', () => {
    // P=0: 1 healthy, 1 degraded, 2 unhealthy of 4 → 35% healthy, 35% degraded; P=1 empty.
    const plan = new PriorityPlan(hosts(4, { healthy: 1, degraded: 1, prefix: 'x' }));
    assert.deepEqual(plan.load.healthy, [50]);
    assert.deepEqual(plan.load.degraded, [50]);
    assert.deepEqual(plan.hostsFor(0.2).map((h) => h.name), ['x-0']);
    assert.deepEqual(plan.hostsFor(0.7).map((h) => h.name), ['x-1']);
  });

  test('hostsForRandom follows the same loads (70/30 ± 1% over 100k picks)', () => {
    const plan = new PriorityPlan([...hosts(2, { priority: 0, healthy: 1 }), ...hosts(2, { priority: 1 })]);
    let p0 = 0;
    for (let i = 0; i < 100_000; i++) if (plan.hostsForRandom()[0].priority === 0) p0++;
    assert.ok(Math.abs(p0 / 100_000 - 0.7) < 0.01, `${p0}`);
  });

  test('randomInt32 is uniform enough: each of 16 buckets of the top bits within 5% of 1/16', () => {
    const buckets = new Array<number>(16).fill(0);
    const n = 160_000;
    for (let i = 0; i < n; i++) buckets[randomInt32() >>> 28]++;
    for (const b of buckets) assert.ok(Math.abs(b / (n / 16) - 1) < 0.05, `${buckets}`);
  });

  test('gaps in priorities are empty levels', () => {
    const plan = new PriorityPlan(hosts(2, { priority: 2 }));
    assert.equal(plan.levels.length, 3);
    assert.deepEqual(plan.load.healthy, [0, 0, 100]);
    assert.equal(plan.hostsFor(0.5).length, 2);
  });

  test('no hosts: an empty list', () => {
    assert.equal(new PriorityPlan<TestHost>([]).hostsFor(0.5).length, 0);
  });

  test('Host from host.ts is an LbHost', () => {
    const a = new Host('10.0.0.1', 80, { priority: 0, zone: 'a' });
    const b = new Host('10.0.0.2', 80, { priority: 1, zone: 'b' });
    const plan = new PriorityPlan([a, b]);
    assert.deepEqual(plan.hostsFor(0.99), [a]);
  });
});

describe('locality weighted load balancing', () => {
  const X = (healthy: number): TestHost[] => hosts(100, { zone: 'x', healthy, localityWeight: 1 });
  const Y = hosts(100, { zone: 'y', localityWeight: 2 });
  const share = (healthyX: number): number[] => {
    const picker = new PriorityPlan([...X(healthyX), ...Y], opts({ localityWeighted: true })).levels[0].healthyLocalities!;
    return picker.shares().map((s) => s * 100);
  };
  const near = (actual: number[], expected: number[]): void => {
    assert.equal(actual.length, expected.length);
    actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]) < 1, `${actual.map((x) => x.toFixed(2))} vs ${expected}`));
  };

  test('the docs table: X weight 1, Y weight 2, X losing hosts (docs percentages are whole, ±1)', () => {
    near(share(100), [33, 67]);
    near(share(70), [33, 67]);
    near(share(69), [32, 68]);
    near(share(50), [26, 74]);
    near(share(25), [15, 85]);
    near(share(0), [100]); // a locality with no healthy host leaves the schedule
    assert.ok(Math.abs(share(69)[0] - 96.6 / 2.966) < 1e-9, 'X at 69%: 0.966 / 2.966');
  });

  test('picks follow the effective weights (50% healthy X: 26/74)', () => {
    const plan = new PriorityPlan([...X(50), ...Y], opts({ localityWeighted: true }));
    const c = sweep(plan, 100_000);
    assert.ok(Math.abs(c.get('x')! / 100_000 - 0.7 / 2.7) < 0.001, `x ${c.get('x')}`);
    assert.ok(Math.abs(c.get('y')! / 100_000 - 2 / 2.7) < 0.001, `y ${c.get('y')}`);
    assert.ok(plan.hostsFor(0.01).every((h) => h.healthy), 'only healthy hosts of the locality');
  });

  test('the priority and the locality both come from the one random number', () => {
    // P=0: x (weight 1) and y (weight 3), both healthy; P=1 gets nothing.
    const plan = new PriorityPlan([...hosts(2, { zone: 'x', localityWeight: 1 }), ...hosts(2, { zone: 'y', localityWeight: 3 }), ...hosts(1, { priority: 1, prefix: 'p1' })], opts({ localityWeighted: true }));
    const c = sweep(plan, 40_000);
    assert.equal(c.get('x'), 10_000);
    assert.equal(c.get('y'), 30_000);
    assert.equal(c.get('p1'), undefined);
  });

  test('without locality_weighted_lb_config the level is flat', () => {
    const plan = new PriorityPlan([...X(100), ...Y]);
    assert.equal(plan.levels[0].healthyLocalities, undefined);
    assert.equal(plan.hostsFor(0.5).length, 200);
  });

  test('all locality weights 0 (unset): no schedule, the level is flat', () => {
    const plan = new PriorityPlan([...hosts(2, { zone: 'a' }), ...hosts(2, { zone: 'b' })], opts({ localityWeighted: true }));
    assert.equal(plan.levels[0].healthyLocalities, undefined);
    assert.equal(plan.hostsFor(0.5).length, 4);
  });

  test('effectiveLocalityWeight = weight × min(1, factor/100 × eligible/total)', () => {
    assert.equal(effectiveLocalityWeight(2, 10, 10, 140), 2);
    assert.ok(Math.abs(effectiveLocalityWeight(1, 5, 10, 140) - 0.7) < 1e-12);
    assert.equal(effectiveLocalityWeight(3, 0, 10, 140), 0);
    assert.equal(effectiveLocalityWeight(3, 0, 0, 140), 0);
  });

  test('localities are ordered by region, zone, sub_zone', () => {
    const ls = groupLocalities([
      ...hosts(1, { zone: 'b', region: 'r2' }), ...hosts(1, { zone: 'a', region: 'r2' }), ...hosts(1, { zone: 'z', region: 'r1' }),
    ]);
    assert.deepEqual(ls.map((l) => l.key), ['r1/z/', 'r2/a/', 'r2/b/']);
  });
});

describe('compileLocalityLbOptions', () => {
  const compile = (raw: Record<string, unknown>): LocalityLbOptions => compileLocalityLbOptions(new Msg({ name: 'c', ...raw }, 'clusters[0]'));

  test('defaults', () => {
    assert.deepEqual(compile({}), DEFAULT_LOCALITY_LB);
  });

  test('fields', () => {
    const o = compile({
      load_assignment: { cluster_name: 'c', policy: { overprovisioning_factor: 200, weighted_priority_health: true } },
      common_lb_config: { healthy_panic_threshold: { value: 12.5 }, locality_weighted_lb_config: {} },
    });
    assert.deepEqual(o, { overprovisioningFactor: 200, weightedPriorityHealth: true, panicThreshold: 13, localityWeighted: true, failTrafficOnPanic: false });
    assert.equal(compile({ common_lb_config: { zone_aware_lb_config: { fail_traffic_on_panic: true } } }).failTrafficOnPanic, true);
  });

  test('errors name the field', () => {
    assert.throws(() => compile({ load_assignment: { policy: { overprovisioning_factor: 0 } } }),
      (e: unknown) => e instanceof ConfigError && e.path === 'clusters[0].load_assignment.policy.overprovisioning_factor');
    assert.throws(() => compile({ common_lb_config: { healthy_panic_threshold: { value: 101 } } }),
      (e: unknown) => e instanceof ConfigError && e.path === 'clusters[0].common_lb_config.healthy_panic_threshold');
    assert.throws(() => compile({ common_lb_config: { locality_weighted_lb_config: {}, zone_aware_lb_config: {} } }),
      (e: unknown) => e instanceof ConfigError && e.path === 'clusters[0].common_lb_config.zone_aware_lb_config');
  });
});
