import type { Gauge, Scope } from '../stats/store.ts';
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
  /** `p`: the cluster's stats scope (ClusterStats.scope), which releases these gauges with the cluster's. */
  constructor(limits: CircuitBreakerLimits, p: Scope, priority: 'default' | 'high') {
    const names = STAT_NAMES[priority];
    const resource = (max: number, r: ResourceNames): Resource => new Resource(max, p.gauge(r.open), limits.trackRemaining ? p.gauge(r.remaining) : undefined);
    this.connections = resource(limits.maxConnections, names.cx);
    this.pending = resource(limits.maxPendingRequests, names.pending);
    this.requests = resource(limits.maxRequests, names.rq);
    this.retries = resource(limits.maxRetries, names.retries);
    this.connectionPools = resource(4294967295, names.cxPools);
  }

  detach(): void {
    for (const r of [this.connections, this.pending, this.requests, this.retries, this.connectionPools]) r.detach();
  }
}
