import type { Gauge, Scope } from '../stats/store.ts';
import type { CircuitBreakerLimits } from './cluster-config.ts';
import { RESOURCES, sharedCounts, writesBreakerGauges } from './shared-breakers.ts';

/**
 * One circuit-breaker resource (an entry of Envoy's ResourceManager): a count
 * against a limit, mirrored into `<resource>_open` (1 at capacity) and, with
 * track_remaining, `remaining_<resource>`. With --concurrency N the count lives in
 * memory every worker thread shares (shared-breakers.ts), and only the main thread
 * writes the gauges, so the merged stats show the process's count once.
 */
export class Resource {
  readonly max: number;
  private local = 0;
  private live: boolean;
  private readonly open: Gauge;
  private readonly remaining: Gauge | undefined;
  private readonly cells: Int32Array | undefined;
  private readonly at: number;

  constructor(max: number, open: Gauge, remaining: Gauge | undefined, shared?: { cells: Int32Array; at: number }) {
    this.max = max;
    this.open = open;
    this.remaining = remaining;
    this.cells = shared?.cells;
    this.at = shared?.at ?? 0;
    this.live = shared === undefined || writesBreakerGauges();
    this.update();
  }

  get count(): number { return this.cells ? Atomics.load(this.cells, this.at) : this.local; }

  canCreate(): boolean { return this.count < this.max; }

  inc(): void {
    if (this.cells) Atomics.add(this.cells, this.at, 1); else this.local++;
    this.update();
  }

  dec(): void {
    if (this.cells) Atomics.sub(this.cells, this.at, 1); else this.local--;
    this.update();
  }

  /** A replaced cluster's resources stop writing the gauges its successor now owns. */
  detach(): void { this.live = false; }

  /** The gauges from the count (shared counts change on other threads too: the main thread refreshes at scrape). */
  update(): void {
    if (!this.live) return;
    const n = this.count;
    this.open.value = n >= this.max ? 1 : 0;
    if (this.remaining) this.remaining.value = this.max > n ? this.max - n : 0;
  }
}

interface ResourceNames { readonly open: string; readonly remaining: string }

function resourceNames(priority: string, open: string, remaining: string): ResourceNames {
  return { open: `circuit_breakers.${priority}.${open}`, remaining: `circuit_breakers.${priority}.remaining_${remaining}` };
}

/** The gauges' names, built once (not per cluster: 20,000 clusters × 20 names). */
const STAT_NAMES = Object.fromEntries((['default', 'high'] as const).map((p) => [p, {
  cx: resourceNames(p, 'cx_open', 'cx'), pending: resourceNames(p, 'rq_pending_open', 'pending'), rq: resourceNames(p, 'rq_open', 'rq'),
  retries: resourceNames(p, 'rq_retry_open', 'retries'), cxPools: resourceNames(p, 'cx_pool_open', 'cx_pools'),
}])) as Record<'default' | 'high', Record<'cx' | 'pending' | 'rq' | 'retries' | 'cxPools', ResourceNames>>;

/**
 * A cluster's circuit breakers for one priority, as plain counts (one event loop
 * owns them). Stats under `cluster.<name>.circuit_breakers.<priority>.*`.
 */
export class CircuitBreakers {
  /** max_connections: open upstream connections across every host and pool of the cluster. */
  readonly connections: Resource;
  /** max_pending_requests: requests waiting for a connection. */
  readonly pending: Resource;
  /** max_requests: outstanding requests. */
  readonly requests: Resource;
  /** max_retries: outstanding retries. */
  readonly retries: Resource;
  /** max_connection_pools is not supported (refused at load): unlimited, as Envoy's default (2^32 − 1). */
  readonly connectionPools: Resource;
  /**
   * `p`: the cluster's stats scope (ClusterStats.scope), which releases these gauges with the cluster's;
   * `cluster`: its name, which finds its counts shared with the other worker threads (if any).
   */
  constructor(limits: CircuitBreakerLimits, p: Scope, priority: 'default' | 'high', cluster = '') {
    const names = STAT_NAMES[priority];
    const shared = cluster ? sharedCounts(cluster) : undefined;
    let next = priority === 'default' ? 0 : RESOURCES;
    const resource = (max: number, r: ResourceNames): Resource => new Resource(max, p.gauge(r.open), limits.trackRemaining ? p.gauge(r.remaining) : undefined,
      shared && { cells: shared.cells, at: shared.base + next++ });
    this.connections = resource(limits.maxConnections, names.cx);
    this.pending = resource(limits.maxPendingRequests, names.pending);
    this.requests = resource(limits.maxRequests, names.rq);
    this.retries = resource(limits.maxRetries, names.retries);
    this.connectionPools = resource(4294967295, names.cxPools);
  }

  private get all(): Resource[] {
    return [this.connections, this.pending, this.requests, this.retries, this.connectionPools];
  }

  detach(): void {
    for (const r of this.all) r.detach();
  }

  /** Gauges from the counts as they are now (shared counts: the main thread, before stats are read). */
  refreshGauges(): void {
    for (const r of this.all) r.update();
  }
}

/**
 * The gauges of a priority no request counts against (HIGH: no route selects it yet), as Envoy shows
 * an idle ResourceManager: `*_open` 0 (1 for a limit of 0), `remaining_*` the limit. They never change,
 * so they are set once and nothing is kept per cluster (five Resources were ~450 B each of 5,000
 * clusters). `p` is the cluster's scope, which releases them with the cluster's other stats. As with
 * Resource, a worker thread whose counts are shared leaves them to the main thread's gauges.
 */
export function publishIdleBreakers(limits: CircuitBreakerLimits, p: Scope, priority: 'default' | 'high', cluster = ''): void {
  if (!writesBreakerGauges() && cluster && sharedCounts(cluster)) return;
  const names = STAT_NAMES[priority];
  const idle = (max: number, r: ResourceNames): void => {
    p.gauge(r.open).value = max > 0 ? 0 : 1;
    if (limits.trackRemaining) p.gauge(r.remaining).value = max;
  };
  idle(limits.maxConnections, names.cx);
  idle(limits.maxPendingRequests, names.pending);
  idle(limits.maxRequests, names.rq);
  idle(limits.maxRetries, names.retries);
  idle(4294967295, names.cxPools);
}
