// stats_config.stats_matcher and deferred_stat_options: which stats a proxy instantiates, checked
// on the store and through a running proxy's /stats and /stats/prometheus.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { compileStatsOptions } from '../src/stats/matcher.ts';
import { StatsStore } from '../src/stats/store.ts';
import { ClusterStats } from '../src/upstream/cluster-stats.ts';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';

const options = (statsConfig: unknown, deferred?: unknown) =>
  compileStatsOptions(statsConfig === undefined ? undefined : new Msg(statsConfig as Record<string, unknown>, 'stats_config'),
    deferred === undefined ? undefined : new Msg(deferred as Record<string, unknown>, 'deferred_stat_options'));

function storeWith(statsConfig: unknown, deferred?: unknown): StatsStore {
  const o = options(statsConfig, deferred);
  const s = new StatsStore();
  s.matcher = o.matcher;
  s.deferredClusterStats = o.deferredClusterStats;
  return s;
}

const ISTIO = { stats_matcher: { inclusion_list: { patterns: [
  { prefix: 'reporter=' }, { prefix: 'cluster_manager' }, { prefix: 'listener_manager' }, { prefix: 'server' }, { prefix: 'cluster.xds-grpc' },
  { prefix: 'wasm' }, { suffix: 'rbac.allowed' }, { suffix: 'rbac.denied' }, { suffix: 'shadow_allowed' }, { suffix: 'shadow_denied' },
  { safe_regex: { regex: 'vhost\\..*\\.route\\..*' } }, { prefix: 'component' }, { prefix: 'istio' }] } } };

describe('stats_matcher', () => {
  test('inclusion list: matching stats are kept; the others are null stats (writes dropped, read 0), never published', () => {
    const s = storeWith(ISTIO);
    s.counter('server.static_unknown_fields').inc();
    const dropped = s.counter('http.inbound.downstream_rq_total');
    dropped.inc(3);
    dropped.value++;
    assert.equal(dropped.value, 0, 'a rejected stat reads 0, as Envoy\'s null stats');
    assert.equal(s.histogram('http.inbound.downstream_rq_time').count, 0);
    s.histogram('http.inbound.downstream_rq_time').record(5);
    assert.equal(s.histogram('http.inbound.downstream_rq_time').count, 0);
    assert.equal(s.find('counters', 'server.static_unknown_fields')?.value, 1);
    assert.equal(s.find('counters', 'http.inbound.downstream_rq_total'), undefined);
    const xds = new ClusterStats(s, 'xds-grpc');
    const svc = new ClusterStats(s, 'outbound|80||a.default.svc.cluster.local');
    xds.rqTotal.inc();
    svc.rqTotal.inc(2);
    assert.equal(svc.rqTotal.value, 0);
    assert.equal(s.find('counters', 'cluster.xds-grpc.upstream_rq_total')?.value, 1);
    assert.equal(s.find('counters', 'cluster.outbound|80||a.default.svc.cluster.local.upstream_rq_total'), undefined);
    assert.equal(s.groups.has('cluster.outbound|80||a.default.svc.cluster.local.'), false, 'no group for a cluster with no kept stat');
    s.counter('http.inbound.rbac.allowed');
    s.counter('vhost.v.route.r.upstream_rq_total');
    assert.ok(s.find('counters', 'http.inbound.rbac.allowed') && s.find('counters', 'vhost.v.route.r.upstream_rq_total'));
  });

  test('exclusion list and reject_all', () => {
    const ex = storeWith({ stats_matcher: { exclusion_list: { patterns: [{ prefix: 'cluster.' }] } } });
    ex.counter('cluster.a.x');
    ex.counter('server.y');
    assert.deepEqual([ex.find('counters', 'cluster.a.x'), ex.find('counters', 'server.y')?.value], [undefined, 0]);
    const none = storeWith({ stats_matcher: { reject_all: true } });
    none.gauge('server.live').set(1);
    assert.equal(none.find('gauges', 'server.live'), undefined);
    assert.equal(options({}).matcher, undefined, 'no stats_matcher: every stat');
  });

  test('bad config names the field', () => {
    assert.throws(() => options({ stats_matcher: { reject_all: true, inclusion_list: { patterns: [] } } }), (e: Error) => e instanceof ConfigError && /stats_config\.stats_matcher\.inclusion_list: only one of/.test(e.message));
    assert.throws(() => options({ stats_matcher: { inclusion_list: { patterns: [{ safe_regex: { regex: '(?=x)' } }] } } }), ConfigError);
    assert.throws(() => options({ stats_matcher: { inclusion_list: { patterns: [{ bogus: 'x' }] } } }), ConfigError);
  });

  test('a cluster whose traffic stats are all rejected still counts a response code the matcher keeps', () => {
    const s = storeWith({ stats_matcher: { inclusion_list: { patterns: [{ suffix: 'upstream_rq_503' }] } } });
    const c = new ClusterStats(s, 'a');
    assert.equal(s.groups.size, 0, 'nothing kept yet');
    c.rqTotal.inc();
    c.codes.record(200);
    c.codes.record(503);
    c.codes.record(503);
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_503')?.value, 2);
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_200'), undefined);
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_total'), undefined);
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_5xx'), undefined);
  });

  test('TLS clusters: ssl.* and <match>.total_match_count count when kept; rejected ones stay null stats', () => {
    const kept = storeWith({ stats_matcher: { inclusion_list: { patterns: [{ suffix: 'ssl.handshake' }, { suffix: 'total_match_count' }] } } });
    const a = new ClusterStats(kept, 'a', true);
    a.ssl!.handshake.inc();
    a.matchCount('tlsMode-istio').inc();
    a.matchCount('tlsMode-istio').inc();
    assert.equal(kept.find('counters', 'cluster.a.ssl.handshake')?.value, 1);
    assert.equal(kept.find('counters', 'cluster.a.tlsMode-istio.total_match_count')?.value, 2);
    assert.equal(kept.find('counters', 'cluster.a.ssl.connection_error'), undefined);
    const istio = storeWith(ISTIO);
    const b = new ClusterStats(istio, 'outbound|80||b.default.svc.cluster.local', true);
    const c = new ClusterStats(istio, 'outbound|80||c.default.svc.cluster.local', true);
    b.ssl!.handshake.inc();
    b.matchCount('tlsMode-istio').inc();
    assert.equal(b.ssl!.handshake.value, 0);
    assert.equal(b.ssl, c.ssl, 'all-null ssl stats: one shared set');
    assert.equal(istio.groups.size, 0, 'nothing kept');
  });

  test('a released cluster drops only the stats that were kept', () => {
    const s = storeWith({ stats_matcher: { inclusion_list: { patterns: [{ suffix: 'upstream_rq_total' }] } } });
    const c = new ClusterStats(s, 'a');
    assert.ok(s.find('counters', 'cluster.a.upstream_rq_total'));
    c.release();
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_total'), undefined);
    assert.equal(s.groups.size, 0);
  });
});

describe('deferred_stat_options.enable_deferred_creation_stats', () => {
  test('cluster traffic stats appear on first use; membership stats at once', () => {
    const s = storeWith(undefined, { enable_deferred_creation_stats: true });
    const c = new ClusterStats(s, 'a');
    assert.ok(s.find('gauges', 'cluster.a.membership_total'));
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_total'), undefined);
    c.rqTotal.inc();
    c.codes.record(200);
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_total')?.value, 1);
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_2xx')?.value, 1);
    assert.ok(s.find('histograms', 'cluster.a.upstream_rq_time'));
  });
  test('without it they exist from the start, as before', () => {
    const s = storeWith(undefined);
    new ClusterStats(s, 'a');
    assert.equal(s.find('counters', 'cluster.a.upstream_rq_total')?.value, 0);
  });
});
