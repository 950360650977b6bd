/**
 * EDS bookkeeping for the config layer: which live clusters (active, warming or static) take their
 * endpoints from which ClusterLoadAssignment name, and the last assignment of each name in use.
 * Envoy's EDS subscriptions are per cluster, so:
 * - an assignment for a name no cluster uses is not stored;
 * - an assignment goes with the last cluster using its name, so a removed-then-re-added cluster
 *   warms again and waits for a fresh one;
 * - applying an assignment touches the clusters using it, never every cluster.
 */
import type { EndpointConfig } from '../upstream/cluster-config.ts';
import type { Cluster } from '../upstream/cluster.ts';
import type { TrackedResource } from './state.ts';

export interface Assignment {
  readonly tracked: TrackedResource;
  readonly endpoints: readonly EndpointConfig[];
}

const NONE: readonly Cluster[] = [];

export class EdsIndex {
  /** The last accepted assignment of each name some cluster uses (config_dump's endpoint configs). */
  readonly assignments = new Map<string, Assignment>();
  /** The names to subscribe to: every name some cluster uses. */
  readonly names = new Set<string>();
  /** Bumped whenever `names` changes (the ADS client compares revisions, not 20,000 names). */
  revision = 0;
  /** Clusters handed an assignment so far: grows by the users of each assignment, not by all clusters. */
  deliveries = 0;
  private readonly users = new Map<string, Set<Cluster>>();

  /** A cluster became warming or active (idempotent). Non-EDS clusters are ignored. */
  track(c: Cluster): void {
    if (c.config.type !== 'EDS') return;
    const name = c.config.edsServiceName;
    let set = this.users.get(name);
    if (!set) {
      set = new Set();
      this.users.set(name, set);
      this.names.add(name);
      this.revision++;
    }
    set.add(c);
  }

  /** A cluster was replaced, removed or dropped while warming; the last user of a name takes its assignment along. */
  forget(c: Cluster): void {
    if (c.config.type !== 'EDS') return;
    const name = c.config.edsServiceName;
    const set = this.users.get(name);
    if (!set || !set.delete(c) || set.size > 0) return;
    this.users.delete(name);
    this.names.delete(name);
    this.assignments.delete(name);
    this.revision++;
  }

  /** The clusters using `name` (a copy: delivering may replace them). */
  usersOf(name: string): readonly Cluster[] {
    const set = this.users.get(name);
    return set ? [...set] : NONE;
  }

  /** Stores an assignment; false when no cluster uses the name (then it is not kept). */
  store(name: string, a: Assignment): boolean {
    if (!this.users.has(name)) return false;
    this.assignments.set(name, a);
    return true;
  }

  /** Counts a delivery (see `deliveries`). */
  delivered(): void {
    this.deliveries++;
  }
}
