import type { Counter, StatsStore } from '../stats/store.ts';
import type { Cluster } from '../upstream/cluster.ts';

/** `cluster.<name>.upstream_rq_retry*` and the outstanding-retries count for max_retries. */
export class RetryStats {
  readonly retry: Counter;
  readonly success: Counter;
  readonly overflow: Counter;
  readonly limitExceeded: Counter;
  readonly backoff: Counter;
  activeRetries = 0;

  private constructor(store: StatsStore, cluster: string) {
    const p = store.scope('cluster', 'envoy_cluster_name', cluster);
    this.retry = p.counter('upstream_rq_retry');
    this.success = p.counter('upstream_rq_retry_success');
    this.overflow = p.counter('upstream_rq_retry_overflow');
    this.limitExceeded = p.counter('upstream_rq_retry_limit_exceeded');
    this.backoff = p.counter('upstream_rq_retry_backoff_exponential');
  }

  private static readonly byCluster = new WeakMap<Cluster, RetryStats>();

  static of(cluster: Cluster, store: StatsStore): RetryStats {
    let s = RetryStats.byCluster.get(cluster);
    if (!s) { s = new RetryStats(store, cluster.config.name); RetryStats.byCluster.set(cluster, s); }
    return s;
  }
}
