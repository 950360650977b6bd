import type { ClusterConfig } from './cluster-config.ts';
import { Cluster } from './cluster.ts';
import type { StatsStore } from '../stats/store.ts';

/** All clusters by name. A config update swaps clusters whose config changed. */
export class ClusterManager {
  private readonly clusters = new Map<string, Cluster>();
  private readonly store: StatsStore;

  constructor(store: StatsStore) {
    this.store = store;
  }

  get(name: string): Cluster | undefined {
    return this.clusters.get(name);
  }

  all(): IterableIterator<Cluster> {
    return this.clusters.values();
  }

  /** Adds or replaces a cluster; the old one's pools close once in-flight requests end. */
  addOrUpdate(config: ClusterConfig): Cluster {
    const old = this.clusters.get(config.name);
    const c = new Cluster(config, this.store);
    this.clusters.set(config.name, c);
    old?.close();
    return c;
  }

  /** Puts a built (warmed) cluster in place of any cluster of that name. */
  install(cluster: Cluster): void {
    const old = this.clusters.get(cluster.config.name);
    this.clusters.set(cluster.config.name, cluster);
    if (old && old !== cluster) old.close();
  }

  build(config: ClusterConfig): Cluster {
    return new Cluster(config, this.store);
  }

  get size(): number {
    return this.clusters.size;
  }

  /** Removes a cluster for good: its pools close once in-flight requests end, its stats go. */
  remove(name: string): void {
    const c = this.clusters.get(name);
    c?.close();
    c?.releaseStats();
    this.clusters.delete(name);
  }

  /** Resolves once every cluster has finished its first host resolution (or the deadline passed). */
  async warm(deadlineMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((r) => { timer = setTimeout(r, deadlineMs); });
    await Promise.race([Promise.all([...this.clusters.values()].map((c) => c.ready)), deadline]);
    clearTimeout(timer);
  }

  closeAll(): void {
    for (const c of this.clusters.values()) c.close();
  }
}
