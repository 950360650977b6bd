/**
 * The bootstrap's stats_config.stats_matcher (Envoy's StatsMatcher): which stats are instantiated.
 * reject_all, an inclusion_list or an exclusion_list of StringMatchers, matched against the stat's
 * full name (`cluster.outbound|80||a.ns.svc.cluster.local.upstream_rq_total`), as Envoy does before
 * tag extraction. istiod's bootstrap keeps only what Istio reads (server, cluster_manager, listener_manager,
 * cluster.xds-grpc, RBAC, ...): a sidecar then holds no per-cluster traffic stats at all.
 * Also deferred_stat_options.enable_deferred_creation_stats: cluster traffic stats made on first use.
 */
import type { Msg } from '../config/fields.ts';
import { compileStringMatcher, type StringPredicate } from '../matchers/string-matcher.ts';

export interface StatsMatcher {
  /** Whether a stat of this full name is instantiated (kept in the store, published). */
  accepts(name: string): boolean;
}

export interface StatsOptions {
  /** undefined: every stat (Envoy's default). */
  readonly matcher: StatsMatcher | undefined;
  /** Cluster traffic stats (upstream_rq_*, upstream_cx_*, ...) made on first use. */
  readonly deferredClusterStats: boolean;
}

const REJECT_ALL: StatsMatcher = { accepts: () => false };

/** A plain loop: asked ~50 times per cluster, a `some` callback per call was garbage to collect. */
function matchesAny(patterns: readonly StringPredicate[], name: string): boolean {
  for (let i = 0; i < patterns.length; i++) if (patterns[i](name)) return true;
  return false;
}

function anyOf(list: Msg): StringPredicate[] {
  list.onlyFields(['patterns']);
  return list.list('patterns').map((p) => compileStringMatcher(p));
}

/** stats_config (and deferred_stat_options) of a bootstrap; throws ConfigError naming the field. */
export function compileStatsOptions(statsConfig: Msg | undefined, deferred: Msg | undefined): StatsOptions {
  const deferredClusterStats = deferred?.bool('enable_deferred_creation_stats') ?? false;
  const m = statsConfig?.msg('stats_matcher');
  if (!m) return { matcher: undefined, deferredClusterStats };
  m.onlyFields(['reject_all', 'inclusion_list', 'exclusion_list']);
  const set = ['reject_all', 'inclusion_list', 'exclusion_list'].filter((k) => (k === 'reject_all' ? m.bool(k) : m.has(k)));
  if (set.length > 1) throw m.error(set[1], `only one of reject_all, inclusion_list, exclusion_list may be set (${set[0]} is)`);
  if (m.bool('reject_all')) return { matcher: REJECT_ALL, deferredClusterStats };
  const inc = m.msg('inclusion_list');
  if (inc) {
    const patterns = anyOf(inc);
    return { matcher: { accepts: (name) => matchesAny(patterns, name) }, deferredClusterStats };
  }
  const exc = m.msg('exclusion_list');
  if (exc) {
    const patterns = anyOf(exc);
    return { matcher: { accepts: (name) => !matchesAny(patterns, name) }, deferredClusterStats };
  }
  return { matcher: undefined, deferredClusterStats };
}
