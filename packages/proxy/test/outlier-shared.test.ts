// Outlier detection shared between threads (--concurrency N), modelled in one thread: two detectors of
// one cluster name over the same shared memory, each with its own Host objects, as two workers have.
// Errors add up across them, an ejection by one is seen by the other's next pick, max_ejection_percent
// counts both, and the sweep's un-ejection reaches both. (Its own file: the shared table is per process.)
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { StatsStore } from '../src/stats/store.ts';
import { Host } from '../src/upstream/host.ts';
import { HostSet } from '../src/upstream/lb.ts';
import { compileOutlierDetection, OutlierDetector, OutlierStats } from '../src/upstream/outlier.ts';
import { newSharedOutlierMemory, useSharedOutlier } from '../src/upstream/shared-outlier.ts';

let clock = 1_000;

/** One thread's view of cluster `name`: its detector, its hosts, its balancer. */
function thread(name: string, od: Record<string, unknown>, n = 2) {
  const store = new StatsStore();
  const d = new OutlierDetector(compileOutlierDetection(new Msg(od, 'outlier_detection')), new OutlierStats(store.scope('cluster', 'envoy_cluster_name', name)), { now: () => clock, random: () => 0, cluster: name });
  const hosts = Array.from({ length: n }, (_, i) => new Host(`10.0.0.${i + 1}`, 80));
  d.setHosts(hosts);
  const set = new HostSet(hosts, 'ROUND_ROBIN');
  return {
    d, hosts, store,
    put: (i: number, code: number, k = 1) => { for (let j = 0; j < k; j++) d.record(hosts[i], code); },
    /** Hosts the balancer picks in `k` picks, after syncing as Cluster.pick does. */
    picks: (k: number) => { d.sync(); return new Set(Array.from({ length: k }, () => set.pick(undefined, undefined, 0)?.hostPort)); },
    stat: (s: string) => store.find('counters', `cluster.${name}.outlier_detection.${s}`)?.value ?? store.find('gauges', `cluster.${name}.outlier_detection.${s}`)?.value,
  };
}

describe('outlier detection shared between threads', () => {
  before(() => useSharedOutlier(newSharedOutlierMemory(1024), true));
  const od = { consecutive_5xx: 4, max_ejection_percent: 50, interval: '10s', base_ejection_time: '30s' };

  test('errors on two threads add up; the one that reaches the threshold ejects; the other stops picking the host', () => {
    const a = thread('c1', od), b = thread('c1', od);
    a.put(0, 503, 2);
    b.put(0, 503, 1);
    assert.equal(a.hosts[0].ejected, false);
    assert.equal(b.picks(4).size, 2, 'not ejected yet');
    b.put(0, 503);
    assert.equal(b.hosts[0].ejected, true, 'the fourth error, on thread b, ejects');
    assert.equal(b.stat('ejections_enforced_consecutive_5xx'), 1);
    assert.equal(a.stat('ejections_enforced_consecutive_5xx'), 0, 'counted once, by the thread that ejected');
    assert.deepEqual(a.picks(4), new Set(['10.0.0.2:80']), 'thread a skips the host at its next pick');
    assert.equal(a.d.ejectedCount, 1);
    a.d.publishActive();
    assert.equal(a.stat('ejections_active'), 1);
  });

  test('a success on either thread breaks the run', () => {
    const a = thread('c2', od), b = thread('c2', od);
    a.put(0, 503, 3);
    b.put(0, 200);
    a.put(0, 503, 3);
    assert.equal(a.hosts[0].ejected, false);
    b.put(0, 503);
    assert.equal(b.hosts[0].ejected, true);
  });

  test('max_ejection_percent counts the ejections of every thread', () => {
    const a = thread('c3', od), b = thread('c3', od);
    a.put(0, 503, 4);
    assert.equal(a.hosts[0].ejected, true);
    b.put(1, 503, 4);
    assert.equal(b.hosts[1].ejected, false, 'a second of two hosts would be 100% > 50%');
    assert.equal(b.stat('ejections_overflow'), 1);
    assert.equal(b.d.ejectedCount, 1);
  });

  test("the sweep's un-ejection reaches the other thread; back-off is the host's, whoever ejects next", () => {
    const a = thread('c4', od), b = thread('c4', od);
    b.put(0, 503, 4);
    clock += 30_000;
    a.d.sweep();
    assert.equal(a.hosts[0].ejected, false);
    assert.equal(b.picks(4).size, 2, 'thread b picks the host again');
    assert.equal(a.d.ejectedCount, 0);
    a.put(0, 503, 4);
    assert.equal(a.hosts[0].ejected, true);
    assert.equal(a.d.ejectionTimeMs(a.hosts[0].outlier!), 60_000, 'second ejection: base x 2');
    clock += 30_000;
    b.d.sweep();
    assert.equal(b.hosts[0].ejected, true, 'not served yet');
    clock += 30_000;
    b.d.sweep();
    assert.deepEqual(a.picks(4).size, 2);
  });

  test("another cluster's hosts at the same addresses have their own state", () => {
    const a = thread('c5', od), other = thread('c6', od);
    a.put(0, 503, 3);
    other.put(0, 503, 3);
    assert.equal(a.hosts[0].ejected, false);
    assert.equal(other.hosts[0].ejected, false);
    assert.equal(a.hosts[0].outlier!.consecutive5xx, 3);
  });

  test('a host new to the cluster starts with fresh counts, not those an earlier host of its address left', () => {
    const a = thread('c7', od);
    a.put(1, 503, 3);
    const again = new Host('10.0.0.2', 80);
    a.d.setHosts([a.hosts[0], again]);
    assert.equal(again.outlier!.consecutive5xx, 0);
    a.d.record(again, 503);
    assert.equal(again.ejected, false);
  });

  test('a closed cluster gives its ejections back: the next cluster of that name starts with none', () => {
    const a = thread('c8', od), b = thread('c8', od);
    a.put(0, 503, 4);
    assert.equal(b.d.ejectedCount, 1);
    a.d.stop();
    assert.equal(b.d.ejectedCount, 0);
    assert.equal(b.picks(4).size, 2);
  });
});
