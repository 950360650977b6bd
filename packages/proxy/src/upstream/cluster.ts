import { lookup } from 'node:dns/promises';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import { H1Pool, type H1PoolOptions, type UpstreamRequest } from './h1-pool.ts';
import { H2Pool } from './h2-pool.ts';
import { socketMatchFor, type ClusterConfig, type EndpointConfig } from './cluster-config.ts';
import { Host } from './host.ts';
import { HostSet, type LbPolicy } from './lb.ts';
import { ClusterStats } from './cluster-stats.ts';
import { CircuitBreakers, publishIdleBreakers } from './circuit-breaker.ts';
import { OutlierDetector, OutlierStats, type UpstreamResultCode } from './outlier.ts';
import type { StatsStore } from '../stats/store.ts';
import { logger } from '../core/log.ts';
import { filterStateString, parseIpPort, ORIGINAL_DST_ADDRESS_KEY, type FilterState } from '../core/filter-state.ts';
import { connectInternalHost } from './internal-upstream.ts';

const log = logger('upstream');

/** What a pick may depend on: the downstream connection's original destination, a header. */
export interface PickContext {
  originalDst?: { address: string; port: number };
  originalDstHeader?: string;
  /** Host to avoid (a retry's previous host). */
  exclude?: Host;
  /** The request's hash (route hash_policy) for RING_HASH / MAGLEV; undefined = random. */
  hash?: bigint;
  /** Retry host-selection attempt: hash balancers walk to another host per attempt. */
  attempt?: number;
  /** Filter state: ORIGINAL_DST honours `envoy.network.transport_socket.original_dst_address` first. */
  filterState?: FilterState;
}

/** Pool keys of ALPN override lists (config objects): built once per list, not joined per request. */
const OVERRIDE_KINDS = new WeakMap<readonly string[], { readonly h1: string; readonly h2: string }>();

function poolKind(http2: boolean, override: readonly string[] | undefined): string {
  if (!override) return http2 ? 'h2' : 'h1';
  let kinds = OVERRIDE_KINDS.get(override);
  if (!kinds) {
    const list = override.join(',');
    kinds = { h1: `h1|${list}`, h2: `h2|${list}` };
    OVERRIDE_KINDS.set(override, kinds);
  }
  return http2 ? kinds.h2 : kinds.h1;
}

/**
 * The runtime side of one ClusterConfig: host membership (static, DNS-refreshed or
 * on demand for ORIGINAL_DST), load balancing, and upstream connection pools.
 */
export class Cluster {
  readonly config: ClusterConfig;
  readonly stats: ClusterStats;
  /** circuit_breakers, DEFAULT priority: what every request is held to. */
  readonly breakers: CircuitBreakers;
  /** outlier_detection, when configured. */
  readonly outlier: OutlierDetector | undefined;
  hostSet: HostSet;
  private readonly byKey = new Map<string, Host>();
  private refreshTimer: NodeJS.Timeout | undefined;
  private markReady: (() => void) | undefined;
  /** EDS: false until the first ClusterLoadAssignment (other types: true). */
  warm: boolean;
  private closed = false;
  /** Resolves once the first DNS answer is in (Envoy's cluster warming). */
  readonly ready: Promise<void>;

  constructor(config: ClusterConfig, store: StatsStore) {
    this.config = config;
    this.stats = new ClusterStats(store, config.name, config.anyTls);
    this.breakers = new CircuitBreakers(config.limits, this.stats.scope, 'default', config.name);
    // HIGH priority: published as stats only (no route selects HIGH yet, so nothing counts against it).
    publishIdleBreakers(config.limitsHigh, this.stats.scope, 'high', config.name);
    if (config.outlier) {
      this.outlier = new OutlierDetector(config.outlier, new OutlierStats(this.stats.scope), { onChange: () => this.updateHealthyGauge(), cluster: config.name });
      this.outlier.start();
    }
    this.hostSet = new HostSet([], this.lbPolicy());
    this.warm = config.type !== 'EDS';
    if (config.type === 'STATIC') {
      this.setHosts(config.endpoints.map((e) => this.hostFor(e, e.address.address, e.hostname)));
      this.ready = Promise.resolve();
    } else if (config.type === 'STRICT_DNS' || config.type === 'LOGICAL_DNS') {
      this.ready = this.resolve();
    } else if (config.type === 'EDS') {
      // Warm until the first ClusterLoadAssignment arrives (Envoy's EDS cluster warming).
      this.ready = new Promise((resolve) => { this.markReady = resolve; });
    } else {
      this.ready = Promise.resolve();
      this.refreshTimer = setInterval(() => this.cleanupOriginalDst(), config.originalDstCleanupMs).unref();
    }
  }

  /** A host for an endpoint, with the transport socket its metadata selects. */
  private hostFor(e: EndpointConfig, address: string, hostname: string): Host {
    const m = socketMatchFor(this.config, e.socketMatch);
    // Only clusters with transport_socket_matches publish <match>.total_match_count (fewer series to scrape).
    if (this.config.socketMatches.length) this.stats.matchCount(m.name).inc();
    return new Host(address, e.address.port, {
      hostname, weight: e.weight, priority: e.priority, zone: e.zone, region: e.region, subZone: e.subZone,
      localityWeight: e.localityWeight, degraded: e.degraded, healthy: e.healthy, tls: m.tls, internal: e.internal, pipe: e.pipe, metadata: e.metadata,
    });
  }

  private lbPolicy(): LbPolicy {
    const p = this.config.lbPolicy;
    return p === 'LEAST_REQUEST' || p === 'RANDOM' ? p : 'ROUND_ROBIN';
  }

  private setHosts(hosts: Host[]): void {
    const keep = new Set<Host>();
    const all: Host[] = [];
    for (const h of hosts) {
      const key = `${h.hostPort}|${h.priority}|${h.weight}|${h.tls ? this.config.socketMatches.findIndex((t) => t.tls === h.tls) : -2}`;
      const existing = this.byKey.get(key);
      const host = existing ?? h;
      if (!existing) this.byKey.set(key, h);
      host.edsHealthy = h.edsHealthy;
      keep.add(host);
      all.push(host);
    }
    // Kept for the cluster's life: an exact-size copy (a list grown by push holds room for 17 hosts).
    const next = all.slice();
    for (const [key, host] of this.byKey) {
      if (!keep.has(host)) { this.byKey.delete(key); host.closePools(); }
    }
    this.hostSet = new HostSet(next, this.lbPolicy(), this.config.localityLb, this.config.hashLb);
    this.outlier?.setHosts(next);
    this.stats.membershipTotal.set(next.length);
    this.updateHealthyGauge();
  }

  /** membership_healthy counts hosts neither EDS-unhealthy nor ejected. */
  private updateHealthyGauge(): void {
    let n = 0;
    for (const h of this.hostSet.hosts) if (h.healthy) n++;
    this.stats.membershipHealthy.set(n);
  }

  // ---- what the router calls (circuit breakers, outlier detection) ----

  /**
   * max_requests: call before dispatching each attempt. False means the breaker is
   * open (upstream_rq_pending_overflow counted): answer 503, flag UO, `x-envoy-overloaded: true`.
   * True must be paired with one releaseRequest() when the attempt ends, however it ends.
   */
  tryAcquireRequest(): boolean {
    const r = this.breakers.requests;
    if (r.count >= r.max) { this.stats.rqPendingOverflow.value++; return false; }
    r.inc();
    return true;
  }

  /** Gauges of state all threads share (circuit breakers, active ejections), published by the main thread before a scrape. */
  refreshSharedGauges(): void {
    this.breakers.refreshGauges();
    this.outlier?.sync();
    this.outlier?.publishActive();
  }

  releaseRequest(): void {
    this.breakers.requests.dec();
  }

  /**
   * max_retries: call before scheduling a retry. False means the breaker is open
   * (upstream_rq_retry_overflow counted): do not retry, answer with what the attempt got.
   * True must be paired with one releaseRetry() when the retry attempt ends.
   */
  tryAcquireRetry(): boolean {
    const r = this.breakers.retries;
    if (r.count >= r.max) { this.stats.rqRetryOverflow.value++; return false; }
    r.inc();
    return true;
  }

  releaseRetry(): void {
    this.breakers.retries.dec();
  }

  /**
   * Outlier detection input, once per attempt: the response status when the head
   * arrives, else UpstreamResult.ConnectFailed / Reset / Timeout. A no-op without outlier_detection.
   */
  recordResult(host: Host, result: UpstreamResultCode): void {
    if (this.outlier !== undefined) this.outlier.record(host, result);
  }

  /** STRICT_DNS: every address of every name is a host. LOGICAL_DNS: the first address only. */
  private async resolve(): Promise<void> {
    const family = this.config.dnsFamily === 'V4_ONLY' ? 4 : this.config.dnsFamily === 'V6_ONLY' ? 6 : 0;
    const hosts: Host[] = [];
    for (const e of this.config.endpoints) {
      let addresses: string[];
      if (isIP(e.address.address)) addresses = [e.address.address];
      else {
        try {
          const answers = await lookup(e.address.address, { all: true, family, order: this.config.dnsFamily === 'V4_PREFERRED' ? 'ipv4first' : 'verbatim' });
          addresses = answers.map((a) => a.address);
          if (this.config.type === 'LOGICAL_DNS') addresses = addresses.slice(0, 1);
        } catch (err) {
          this.stats.dnsFailure.inc();
          log.debug(`cluster ${this.config.name}: cannot resolve ${e.address.address}: ${(err as Error).message}`);
          // Keep the last good answer for this name (Envoy keeps hosts on resolution failure).
          addresses = [...this.byKey.values()].filter((h) => h.hostname === (e.hostname || e.address.address)).map((h) => h.address);
        }
      }
      for (const a of addresses) {
        hosts.push(this.hostFor(e, a, e.hostname || e.address.address));
      }
    }
    if (this.closed) return;
    this.setHosts(hosts);
    this.refreshTimer = setTimeout(() => void this.resolve(), this.config.dnsRefreshMs).unref();
  }

  pick(ctx: PickContext | undefined): Host | undefined {
    if (this.config.type === 'ORIGINAL_DST') return this.originalDstHost(ctx);
    // Other threads' ejections and un-ejections (--concurrency N) before the balancer looks at health.
    if (this.outlier !== undefined) this.outlier.sync();
    return this.hostSet.pick(ctx?.exclude, ctx?.hash, ctx?.attempt ?? 0);
  }

  private originalDstHost(ctx: PickContext | undefined): Host | undefined {
    let address: string | undefined, port = 0;
    const override = ctx?.filterState ? parseIpPort(filterStateString(ctx.filterState, ORIGINAL_DST_ADDRESS_KEY) ?? '') : undefined;
    if (override) {
      address = override.address;
      port = override.port;
    } else if (this.config.useHttpHeader && ctx?.originalDstHeader) {
      const hp = parseHostPort(ctx.originalDstHeader);
      if (hp) { address = hp.address; port = hp.port; }
    } else if (ctx?.originalDst) {
      address = ctx.originalDst.address;
      port = ctx.originalDst.port;
    }
    if (!address) return undefined;
    if (this.config.upstreamPortOverride) port = this.config.upstreamPortOverride;
    const key = `${address}|${port}`;
    let host = this.byKey.get(key);
    if (!host) {
      const m = socketMatchFor(this.config, undefined);
      if (this.config.socketMatches.length) this.stats.matchCount(m.name).inc();
      host = new Host(address, port, { tls: m.tls });
      this.byKey.set(key, host);
      this.hostSet = new HostSet([...this.byKey.values()], 'ROUND_ROBIN');
      this.outlier?.setHosts(this.hostSet.hosts);
      this.stats.membershipTotal.set(this.byKey.size);
    }
    host.lastUsed = Date.now();
    return host;
  }

  private cleanupOriginalDst(): void {
    const cutoff = Date.now() - this.config.originalDstCleanupMs;
    for (const [key, host] of this.byKey) {
      if (host.lastUsed < cutoff && host.activeRequests === 0) { this.byKey.delete(key); host.closePools(); }
    }
    this.hostSet = new HostSet([...this.byKey.values()], 'ROUND_ROBIN');
    this.outlier?.setHosts(this.hostSet.hosts);
    this.stats.membershipTotal.set(this.byKey.size);
  }

  /**
   * The HTTP pool for a host: HTTP/1.1 or HTTP/2 (TLS with ALPN h2, or h2c by prior knowledge).
   * `alpn` (Istio's ALPN override, TLS clusters only) selects a pool of its own, as Envoy keys
   * connection pools by transport socket options.
   */
  httpPool(host: Host, http2: boolean, alpn?: readonly string[]): UpstreamDispatcher {
    const override = alpn && alpn.length && host.tls ? alpn : undefined;
    const kind = poolKind(http2, override);
    let pools = host.pools;
    const existing = pools?.get(kind) as UpstreamDispatcher | undefined;
    if (existing) return existing;
    if (!pools) pools = host.pools = new Map();
    const opts = this.poolOptions(host, override);
    // HTTP/2 to internal listener endpoints is refused at config time (cluster-config.ts).
    const pool = http2 && !host.internal ? new H2Pool({ ...opts, maxConcurrentStreams: this.config.maxConcurrentStreams }) : new H1Pool(opts);
    pools.set(kind, pool);
    return pool;
  }

  private poolOptions(host: Host, alpnOverride?: readonly string[]): H1PoolOptions {
    const cfg = this.config;
    const stats = this.stats;
    return {
      // Pooled HTTP connections carry the endpoint's passthrough metadata only; per-request filter state would split the pool.
      connect: host.internal ? () => connectInternalHost(this, host, undefined) : host.pipe !== undefined ? connectPipe(host.pipe) : undefined,
      address: host.address,
      port: host.port,
      localAddress: cfg.sourceAddress,
      tls: host.tls,
      alpnOverride,
      sslStats: stats.ssl,
      connectTimeoutMs: cfg.connectTimeoutMs,
      idleTimeoutMs: cfg.idleTimeoutMs,
      maxConnections: cfg.perHostMaxConnections,
      maxRequestsPerConnection: cfg.maxRequestsPerConnection,
      breakers: this.breakers,
      stats,
      onConnect: () => { stats.cxTotal.value++; stats.cxActive.value++; host.cxTotal++; host.cxActive++; },
      onDisconnect: () => { stats.cxActive.value--; host.cxActive--; },
      onConnectFail: () => { stats.cxConnectFail.value++; host.cxConnectFail++; },
    };
  }

  /** EDS: new endpoints. Hosts that stay keep their pools, health and outlier state. */
  setLoadAssignment(endpoints: readonly EndpointConfig[]): void {
    if (this.closed) return;
    this.setHosts(endpoints.map((e) => this.hostFor(e, e.address.address, e.hostname)));
    this.warm = true;
    this.markReady?.();
    this.markReady = undefined;
  }

  /**
   * The cluster is gone for good (removed, not replaced by a new version of itself, which shares
   * these names): its `cluster.<name>.*` stats go with it, as in Envoy.
   */
  releaseStats(): void {
    // (Circuit breakers and outlier detection made theirs through the same scope.)
    this.stats.release();
  }

  close(): void {
    this.closed = true;
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.outlier?.stop();
    this.breakers.detach();
    for (const h of this.byKey.values()) h.closePools();
  }
}



/** What the router dispatches an upstream HTTP request to. */
export interface UpstreamDispatcher {
  dispatch(req: UpstreamRequest, handler: Dispatcher.DispatchHandler): boolean;
  close(): void;
}

function parseHostPort(v: string): { address: string; port: number } | undefined {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(v.trim());
  if (!m || !isIP(m[1])) return undefined;
  return { address: m[1], port: Number(m[2]) };
}

export { UpstreamResult } from './outlier.ts';
export { isOverflow, UPSTREAM_OVERFLOW } from './h1-pool.ts';

/** A pipe endpoint's connector for the HTTP pools: a unix domain socket, not TCP. */
function connectPipe(path: string): () => Socket {
  return () => netConnect({ path });
}
