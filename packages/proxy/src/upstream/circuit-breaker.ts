import type { Gauge, Scope, StatsStore } from '../stats/store.ts';
import type { CircuitBreakerLimits } from './cluster-config.ts';

/**
 * One circuit-breaker resource (an entry of Envoy's ResourceManager): a count
 * against a limit, mirrored into `<resource>_open` (1 at capacity) and, with
 * track_remaining, `remaining_<resource>`.
 */
export class Resource {
  readonly max: number;
  count = 0;
  private live = true;
  private readonly open: Gauge;
  private readonly remaining: Gauge | undefined;

  constructor(max: number, open: Gauge, remaining: Gauge | undefined) {
    this.max = max;
    this.open = open;
    this.remaining = remaining;
    this.update();
  }

  canCreate(): boolean { return this.count < this.max; }

  inc(): void { this.count++; this.update(); }

  dec(): void { this.count--; this.update(); }

  /** A replaced cluster's resources stop writing the gauges its successor now owns. */
  detach(): void { this.live = false; }

  private update(): void {
    if (!this.live) return;
    this.open.value = this.count >= this.max ? 1 : 0;
    if (this.remaining) this.remaining.value = this.max > this.count ? this.max - this.count : 0;
  }
}

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
  private readonly scope: Scope;

  constructor(limits: CircuitBreakerLimits, store: StatsStore, cluster: string, priority: 'default' | 'high') {
    const p = store.scope('cluster', 'envoy_cluster_name', cluster);
    this.scope = p;
    const g = (s: string): Gauge => p.gauge(`circuit_breakers.${priority}.${s}`);
    const r = (s: string): Gauge | undefined => (limits.trackRemaining ? g(`remaining_${s}`) : undefined);
    this.connections = new Resource(limits.maxConnections, g('cx_open'), r('cx'));
    this.pending = new Resource(limits.maxPendingRequests, g('rq_pending_open'), r('pending'));
    this.requests = new Resource(limits.maxRequests, g('rq_open'), r('rq'));
    this.retries = new Resource(limits.maxRetries, g('rq_retry_open'), r('retries'));
    this.connectionPools = new Resource(4294967295, g('cx_pool_open'), r('cx_pools'));
  }

  detach(): void {
    for (const r of [this.connections, this.pending, this.requests, this.retries, this.connectionPools]) r.detach();
  }

  /** Drops the gauges from the store (the cluster was removed). */
  release(): void {
    this.scope.release();
  }
}
