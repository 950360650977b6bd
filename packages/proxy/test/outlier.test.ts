// Outlier detection with Envoy's semantics, on a fake clock: consecutive 5xx / gateway / local-origin
// ejections, max_ejection_percent, enforcing_* odds, un-ejection and back-off at the interval sweep,
// success-rate and failure-percentage sweeps, and the load balancer skipping ejected hosts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { StatsStore, statBase } from '../src/stats/store.ts';
import { Host } from '../src/upstream/host.ts';
import { HostSet } from '../src/upstream/lb.ts';
import { compileOutlierDetection, OutlierDetector, OutlierStats, UpstreamResult, type HostOutlier } from '../src/upstream/outlier.ts';
import { compileCluster } from '../src/upstream/cluster-config.ts';
import { Cluster } from '../src/upstream/cluster.ts';

type Json = Record<string, unknown>;

interface Rig {
  readonly d: OutlierDetector;
  readonly hosts: Host[];
  readonly store: StatsStore;
  /** Advances the fake clock. */
  tick(ms: number): void;
  stat(name: string): number;
  /** Records `result` `n` times on host `i`. */
  put(i: number, result: number, n?: number): void;
}

function rig(od: Json, nHosts: number, random: () => number = () => 0): Rig {
  const store = new StatsStore();
  let t = 1_000;
  const d = new OutlierDetector(compileOutlierDetection(new Msg(od, 'outlier_detection')), new OutlierStats(store.scope('cluster', 'envoy_cluster_name', 'c')), { now: () => t, random });
  const hosts = Array.from({ length: nHosts }, (_, i) => new Host(`10.0.0.${i + 1}`, 80));
  d.setHosts(hosts);
  return {
    d, hosts, store,
    tick: (ms) => { t += ms; },
    stat: (name) => {
      const full = `cluster.c.outlier_detection.${name}`;
      const v = store.find('counters', full)?.value ?? store.find('gauges', full)?.value;
      assert.notEqual(v, undefined, `stat ${full} exists`);
      return v as number;
    },
    put: (i, result, n = 1) => { for (let k = 0; k < n; k++) d.record(hosts[i], result); },
  };
}

describe('outlier_detection config', () => {
  const compile = (od: Json) => compileOutlierDetection(new Msg(od, 'outlier_detection'));
  test("Envoy's defaults", () => {
    const c = compile({});
    assert.equal(c.consecutive5xx, 5);
    assert.equal(c.consecutiveGatewayFailure, 5);
    assert.equal(c.consecutiveLocalOriginFailure, 5);
    assert.equal(c.enforcingConsecutive5xx, 100);
    assert.equal(c.enforcingConsecutiveGatewayFailure, 0);
    assert.equal(c.enforcingConsecutiveLocalOriginFailure, 100);
    assert.equal(c.enforcingSuccessRate, 100);
    assert.equal(c.enforcingFailurePercentage, 0);
    assert.equal(c.intervalMs, 10_000);
    assert.equal(c.baseEjectionTimeMs, 30_000);
    assert.equal(c.maxEjectionTimeMs, 300_000);
    assert.equal(c.maxEjectionPercent, 10);
    assert.equal(c.successRateStdevFactor, 1.9);
    assert.equal(c.splitExternalLocalOriginErrors, false);
    assert.equal(c.alwaysEjectOneHost, false);
  });
  test('max_ejection_time defaults to base_ejection_time when that is larger than 300 s', () => {
    assert.equal(compile({ base_ejection_time: '400s' }).maxEjectionTimeMs, 400_000);
  });
  test('invalid values are refused with the field named', () => {
    assert.throws(() => compile({ max_ejection_percent: 101 }), /outlier_detection\.max_ejection_percent: must be a percentage/);
    assert.throws(() => compile({ enforcing_consecutive_5xx: 150 }), /enforcing_consecutive_5xx/);
    assert.throws(() => compile({ interval: '0s' }), /interval: must be greater than 0s/);
    assert.throws(() => compile({ base_ejection_time: '60s', max_ejection_time: '30s' }), /max_ejection_time cannot be smaller than base_ejection_time/);
    assert.throws(() => compile({ monitors: [{}] }), /monitors/);
    assert.throws(() => compile({ consecutive_5xxx: 3 }), /consecutive_5xxx: field is not supported/);
  });
  test('a cluster with outlier_detection loads (it was refused before)', () => {
    const c = compileCluster(new Msg(clusterJson({ consecutive_5xx: 3 }), 'cluster'));
    assert.equal(c.outlier?.consecutive5xx, 3);
  });
});

describe('consecutive 5xx', () => {
  test('five 5xx in a row eject the host; its counters and stats follow Envoy', () => {
    const r = rig({ max_ejection_percent: 100 }, 3);
    r.put(0, 500, 4);
    assert.equal(r.hosts[0].ejected, false);
    r.put(0, 500);
    assert.equal(r.hosts[0].ejected, true);
    assert.equal(r.hosts[0].healthy, false, 'an ejected host is not healthy for load balancing');
    assert.equal(r.hosts[0].edsHealthy, true);
    assert.equal(r.stat('ejections_active'), 1);
    assert.equal(r.stat('ejections_enforced_total'), 1);
    assert.equal(r.stat('ejections_enforced_consecutive_5xx'), 1);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 1);
    assert.equal(r.stat('ejections_total'), 1);
    assert.equal(r.stat('ejections_consecutive_5xx'), 1);
    assert.equal(r.stat('ejections_overflow'), 0);
    assert.equal(r.d.ejectedCount, 1);
  });
  test('a success in between resets the count; 4xx are successes', () => {
    const r = rig({ max_ejection_percent: 100 }, 3);
    r.put(0, 503, 4);
    r.put(0, 404);
    r.put(0, 503, 4);
    r.put(0, 200);
    r.put(0, 500, 4);
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 0);
  });
  test('consecutive_5xx: 0 never ejects', () => {
    const r = rig({ consecutive_5xx: 0, max_ejection_percent: 100 }, 2);
    r.put(0, 500, 50);
    assert.equal(r.hosts[0].ejected, false);
  });
  test('errors that keep coming from an already ejected host change nothing', () => {
    const r = rig({ consecutive_5xx: 2, max_ejection_percent: 100 }, 3);
    r.put(0, 500, 2);
    r.put(0, 500, 10);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 1);
    assert.equal(r.stat('ejections_active'), 1);
  });
  test('the load balancer stops picking an ejected host at once', () => {
    const r = rig({ consecutive_5xx: 2, max_ejection_percent: 100 }, 3);
    const set = new HostSet(r.hosts, 'ROUND_ROBIN');
    r.put(1, 502, 2);
    for (let i = 0; i < 30; i++) assert.notEqual(set.pick(), r.hosts[1]);
  });
});

describe('max_ejection_percent', () => {
  test('default 10% with 3 hosts ejects nobody (33% > 10%): counted as overflow', () => {
    const r = rig({}, 3);
    r.put(0, 500, 5);
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 1);
    assert.equal(r.stat('ejections_overflow'), 1);
    assert.equal(r.stat('ejections_enforced_total'), 0);
  });
  test('always_eject_one_host lets the first ejection through, not the second', () => {
    const r = rig({ always_eject_one_host: true }, 3);
    r.put(0, 500, 5);
    r.put(1, 500, 5);
    assert.deepEqual(r.hosts.map((h) => h.ejected), [true, false, false]);
    assert.equal(r.stat('ejections_overflow'), 1);
  });
  test('10 hosts at 10%: one ejection allowed, the second overflows', () => {
    const r = rig({}, 10);
    r.put(0, 500, 5);
    r.put(1, 500, 5);
    assert.equal(r.d.ejectedCount, 1);
    assert.equal(r.stat('ejections_overflow'), 1);
  });
  test('50% of 4 hosts: two ejections', () => {
    const r = rig({ max_ejection_percent: 50 }, 4);
    for (let i = 0; i < 4; i++) r.put(i, 500, 5);
    assert.equal(r.d.ejectedCount, 2);
    assert.equal(r.stat('ejections_overflow'), 2);
  });
});

describe('enforcing_* odds', () => {
  test('enforcing_consecutive_5xx 50: a draw of 70 detects without ejecting, a draw of 20 ejects', () => {
    let draw = 0.7;
    const r = rig({ enforcing_consecutive_5xx: 50, max_ejection_percent: 100 }, 3, () => draw);
    r.put(0, 500, 5);
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 1);
    assert.equal(r.stat('ejections_enforced_consecutive_5xx'), 0);
    draw = 0.2;
    r.put(0, 500, 5);
    assert.equal(r.hosts[0].ejected, true);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 2);
  });
  test('enforcing 0 never ejects', () => {
    const r = rig({ enforcing_consecutive_5xx: 0, max_ejection_percent: 100 }, 3);
    r.put(0, 500, 25);
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 5);
  });
});

describe('consecutive gateway failure', () => {
  test('502/503/504 are detected; default enforcing 0 does not eject (consecutive_5xx then does)', () => {
    const r = rig({ max_ejection_percent: 100 }, 3);
    r.put(0, 502, 2);
    r.put(0, 503, 2);
    r.put(0, 504);
    assert.equal(r.stat('ejections_detected_consecutive_gateway_failure'), 1);
    assert.equal(r.stat('ejections_enforced_consecutive_gateway_failure'), 0);
    assert.equal(r.stat('ejections_enforced_consecutive_5xx'), 1, 'the same five 5xx reach consecutive_5xx');
  });
  test('with enforcing 100 a gateway-failure run ejects; a 500 breaks the run', () => {
    const r = rig({ consecutive_5xx: 100, enforcing_consecutive_gateway_failure: 100, max_ejection_percent: 100 }, 3);
    r.put(0, 503, 4);
    r.put(0, 500);
    r.put(0, 503, 4);
    assert.equal(r.hosts[0].ejected, false);
    r.put(0, 504);
    assert.equal(r.hosts[0].ejected, true);
    assert.equal(r.stat('ejections_enforced_consecutive_gateway_failure'), 1);
  });
});

describe('local-origin errors', () => {
  test('not split: connect failures count as 503 (5xx and gateway), timeouts as 504', () => {
    const r = rig({ consecutive_5xx: 100, enforcing_consecutive_gateway_failure: 100, max_ejection_percent: 100 }, 3);
    r.put(0, UpstreamResult.ConnectFailed, 3);
    r.put(0, UpstreamResult.Timeout);
    r.put(0, UpstreamResult.Reset);
    assert.equal(r.hosts[0].ejected, true);
    assert.equal(r.stat('ejections_enforced_consecutive_gateway_failure'), 1);
    assert.equal(r.stat('ejections_detected_consecutive_local_origin_failure'), 0);
  });
  test('not split: five connect failures eject through consecutive_5xx', () => {
    const r = rig({ max_ejection_percent: 100 }, 3);
    r.put(2, UpstreamResult.ConnectFailed, 5);
    assert.equal(r.hosts[2].ejected, true);
    assert.equal(r.stat('ejections_enforced_consecutive_5xx'), 1);
  });
  test('split: connect failures eject through consecutive_local_origin_failure; 5xx do not count there', () => {
    const r = rig({ split_external_local_origin_errors: true, consecutive_local_origin_failure: 3, consecutive_5xx: 100, max_ejection_percent: 100 }, 3);
    r.put(0, UpstreamResult.ConnectFailed, 2);
    r.put(0, 500, 10);
    assert.equal(r.hosts[0].ejected, false, 'a response proves the connection: the local-origin run is broken');
    r.put(0, UpstreamResult.ConnectFailed, 3);
    assert.equal(r.hosts[0].ejected, true);
    assert.equal(r.stat('ejections_enforced_consecutive_local_origin_failure'), 1);
    assert.equal(r.stat('ejections_detected_consecutive_5xx'), 0);
  });
  test('split: resets and timeouts after a connection never add up (Envoy records a connect success first)', () => {
    const r = rig({ split_external_local_origin_errors: true, consecutive_local_origin_failure: 2, max_ejection_percent: 100 }, 3);
    r.put(0, UpstreamResult.Reset, 10);
    r.put(0, UpstreamResult.Timeout, 10);
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(r.stat('ejections_detected_consecutive_local_origin_failure'), 0);
  });
});

describe('un-ejection at the interval sweep, back-off, max_ejection_time', () => {
  const od = { consecutive_5xx: 1, max_ejection_percent: 100, interval: '10s', base_ejection_time: '30s', max_ejection_time: '70s' };
  const state = (h: Host): HostOutlier => h.outlier as HostOutlier;

  test('the host returns at the first sweep after base_ejection_time; counters start fresh', () => {
    const r = rig({ ...od, consecutive_5xx: 3 }, 2);
    r.put(0, 500, 3);
    assert.equal(r.hosts[0].ejected, true);
    r.tick(29_999); r.d.sweep();
    assert.equal(r.hosts[0].ejected, true, 'not before base_ejection_time');
    r.tick(1); r.d.sweep();
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(r.stat('ejections_active'), 0);
    assert.equal(state(r.hosts[0]).consecutive5xx, 0);
    r.put(0, 500, 2);
    assert.equal(r.hosts[0].ejected, false);
  });
  test('each ejection in a row lasts base × n, capped at max_ejection_time', () => {
    const r = rig(od, 2);
    const served: number[] = [];
    for (let n = 0; n < 4; n++) {
      r.put(0, 500);
      assert.equal(r.hosts[0].ejected, true);
      let t = 0;
      while (r.hosts[0].ejected) { r.tick(10_000); t += 10_000; r.d.sweep(); }
      served.push(t);
    }
    assert.deepEqual(served, [30_000, 60_000, 70_000, 70_000]);
  });
  test('back-off decays by one per healthy interval after un-ejection', () => {
    const r = rig(od, 2);
    r.put(0, 500);
    r.tick(30_000); r.d.sweep();
    r.put(0, 500);
    assert.equal(state(r.hosts[0]).backoff, 2);
    r.tick(60_000); r.d.sweep();
    assert.equal(r.hosts[0].ejected, false);
    assert.equal(state(r.hosts[0]).backoff, 2, 'the sweep that un-ejects does not decay');
    r.tick(10_000); r.d.sweep();
    assert.equal(state(r.hosts[0]).backoff, 1);
    r.tick(10_000); r.d.sweep();
    r.tick(10_000); r.d.sweep();
    assert.equal(state(r.hosts[0]).backoff, 0);
    r.put(0, 500);
    r.tick(30_000); r.d.sweep();
    assert.equal(r.hosts[0].ejected, false, 'back to base_ejection_time');
  });
  test('max_ejection_time_jitter adds a random 0..jitter ms', () => {
    const r = rig({ ...od, max_ejection_time_jitter: '5s' }, 2, () => 0.5);
    r.put(0, 500);
    assert.equal(state(r.hosts[0]).jitterMs, 2500);
    assert.equal(r.d.ejectionTimeMs(state(r.hosts[0])), 32_500);
    r.tick(30_000); r.d.sweep();
    assert.equal(r.hosts[0].ejected, true);
    r.tick(10_000); r.d.sweep();
    assert.equal(r.hosts[0].ejected, false);
  });
  test('a host that leaves the cluster while ejected stops counting', () => {
    const r = rig(od, 3);
    r.put(0, 500);
    assert.equal(r.stat('ejections_active'), 1);
    r.d.setHosts(r.hosts.slice(1));
    assert.equal(r.stat('ejections_active'), 0);
    assert.equal(r.hosts[0].ejected, false);
  });
});

describe('success rate and failure percentage (interval sweep)', () => {
  /** One interval of traffic: `rates[i]` percent of 100 requests to host i succeed. */
  function interval(r: Rig, rates: number[], volume = 100): void {
    rates.forEach((rate, i) => {
      const ok = Math.round((volume * rate) / 100);
      r.put(i, 200, ok);
      // Alternate 500 with 200 so consecutive_5xx never fires.
      r.put(i, 500, volume - ok);
    });
    r.tick(10_000);
    r.d.sweep();
  }

  test("{50,100,100,100,100}: mean 90, stdev 20, threshold 52: the 50% host is ejected", () => {
    const r = rig({ consecutive_5xx: 0, max_ejection_percent: 100 }, 5);
    interval(r, [50, 100, 100, 100, 100]);
    assert.deepEqual(r.hosts.map((h) => h.ejected), [true, false, false, false, false]);
    assert.equal(r.d.externalNumbers.average, 90);
    assert.equal(Math.round(r.d.externalNumbers.threshold * 1000) / 1000, 52);
    assert.equal(r.stat('ejections_detected_success_rate'), 1);
    assert.equal(r.stat('ejections_enforced_success_rate'), 1);
    assert.equal(r.stat('ejections_success_rate'), 1);
    assert.equal(r.hosts[1].outlier?.external.rate, 100);
  });
  test('below success_rate_request_volume or success_rate_minimum_hosts nothing is judged', () => {
    const few = rig({ consecutive_5xx: 0, max_ejection_percent: 100 }, 5);
    interval(few, [0, 100, 100, 100, 100], 99);
    assert.equal(few.d.ejectedCount, 0);
    const small = rig({ consecutive_5xx: 0, max_ejection_percent: 100 }, 4);
    interval(small, [0, 100, 100, 100]);
    assert.equal(small.d.ejectedCount, 0);
    assert.equal(small.d.externalNumbers.threshold, -1);
  });
  test('enforcing_success_rate 0 (what Istio writes) detects but never ejects', () => {
    const r = rig({ consecutive_5xx: 0, max_ejection_percent: 100, enforcing_success_rate: 0 }, 5);
    interval(r, [50, 100, 100, 100, 100]);
    assert.equal(r.d.ejectedCount, 0);
    assert.equal(r.stat('ejections_detected_success_rate'), 1);
  });
  test('failure percentage: at or above the threshold ejects when enforced', () => {
    const r = rig({ consecutive_5xx: 0, max_ejection_percent: 100, enforcing_success_rate: 0, enforcing_failure_percentage: 100,
      failure_percentage_threshold: 50, failure_percentage_minimum_hosts: 3, failure_percentage_request_volume: 10 }, 3);
    interval(r, [50, 60, 100], 20);
    assert.deepEqual(r.hosts.map((h) => h.ejected), [true, false, false]);
    assert.equal(r.stat('ejections_enforced_failure_percentage'), 1);
  });
  test('split mode judges local-origin success rate separately', () => {
    const r = rig({ split_external_local_origin_errors: true, consecutive_local_origin_failure: 0, consecutive_5xx: 0, max_ejection_percent: 100 }, 5);
    for (let i = 0; i < 5; i++) r.put(i, 200, 100);
    r.put(0, UpstreamResult.ConnectFailed, 100);
    r.tick(10_000); r.d.sweep();
    assert.equal(r.hosts[0].ejected, true);
    assert.equal(r.stat('ejections_enforced_local_origin_success_rate'), 1);
    assert.equal(r.stat('ejections_detected_success_rate'), 0);
  });
});

function clusterJson(od: Json, n = 3): Json {
  return {
    name: 'svc', type: 'STATIC', connect_timeout: '1s', lb_policy: 'ROUND_ROBIN',
    outlier_detection: od,
    load_assignment: { cluster_name: 'svc', endpoints: [{ lb_endpoints: Array.from({ length: n }, (_, i) => ({ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 10001 + i } } } })) }] },
  };
}

describe('Cluster wiring', () => {
  test('recordResult ejects; pick skips the host; membership_healthy and /stats names follow', () => {
    const store = new StatsStore();
    const c = new Cluster(compileCluster(new Msg(clusterJson({ consecutive_5xx: 3, max_ejection_percent: 50 }), 'cluster')), store);
    try {
      const bad = c.hostSet.hosts[1];
      for (let i = 0; i < 3; i++) c.recordResult(bad, UpstreamResult.ConnectFailed);
      assert.equal(bad.ejected, true);
      for (let i = 0; i < 20; i++) assert.notEqual(c.pick(undefined), bad);
      assert.equal(store.find('gauges', 'cluster.svc.membership_healthy')?.value, 2);
      assert.equal(store.find('gauges', 'cluster.svc.outlier_detection.ejections_active')?.value, 1);
      assert.equal(store.find('counters', 'cluster.svc.outlier_detection.ejections_enforced_consecutive_5xx')?.value, 1);
      assert.equal(statBase('cluster.svc.outlier_detection.ejections_active', store.tagsOf('cluster.svc.outlier_detection.ejections_active')!), 'cluster.outlier_detection.ejections_active');
    } finally {
      c.close();
    }
  });
  test('without outlier_detection recordResult is a no-op and no outlier stats exist', () => {
    const store = new StatsStore();
    const cfg = clusterJson({});
    delete cfg.outlier_detection;
    const c = new Cluster(compileCluster(new Msg(cfg, 'cluster')), store);
    try {
      for (let i = 0; i < 10; i++) c.recordResult(c.hostSet.hosts[0], 500);
      assert.equal(c.hostSet.hosts[0].ejected, false);
      assert.equal([...store.gauges.keys()].some((k) => k.includes('outlier_detection')), false);
    } finally {
      c.close();
    }
  });
});
