import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { extractTags, renderJson, renderPrometheus, renderText } from '../src/stats/prometheus.ts';
import { CodeClassCounters, HISTOGRAM_BOUNDS, Histogram, StatsStore } from '../src/stats/store.ts';

const ISTIO_CLUSTER = 'outbound|9080||reviews.default.svc.cluster.local';

/** Lines of the exposition that start with `prefix` (a metric name, with or without labels). */
const linesOf = (text: string, prefix: string): string[] => text.split('\n').filter((l) => l.startsWith(prefix));

/** A store shaped like a running sidecar's. */
function sampleStore(): StatsStore {
  const store = new StatsStore();
  const c = store.scope('cluster', 'envoy_cluster_name', ISTIO_CLUSTER);
  c.counter('upstream_rq_total').inc(7);
  c.gauge('upstream_cx_active').set(2);
  const codes = new CodeClassCounters(c, 'upstream_rq');
  for (const s of [200, 201, 204, 404, 503, 503]) codes.record(s);
  const h = c.histogram('upstream_rq_time');
  for (const v of [0.3, 3, 5, 700, 5_000_000]) h.record(v);
  const other = store.scope('cluster', 'envoy_cluster_name', 'backend');
  other.counter('upstream_rq_total').inc(1);
  store.scope('http', 'envoy_http_conn_manager_prefix', 'inbound_0.0.0.0_9080').counter('downstream_rq_total').inc(3);
  store.scope('listener', 'envoy_listener_address', '0.0.0.0_15006').gauge('downstream_cx_active').set(1);
  store.counter('server.envoy_bug_failures');
  store.gauge('server.live').set(1);
  return store;
}

describe('extractTags', () => {
  const store = sampleStore();
  test('scoped stats: tag values come out of the name', () => {
    assert.deepEqual(extractTags(`cluster.${ISTIO_CLUSTER}.upstream_rq_total`, store.tagsOf(`cluster.${ISTIO_CLUSTER}.upstream_rq_total`)), {
      name: 'envoy_cluster_upstream_rq_total',
      tags: [['envoy_cluster_name', ISTIO_CLUSTER]],
    });
  });
  test('response code classes become envoy_response_code_class, first', () => {
    assert.deepEqual(extractTags(`cluster.${ISTIO_CLUSTER}.upstream_rq_2xx`, store.tagsOf(`cluster.${ISTIO_CLUSTER}.upstream_rq_2xx`)), {
      name: 'envoy_cluster_upstream_rq_xx',
      tags: [['envoy_response_code_class', '2'], ['envoy_cluster_name', ISTIO_CLUSTER]],
    });
  });
  test('unscoped names: dots and other characters become _', () => {
    assert.deepEqual(extractTags('server.live', store.tagsOf('server.live')), { name: 'envoy_server_live', tags: [] });
    assert.deepEqual(extractTags('a-b.c:d', store.tagsOf('a-b.c:d')), { name: 'envoy_a_b_c_d', tags: [] });
  });
  test('the code class only matches a real _rq_<n>xx suffix', () => {
    assert.equal(extractTags('x.upstream_rq_6xx', store.tagsOf('x.upstream_rq_6xx')).name, 'envoy_x_upstream_rq_6xx');
    assert.equal(extractTags('x.upstream_rq_2xx_extra', store.tagsOf('x.upstream_rq_2xx_extra')).name, 'envoy_x_upstream_rq_2xx_extra');
    assert.deepEqual(extractTags('x.downstream_rq_5xx', store.tagsOf('x.downstream_rq_5xx')).tags, [['envoy_response_code_class', '5']]);
  });
});

describe('renderPrometheus', () => {
  const text = renderPrometheus(sampleStore());

  test('Envoy-style code-class series with the Istio cluster name', () => {
    assert.deepEqual(linesOf(text, 'envoy_cluster_upstream_rq_xx{'), [
      `envoy_cluster_upstream_rq_xx{envoy_response_code_class="1",envoy_cluster_name="${ISTIO_CLUSTER}"} 0`,
      `envoy_cluster_upstream_rq_xx{envoy_response_code_class="2",envoy_cluster_name="${ISTIO_CLUSTER}"} 3`,
      `envoy_cluster_upstream_rq_xx{envoy_response_code_class="3",envoy_cluster_name="${ISTIO_CLUSTER}"} 0`,
      `envoy_cluster_upstream_rq_xx{envoy_response_code_class="4",envoy_cluster_name="${ISTIO_CLUSTER}"} 1`,
      `envoy_cluster_upstream_rq_xx{envoy_response_code_class="5",envoy_cluster_name="${ISTIO_CLUSTER}"} 2`,
    ]);
  });
  test('one # TYPE line per metric family, before all its series; families sorted', () => {
    const types = linesOf(text, '# TYPE ');
    const names = types.map((l) => l.split(' ')[2]);
    assert.equal(new Set(names).size, names.length, 'no duplicate TYPE lines');
    assert.deepEqual(names, [...names].sort());
    assert.ok(types.includes('# TYPE envoy_cluster_upstream_rq_total counter'));
    assert.ok(types.includes('# TYPE envoy_cluster_upstream_cx_active gauge'));
    assert.ok(types.includes('# TYPE envoy_cluster_upstream_rq_time histogram'));
    assert.ok(types.includes('# TYPE envoy_server_live gauge'));
    const lines = text.split('\n');
    const at = lines.indexOf('# TYPE envoy_cluster_upstream_rq_total counter');
    assert.deepEqual(lines.slice(at + 1, at + 3).sort(), [
      'envoy_cluster_upstream_rq_total{envoy_cluster_name="backend"} 1',
      `envoy_cluster_upstream_rq_total{envoy_cluster_name="${ISTIO_CLUSTER}"} 7`,
    ].sort());
    assert.ok(text.endsWith('\n'));
  });
  test('other scopes carry their own tag', () => {
    assert.deepEqual(linesOf(text, 'envoy_http_downstream_rq_total'), ['envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="inbound_0.0.0.0_9080"} 3']);
    assert.deepEqual(linesOf(text, 'envoy_listener_downstream_cx_active'), ['envoy_listener_downstream_cx_active{envoy_listener_address="0.0.0.0_15006"} 1']);
    assert.deepEqual(linesOf(text, 'envoy_server_envoy_bug_failures'), ['envoy_server_envoy_bug_failures 0']);
  });
  test('histograms: cumulative buckets with Envoy bounds, +Inf = count, sum and count', () => {
    const buckets = linesOf(text, 'envoy_cluster_upstream_rq_time_bucket{');
    assert.equal(buckets.length, HISTOGRAM_BOUNDS.length + 1);
    const parsed = buckets.map((l) => {
      const m = /^envoy_cluster_upstream_rq_time_bucket\{envoy_cluster_name="([^"]+)",le="([^"]+)"\} (\d+)$/.exec(l);
      assert.ok(m, l);
      assert.equal(m[1], ISTIO_CLUSTER);
      return [m[2], Number(m[3])] as const;
    });
    assert.deepEqual(parsed.map((p) => p[0]), [...HISTOGRAM_BOUNDS.map(String), '+Inf']);
    const at = (le: string): number => parsed.find((p) => p[0] === le)![1];
    // Values 0.3, 3, 5, 700, 5e6: le is inclusive; 5e6 is above every finite bound.
    assert.deepEqual(['0.5', '1', '5', '10', '500', '1000', '3600000', '+Inf'].map(at), [1, 1, 3, 3, 3, 4, 4, 5]);
    for (let i = 1; i < parsed.length; i++) assert.ok(parsed[i][1] >= parsed[i - 1][1], 'cumulative');
    assert.deepEqual(linesOf(text, 'envoy_cluster_upstream_rq_time_sum'), [`envoy_cluster_upstream_rq_time_sum{envoy_cluster_name="${ISTIO_CLUSTER}"} ${0.3 + 3 + 5 + 700 + 5_000_000}`]);
    assert.deepEqual(linesOf(text, 'envoy_cluster_upstream_rq_time_count'), [`envoy_cluster_upstream_rq_time_count{envoy_cluster_name="${ISTIO_CLUSTER}"} 5`]);
  });
  test('Envoy default histogram bounds', () => {
    assert.deepEqual(HISTOGRAM_BOUNDS, [0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000]);
    const h = new Histogram();
    h.record(1);
    h.record(1.0001);
    assert.deepEqual([h.buckets[1], h.buckets[2], h.count], [1, 1, 2]);
  });
  test('label values escape backslash and double quote', () => {
    const store = new StatsStore();
    store.scope('cluster', 'envoy_cluster_name', 'a\\b"c').counter('upstream_rq_total').inc();
    assert.deepEqual(linesOf(renderPrometheus(store), 'envoy_cluster_upstream_rq_total{'), ['envoy_cluster_upstream_rq_total{envoy_cluster_name="a\\\\b\\"c"} 1']);
  });
  // Regression (fixed in src/stats/prometheus.ts labels): a line feed in a label value must be written as `\n`
  // (Prometheus text exposition format); it is written raw, which breaks the whole scrape
  // ("label value contains unescaped new-line").
  test('label values escape line feeds', () => {
    const store = new StatsStore();
    store.scope('cluster', 'envoy_cluster_name', 'line1\nline2').counter('upstream_rq_total').inc();
    assert.deepEqual(linesOf(renderPrometheus(store), 'envoy_cluster_upstream_rq_total{'), ['envoy_cluster_upstream_rq_total{envoy_cluster_name="line1\\nline2"} 1']);
  });
  test('an empty store renders nothing', () => {
    assert.equal(renderPrometheus(new StatsStore()), '');
  });
});

describe('renderText / renderJson', () => {
  const store = sampleStore();
  test('text: sorted `name: value`, with the full dotted names', () => {
    const text = renderText(store, undefined);
    const rows = text.trimEnd().split('\n');
    assert.deepEqual(rows, [...rows].sort());
    assert.ok(rows.includes(`cluster.${ISTIO_CLUSTER}.upstream_rq_2xx: 3`));
    assert.ok(rows.includes('server.live: 1'));
    assert.ok(rows.includes(`cluster.${ISTIO_CLUSTER}.upstream_rq_time: count=5 sum=${(5_000_708.3).toFixed(3)}`));
  });
  test('text filter', () => {
    assert.equal(renderText(store, /^server\./), 'server.envoy_bug_failures: 0\nserver.live: 1\n');
  });
  test('json: sorted counters and gauges', () => {
    const j = JSON.parse(renderJson(store, /^cluster\.backend\./)) as { stats: Array<{ name: string; value: number }> };
    assert.deepEqual(j.stats, [{ name: 'cluster.backend.upstream_rq_total', value: 1 }]);
    const all = JSON.parse(renderJson(store, undefined)) as { stats: Array<{ name: string }> };
    assert.deepEqual(all.stats.map((s) => s.name), all.stats.map((s) => s.name).sort());
  });
});

describe('promtool check metrics', () => {
  const PROMTOOL = '/usr/bin/promtool';
  const have = existsSync(PROMTOOL);
  if (!have) console.log(`# skipping promtool checks: ${PROMTOOL} not found (Debian package "prometheus")`);
  // Envoy's own exposition has no HELP lines and no _total suffix; those lints are expected.
  const EXPECTED_LINT = [/ no help text$/, / counter metrics should have "_total" suffix$/, / metric names should not contain abbreviated units$/, / use base unit /];

  function check(text: string): { status: number | null; problems: string[]; output: string } {
    const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
    const output = `${r.stdout}${r.stderr}`;
    return { status: r.status, output, problems: output.split('\n').filter((l) => l && !EXPECTED_LINT.some((re) => re.test(l))) };
  }

  test('the sample exposition parses, with only the expected lints', { skip: !have && 'promtool not installed' }, () => {
    const r = check(renderPrometheus(sampleStore()));
    assert.notEqual(r.status, 1, r.output);
    assert.deepEqual(r.problems, []);
  });
  test('awkward tag values still parse', { skip: !have && 'promtool not installed' }, () => {
    const store = new StatsStore();
    for (const name of ['a"b', 'c\\d', 'ünïcode', 'x|y||z.svc', 'sp ace', '{braces}', '']) {
      store.scope('cluster', 'envoy_cluster_name', name).counter('upstream_rq_total').inc();
    }
    const r = check(renderPrometheus(store));
    assert.notEqual(r.status, 1, r.output);
    assert.deepEqual(r.problems, []);
  });
  // Regression: same root cause as 'label values escape line feeds'.
  test('a tag value with a line feed still parses', { skip: !have && 'promtool not installed' }, () => {
    const store = new StatsStore();
    store.scope('cluster', 'envoy_cluster_name', 'multi\nline').counter('upstream_rq_total').inc();
    const r = check(renderPrometheus(store));
    assert.notEqual(r.status, 1, r.output);
    assert.deepEqual(r.problems, []);
  });
  test('the checker catches broken output (self-test)', { skip: !have && 'promtool not installed' }, () => {
    const r = check('# TYPE envoy_x counter\nenvoy_x{a="1} 1\n');
    assert.equal(r.status, 1);
  });
});

describe('scoped stats (StatsStore groups)', () => {
  test('scopes on one prefix share stats; release drops only what that scope handed out, and the group once empty', () => {
    const store = new StatsStore();
    const a = store.scope('cluster', 'envoy_cluster_name', 'c1');
    const b = store.scope('cluster', 'envoy_cluster_name', 'c1');
    a.counter('upstream_rq_total').inc(2);
    assert.equal(store.scope('cluster', 'envoy_cluster_name', 'c1').counter('upstream_rq_total').value, 2, 'the same stat for the same name');
    b.gauge('circuit_breakers.default.rq_open').set(1);
    // Another cluster's group gets slots of its own in the shared names.
    store.scope('cluster', 'envoy_cluster_name', 'c2').gauge('circuit_breakers.default.rq_open').set(5);
    assert.equal(store.find('counters', 'cluster.c1.upstream_rq_total')?.value, 2);
    assert.equal(store.find('gauges', 'cluster.c2.circuit_breakers.default.rq_open')?.value, 5);
    assert.equal(store.find('counters', 'cluster.c2.upstream_rq_total'), undefined, 'never made for c2');
    b.release();
    assert.equal(store.find('gauges', 'cluster.c1.circuit_breakers.default.rq_open'), undefined);
    assert.ok(store.groups.has('cluster.c1.'), 'c1 still has a stat');
    a.release();
    assert.equal(store.find('counters', 'cluster.c1.upstream_rq_total'), undefined);
    assert.ok(!store.groups.has('cluster.c1.'), 'the empty group is gone');
    const names: string[] = [];
    store.each('gauges', (name) => names.push(name));
    assert.deepEqual(names, ['cluster.c2.circuit_breakers.default.rq_open']);
  });
});

test('release finds every stat a scope handed out, past the first 31 of a kind', () => {
  const store = new StatsStore();
  const a = store.scope('cluster', 'envoy_cluster_name', 'big');
  const other = store.scope('cluster', 'envoy_cluster_name', 'big');
  for (let i = 0; i < 70; i++) a.counter(`c${i}`).inc();
  other.counter('kept').inc();
  a.gauge('g').set(1);
  a.release();
  const left: string[] = [];
  store.each('counters', (name) => left.push(name));
  store.each('gauges', (name) => left.push(name));
  assert.deepEqual(left, ['cluster.big.kept']);
});

test('a histogram without samples shares its zero buckets; the first sample, or another thread\'s, makes its own', () => {
  const a = new Histogram(), b = new Histogram();
  assert.deepEqual(Array.from(a.buckets), new Array(HISTOGRAM_BOUNDS.length).fill(0));
  a.record(3);
  assert.equal(a.buckets[2], 1);
  assert.equal(b.buckets[2], 0, 'an untouched histogram still reads zero');
  b.add(a.buckets, a.count, a.sum);
  b.add(a.buckets, a.count, a.sum);
  assert.deepEqual([b.buckets[2], b.count, b.sum, a.buckets[2]], [2, 2, 6, 1]);
});
