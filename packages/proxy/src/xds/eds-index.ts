/**
 * EDS bookkeeping for the config layer: which live clusters (active, warming or static) take their
 * endpoints from which ClusterLoadAssignment name, and the last assignment of each name in use.
 * Envoy's EDS subscriptions are per cluster, so:
 * - an assignment for a name no cluster uses is not stored;
 * - an assignment goes with the last cluster using its name, so a removed-then-re-added cluster
 *   warms again and waits for a fresh one;
 * - applying an assignment touches the clusters using it, never every cluster.
 */
import { Msg } from '../config/fields.ts';
import { readLoadAssignment, type EndpointConfig } from '../upstream/cluster-config.ts';
import type { Cluster } from '../upstream/cluster.ts';
import { TrackedBytes, type TrackedResource } from './state.ts';

export interface Assignment {
  readonly tracked: TrackedResource;
  /**
   * The compiled endpoints, only where `tracked` cannot give them back (a --concurrency worker keeps
   * no config). Where it holds the bytes they are compiled again when needed — a cluster updated
   * in place takes its assignment — which is rare; kept, they were ~700 B per assignment.
   */
  readonly endpoints?: readonly EndpointConfig[];
}

/** An assignment as it was stored: from its bytes (see Assignment.endpoints), else as compiled then. */
export function assignmentOf(tracked: TrackedResource, endpoints: readonly EndpointConfig[]): Assignment {
  return tracked instanceof TrackedBytes ? { tracked } : { tracked, endpoints };
}

/** The endpoints of a stored assignment. */
export function endpointsOf(a: Assignment): readonly EndpointConfig[] {
  return a.endpoints ?? readLoadAssignment(new Msg(a.tracked.json, ''), 'EDS');
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
  /** The clusters using each name: nearly always one (a Set only while a cluster and its update both do). */
  private readonly users = new Map<string, Cluster | Set<Cluster>>();

  /** A cluster became warming or active (idempotent). Non-EDS clusters are ignored. */
  track(c: Cluster): void {
    if (c.config.type !== 'EDS') return;
    const name = c.config.edsServiceName;
    const had = this.users.get(name);
    if (had === undefined) {
      this.users.set(name, c);
      this.names.add(name);
      this.revision++;
    } else if (had instanceof Set) had.add(c);
    else if (had !== c) this.users.set(name, new Set([had, c]));
  }

  /** A cluster was replaced, removed or dropped while warming; the last user of a name takes its assignment along. */
  forget(c: Cluster): void {
    if (c.config.type !== 'EDS') return;
    const name = c.config.edsServiceName;
    const had = this.users.get(name);
    if (had instanceof Set) {
      if (!had.delete(c)) return;
      if (had.size === 1) this.users.set(name, had.values().next().value as Cluster);
      if (had.size > 0) return;
    } else if (had !== c) return;
    this.users.delete(name);
    this.names.delete(name);
    this.assignments.delete(name);
    this.revision++;
  }

  /** The clusters using `name` (a copy: delivering may replace them). */
  usersOf(name: string): readonly Cluster[] {
    const had = this.users.get(name);
    return had === undefined ? NONE : had instanceof Set ? [...had] : [had];
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
