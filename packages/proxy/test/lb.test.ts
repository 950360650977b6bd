import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Host } from '../src/upstream/host.ts';
import { HostSet, type LbPolicy } from '../src/upstream/lb.ts';

const host = (i: number, opts: { weight?: number; priority?: number; healthy?: boolean } = {}): Host => new Host(`10.0.0.${i}`, 8080, opts);

/** Picks `n` times; returns how often each host (by address) was picked. */
function spread(set: HostSet, n: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const h = set.pick();
    assert.ok(h, 'pick returned a host');
    counts.set(h.address, (counts.get(h.address) ?? 0) + 1);
  }
  return counts;
}

const sorted = (m: Map<string, number>): Array<[string, number]> => [...m.entries()].sort((a, b) => a[0].localeCompare(b[0]));

describe('HostSet: round robin', () => {
  test('empty set picks nothing; one host is always picked', () => {
    assert.equal(new HostSet([], 'ROUND_ROBIN').pick(), undefined);
    const only = host(1);
    const set = new HostSet([only], 'ROUND_ROBIN');
    for (let i = 0; i < 5; i++) assert.equal(set.pick(), only);
  });
  test('cycles through hosts in order', () => {
    const hosts = [host(1), host(2), host(3)];
    const set = new HostSet(hosts, 'ROUND_ROBIN');
    const seq = Array.from({ length: 7 }, () => set.pick()!.address);
    assert.deepEqual(seq, ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.1']);
  });
  test('even spread over N picks', () => {
    const set = new HostSet([host(1), host(2), host(3), host(4)], 'ROUND_ROBIN');
    assert.deepEqual(sorted(spread(set, 400)), [['10.0.0.1', 100], ['10.0.0.2', 100], ['10.0.0.3', 100], ['10.0.0.4', 100]]);
  });
  test('equal non-1 weights behave like plain round robin', () => {
    const set = new HostSet([host(1, { weight: 7 }), host(2, { weight: 7 })], 'ROUND_ROBIN');
    assert.deepEqual(Array.from({ length: 4 }, () => set.pick()!.address), ['10.0.0.1', '10.0.0.2', '10.0.0.1', '10.0.0.2']);
  });
});

describe('HostSet: smooth weighted round robin', () => {
  test('5:1:1 gives the nginx sequence a a b a c a a', () => {
    const set = new HostSet([host(1, { weight: 5 }), host(2, { weight: 1 }), host(3, { weight: 1 })], 'ROUND_ROBIN');
    const seq = Array.from({ length: 14 }, () => set.pick()!.address.slice(-1)).join('');
    assert.equal(seq, '11213111121311');
  });
  test('exact proportions over N picks (3:2:1 × 100)', () => {
    const set = new HostSet([host(1, { weight: 3 }), host(2, { weight: 2 }), host(3, { weight: 1 })], 'ROUND_ROBIN');
    assert.deepEqual(sorted(spread(set, 600)), [['10.0.0.1', 300], ['10.0.0.2', 200], ['10.0.0.3', 100]]);
  });
  test('every window of one full cycle has exact proportions (smooth, not bursty)', () => {
    const set = new HostSet([host(1, { weight: 4 }), host(2, { weight: 3 }), host(3, { weight: 2 }), host(4, { weight: 1 })], 'ROUND_ROBIN');
    const seq = Array.from({ length: 100 }, () => set.pick()!.address);
    for (let start = 0; start + 10 <= seq.length; start += 10) {
      const window = seq.slice(start, start + 10);
      const count = (a: string): number => window.filter((x) => x === a).length;
      assert.deepEqual([count('10.0.0.1'), count('10.0.0.2'), count('10.0.0.3'), count('10.0.0.4')], [4, 3, 2, 1], `window at ${start}`);
    }
    // Smooth: the heaviest host never runs more than twice in a row at 4:3:2:1.
    let run = 0, longest = 0;
    for (const a of seq) { run = a === '10.0.0.1' ? run + 1 : 0; longest = Math.max(longest, run); }
    assert.ok(longest <= 2, `longest run ${longest}`);
  });
  test('large weights (Istio uses up to 100 / 1000s) keep exact proportions', () => {
    const set = new HostSet([host(1, { weight: 90 }), host(2, { weight: 10 })], 'ROUND_ROBIN');
    assert.deepEqual(sorted(spread(set, 1000)), [['10.0.0.1', 900], ['10.0.0.2', 100]]);
  });
  // Regression (fixed in src/upstream/lb.ts smoothWeighted): as soon as candidates() filters the hosts (one host
  // unhealthy, or a second priority level exists), `hosts !== this.hosts` and weights are dropped
  // for plain round robin. Envoy keeps weighting the healthy hosts of the chosen priority.
  test('weights still apply when another host is unhealthy', () => {
    const set = new HostSet([host(1, { weight: 3 }), host(2, { weight: 1 }), host(3, { weight: 5, healthy: false })], 'ROUND_ROBIN');
    assert.deepEqual(sorted(spread(set, 400)), [['10.0.0.1', 300], ['10.0.0.2', 100]]);
  });
  test('weights still apply within priority 0 when a priority 1 exists', () => {
    const set = new HostSet([host(1, { weight: 3 }), host(2, { weight: 1 }), host(3, { priority: 1 })], 'ROUND_ROBIN');
    assert.deepEqual(sorted(spread(set, 400)), [['10.0.0.1', 300], ['10.0.0.2', 100]]);
  });
});

describe('HostSet: least request', () => {
  test('two hosts: always the less-loaded one', () => {
    const busy = host(1), idle = host(2);
    busy.activeRequests = 5;
    const set = new HostSet([busy, idle], 'LEAST_REQUEST');
    for (let i = 0; i < 200; i++) assert.equal(set.pick(), idle);
    idle.activeRequests = 9;
    for (let i = 0; i < 200; i++) assert.equal(set.pick(), busy);
  });
  test('prefers the less-loaded host statistically (power of two choices)', () => {
    const hosts = [host(1), host(2), host(3), host(4)];
    hosts[1].activeRequests = 10;
    hosts[2].activeRequests = 10;
    hosts[3].activeRequests = 50;
    const set = new HostSet(hosts, 'LEAST_REQUEST');
    const counts = spread(set, 4000);
    // Uniform would be 1000 each; P2C gives the idle host 7/16 (with replacement) to 1/2 of picks.
    assert.ok((counts.get('10.0.0.1') ?? 0) > 1500, `idle host picked ${counts.get('10.0.0.1')} times`);
    assert.ok((counts.get('10.0.0.4') ?? 0) < 400, `busiest host picked ${counts.get('10.0.0.4')} times`);
  });
  test('equal load spreads over every host', () => {
    const set = new HostSet([host(1), host(2), host(3)], 'LEAST_REQUEST');
    const counts = spread(set, 3000);
    for (const [addr, n] of counts) assert.ok(n > 700 && n < 1300, `${addr}: ${n}`);
    assert.equal(counts.size, 3);
  });
  test('only healthy hosts are considered', () => {
    const hosts = [host(1, { healthy: false }), host(2), host(3)];
    hosts[1].activeRequests = 100;
    hosts[2].activeRequests = 100;
    const counts = spread(new HostSet(hosts, 'LEAST_REQUEST'), 500);
    assert.equal(counts.get('10.0.0.1'), undefined);
  });
});

describe('HostSet: random', () => {
  test('spreads over healthy hosts only', () => {
    const counts = spread(new HostSet([host(1), host(2), host(3, { healthy: false }), host(4)], 'RANDOM'), 3000);
    assert.equal(counts.get('10.0.0.3'), undefined);
    for (const a of ['10.0.0.1', '10.0.0.2', '10.0.0.4']) assert.ok((counts.get(a) ?? 0) > 700, `${a}: ${counts.get(a)}`);
  });
});

describe('HostSet: health and priorities', () => {
  const policies: LbPolicy[] = ['ROUND_ROBIN', 'LEAST_REQUEST', 'RANDOM'];
  for (const policy of policies) {
    test(`${policy}: unhealthy hosts are skipped`, () => {
      const counts = spread(new HostSet([host(1), host(2, { healthy: false }), host(3)], policy), 300);
      assert.equal(counts.get('10.0.0.2'), undefined);
      assert.equal(counts.size, 2);
    });
    test(`${policy}: priority 0 all unhealthy → priority 1`, () => {
      const set = new HostSet([
        host(1, { priority: 0, healthy: false }), host(2, { priority: 0, healthy: false }),
        host(3, { priority: 1 }), host(4, { priority: 1 }),
      ], policy);
      const counts = spread(set, 400);
      assert.deepEqual([...counts.keys()].sort(), ['10.0.0.3', '10.0.0.4']);
    });
    test(`${policy}: healthy priority 0 is used and priority 1 is idle`, () => {
      const set = new HostSet([host(1, { priority: 1 }), host(2, { priority: 0 }), host(3, { priority: 0 }), host(4, { priority: 2 })], policy);
      const counts = spread(set, 400);
      assert.deepEqual([...counts.keys()].sort(), ['10.0.0.2', '10.0.0.3']);
    });
    test(`${policy}: priority 0 and 1 down → priority 2`, () => {
      const set = new HostSet([host(1, { priority: 0, healthy: false }), host(2, { priority: 1, healthy: false }), host(3, { priority: 2 })], policy);
      assert.deepEqual([...spread(set, 50).keys()], ['10.0.0.3']);
    });
    test(`${policy}: every host unhealthy → panic, still picks from all hosts`, () => {
      const set = new HostSet([host(1, { healthy: false }), host(2, { healthy: false }), host(3, { healthy: false, priority: 1 })], policy);
      const counts = spread(set, 600);
      assert.equal(counts.size, 3, `picked ${JSON.stringify(sorted(counts))}`);
    });
  }
  test('health changes are seen on the next pick (Host.healthy is live)', () => {
    const a = host(1), b = host(2);
    const set = new HostSet([a, b], 'ROUND_ROBIN');
    a.healthy = false;
    for (let i = 0; i < 10; i++) assert.equal(set.pick(), b);
    a.healthy = true;
    assert.equal(spread(set, 10).size, 2);
  });
});

describe('HostSet: exclude (retries avoid the previous host)', () => {
  const policies: LbPolicy[] = ['ROUND_ROBIN', 'LEAST_REQUEST', 'RANDOM'];
  for (const policy of policies) {
    test(`${policy}: never returns the excluded host when another exists`, () => {
      const hosts = [host(1), host(2), host(3)];
      const set = new HostSet(hosts, policy);
      for (const prev of hosts) {
        for (let i = 0; i < 200; i++) assert.notEqual(set.pick(prev), prev);
      }
    });
  }
  test('weighted: the excluded heavy host is avoided', () => {
    const heavy = host(1, { weight: 100 });
    const set = new HostSet([heavy, host(2), host(3)], 'ROUND_ROBIN');
    for (let i = 0; i < 200; i++) assert.notEqual(set.pick(heavy), heavy);
  });
  test('least request: the idle host is excluded, so the next least-loaded is used', () => {
    const idle = host(1), light = host(2), busy = host(3);
    light.activeRequests = 1;
    busy.activeRequests = 50;
    const set = new HostSet([idle, light, busy], 'LEAST_REQUEST');
    const counts = new Map<Host, number>();
    for (let i = 0; i < 300; i++) { const h = set.pick(idle)!; counts.set(h, (counts.get(h) ?? 0) + 1); }
    assert.equal(counts.get(idle), undefined);
    assert.ok((counts.get(light) ?? 0) > (counts.get(busy) ?? 0));
  });
  test('exclude with only one candidate still returns it', () => {
    const only = host(1);
    assert.equal(new HostSet([only, host(2, { healthy: false })], 'ROUND_ROBIN').pick(only), only);
  });
  test('exclude in failover avoids the previous priority-1 host', () => {
    const p1a = host(3, { priority: 1 }), p1b = host(4, { priority: 1 });
    const set = new HostSet([host(1, { healthy: false }), p1a, p1b], 'ROUND_ROBIN');
    for (let i = 0; i < 20; i++) assert.equal(set.pick(p1a), p1b);
  });
});
