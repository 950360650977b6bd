import type { Server } from 'node:http';
import type { BootstrapConfig } from './config/bootstrap.ts';
import { StatsStore } from './stats/store.ts';
import { ClusterManager } from './upstream/manager.ts';
import { ListenerManager } from './listener/manager.ts';
import type { DynamicConfig, ExtraTypeSink } from './xds/dynamic-config.ts';
import type { AdsClient } from './xds/ads-client.ts';
import type { XdsUpdate } from './xds/types.ts';
import { startAdmin } from './admin/server.ts';
import type { HostCounts } from './admin/clusters.ts';
import { log } from './core/log.ts';
import { setLocalNode } from './core/node.ts';
import { setInternalBufferSize } from './listener/internal.ts';
import { drainSignals, type DrainStrategy } from './core/drain.ts';
import { OverloadManager, overloadState } from './core/overload.ts';

export interface ServerOptions {
  readonly concurrency: number;
  readonly drainTimeS: number;
  /** --drain-strategy: how HTTP connections are asked to go away while draining. */
  readonly drainStrategy: DrainStrategy;
  readonly configPath: string;
  readonly configYaml: string;
  readonly logLevel: string;
  /** Listen with SO_REUSEPORT so several workers share each port. */
  readonly reusePort: boolean;
  /** Start the admin server (only the main thread does). */
  readonly admin: boolean;
  /** A --concurrency worker: apply the xDS updates the main thread forwards instead of opening ADS. */
  readonly xdsFollower?: boolean;
  /** Extra gRPC metadata for the xDS stream (the Istio agent's bearer token and ClusterID). */
  readonly xdsHeaders?: () => Record<string, string>;
  /** Extra xDS types the agent consumes itself (NDS for the DNS proxy), by type URL. */
  readonly xdsSinks?: ReadonlyMap<string, ExtraTypeSink>;
  /** Unknown protobuf fields in xDS resources (--reject-/--ignore-unknown-dynamic-fields); default 'warn'. */
  readonly unknownDynamicFields?: 'warn' | 'reject' | 'ignore';
  /** --allow-unknown-static-fields (the bootstrap was checked before the server was made). */
  readonly allowUnknownStaticFields?: boolean;
}


/** One /drain_listeners request, as the worker threads receive it. */
export interface ListenerDrain {
  readonly inboundOnly: boolean;
  readonly graceful: boolean;
  readonly ms: number;
  readonly strategy: DrainStrategy;
}

export type ServerState = 'PRE_INITIALIZING' | 'INITIALIZING' | 'LIVE' | 'DRAINING';

export const VERSION = '0.1.0';

/** A running proxy: clusters, listeners and admin built from one bootstrap. */
export class ProxyServer {
  readonly bootstrap: BootstrapConfig;
  readonly options: ServerOptions;
  readonly stats = new StatsStore();
  readonly clusters: ClusterManager;
  readonly listeners: ListenerManager;
  /** The xDS-driven part of the config (undefined for a static bootstrap). */
  dynamic: DynamicConfig | undefined;
  ads: AdsClient | undefined;
  readonly startedAt = Date.now();
  loadedAt = Date.now();
  state: ServerState = 'PRE_INITIALIZING';
  readonly overload: OverloadManager;
  /** Set by startWorkers: asks every worker thread to drain and resolves when all have exited. */
  drainWorkers: ((ms: number) => Promise<void>) | undefined;
  /** Set by startWorkers: hands /drain_listeners (and the agent's drain) to every worker thread. */
  drainWorkerListeners: ((drain: ListenerDrain) => void) | undefined;
  private exiting: Promise<never> | undefined;
  /** Stats for admin: this thread's store, or all workers' merged (set by startWorkers). */
  collectStats: () => Promise<StatsStore> = () => Promise.resolve(this.stats);
  /** The worker threads' per-host counters for /clusters (set by startWorkers; none with one thread). */
  collectHostCounts: () => Promise<HostCounts | undefined> = () => Promise.resolve(undefined);
  private admin: Server | undefined;
  /**
   * Set by startWorkers: hands each xDS update (as the main thread applied it) to the worker threads;
   * resolves once every worker applied it (the ACK waits: every thread serves what was ACKed).
   */
  onXdsUpdate: ((update: XdsUpdate) => Promise<void>) | undefined;
  /** Set by startWorkers: a subscription's initial fetch timed out on the main thread. */
  onFetchTimeout: ((key: string) => void) | undefined;

  constructor(bootstrap: BootstrapConfig, options: ServerOptions) {
    this.bootstrap = bootstrap;
    this.options = options;
    // Before any stat exists: stats_config decides which are kept.
    this.stats.matcher = bootstrap.stats.matcher;
    this.stats.deferredClusterStats = bootstrap.stats.deferredClusterStats;
    this.clusters = new ClusterManager(this.stats);
    this.listeners = new ListenerManager(this.clusters, this.stats, options.reusePort);
    this.overload = new OverloadManager(bootstrap.overload, this.stats);
    setLocalNode(bootstrap.node);
    this.stats.counter('server.static_unknown_fields').inc(bootstrap.unknownFields.length);
    this.stats.counter('server.dynamic_unknown_fields');
    if (bootstrap.extensions.internalListener) setInternalBufferSize(bootstrap.extensions.internalListener.bufferBytes);
  }

  /** POST /healthcheck/fail and /healthcheck/ok: a failed health check also makes responses close their connection. */
  get healthFailed(): boolean { return drainSignals.healthCheckFailed; }
  set healthFailed(failed: boolean) { drainSignals.healthCheckFailed = failed; }

  async start(): Promise<void> {
    this.state = 'INITIALIZING';
    this.overload.start();
    for (const c of this.bootstrap.clusters) this.clusters.addOrUpdate(c);
    // Envoy's init manager: clusters warm (first DNS answer) before listeners open.
    await this.clusters.warm(15_000);
    for (const cfg of this.bootstrap.listeners) await this.listeners.addOrUpdate(cfg);
    const admin = this.bootstrap.admin;
    if (admin && this.options.admin) this.admin = await startAdmin(this, admin.address.address, admin.address.port);
    // The xDS client side (and protobufjs) loads only for a bootstrap with dynamic_resources (issue 13).
    if (this.bootstrap.dynamic) await (await import('./server-xds.ts')).startXds(this);
    await this.listeners.start();
    this.stats.gauge('cluster_manager.active_clusters').set(this.clusters.size);
    this.state = 'LIVE';
    this.logStartup();
    log.info(`skua-proxy ${VERSION} live: ${this.listeners.size} listeners, ${this.clusters.size} clusters`);
  }

  /** Start-up lines: where admin and each listener are (xDS listeners are named as they arrive, by dynamic-config). */
  private logStartup(): void {
    const a = this.admin?.address();
    if (a && typeof a === 'object') log.info(`admin address: ${a.address}:${a.port}`);
    if (this.options.xdsFollower) return;
    for (const l of this.listeners.all()) {
      const c = l.config;
      log.info(`listener '${c.name}' ${c.internal ? 'internal' : c.bindToPort ? `on ${c.address.address}:${l.boundPort}` : `for ${c.address.address}:${c.address.port} (bind_to_port false)`}`);
    }
  }

  get adminPort(): number {
    const a = this.admin?.address();
    return a && typeof a === 'object' ? a.port : 0;
  }

  listenerStatuses(): Array<{ name: string; address: string; port: number }> {
    return this.listeners.all().map((l) => ({ name: l.config.name, address: l.config.address.address, port: l.boundPort }));
  }

  /**
   * /drain_listeners. Without `graceful`: stop accepting now, HTTP connections get GOAWAY /
   * `connection: close`. With it: the listeners keep accepting for the drain time while
   * connections are asked to go away (--drain-strategy), then stop.
   */
  drainListeners(inboundOnly: boolean, graceful: boolean, ms = this.options.drainTimeS * 1000, strategy = this.options.drainStrategy): void {
    this.state = 'DRAINING';
    // Worker threads hold listeners of their own (SO_REUSEPORT): they drain with the same settings.
    this.drainWorkerListeners?.({ inboundOnly, graceful, ms, strategy });
    if (!graceful) { this.listeners.drainAll(inboundOnly); return; }
    this.listeners.startDrain(inboundOnly, strategy, ms);
    const ticker = setInterval(() => this.listeners.drainTick(), drainTick(ms));
    ticker.unref();
    setTimeout(() => { clearInterval(ticker); this.listeners.drainAll(inboundOnly); }, ms).unref();
  }

  /**
   * SIGTERM: listeners stop accepting at once (new connections are refused) and every HTTP
   * connection is asked to go away now: idle HTTP/1 connections close, in-flight responses carry
   * `connection: close`, HTTP/2 sessions get GOAWAY. With the listeners closed nobody can come
   * back here, so spreading the requests out (--drain-strategy, used by /drain_listeners?graceful)
   * would only delay the exit. The process exits 0 once no downstream connection is left, at the
   * latest after --drain-time-s (whatever is left, e.g. TCP proxy connections, is then closed).
   */
  drainAndExit(ms = this.options.drainTimeS * 1000): Promise<never> {
    if (this.exiting) return this.exiting;
    this.state = 'DRAINING';
    log.info(`draining: ${overloadState.connections} downstream connections, at most ${ms / 1000} s`);
    this.listeners.drainAll(false);
    const workers = this.drainWorkers?.(ms) ?? Promise.resolve();
    const deadline = performance.now() + ms;
    this.exiting = (async (): Promise<never> => {
      // Connections leave as their responses finish; polled, so nothing is added to their close path.
      while (overloadState.connections > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      await Promise.race([workers, new Promise((r) => setTimeout(r, Math.max(0, deadline - performance.now())))]);
      if (overloadState.connections > 0) log.warn(`drain time over: closing ${overloadState.connections} downstream connections`);
      return this.shutdown(0);
    })();
    return this.exiting;
  }

  serverInfo(): Record<string, unknown> {
    const up = `${Math.round((Date.now() - this.startedAt) / 1000)}s`;
    return {
      version: `skua-proxy/${VERSION}/Node.js ${process.version}/RELEASE`,
      state: this.state === 'LIVE' ? 'LIVE' : this.state,
      hot_restart_version: 'disabled',
      command_line_options: {
        concurrency: this.options.concurrency,
        config_path: this.options.configPath,
        config_yaml: this.options.configYaml,
        log_level: this.options.logLevel,
        drain_time: `${this.options.drainTimeS}s`,
        drain_strategy: this.options.drainStrategy === 'immediate' ? 'Immediate' : 'Gradual',
        mode: 'Serve',
        allow_unknown_static_fields: this.options.allowUnknownStaticFields ?? false,
        reject_unknown_dynamic_fields: this.options.unknownDynamicFields === 'reject',
        ignore_unknown_dynamic_fields: this.options.unknownDynamicFields === 'ignore',
      },
      node: this.bootstrap.source.node ?? {},
      uptime_current_epoch: up,
      uptime_all_epochs: up,
    };
  }

  async shutdown(code: number): Promise<never> {
    this.close();
    process.exit(code);
  }

  /** Stops xDS, overload checks, listeners, upstream pools and admin without leaving the process (in-process tests). */
  close(): void {
    this.overload.stop();
    this.ads?.stop();
    this.dynamic?.fetchTimers.stop();
    this.listeners.closeAll();
    this.clusters.closeAll();
    this.admin?.close();
  }
}

/** How often a drain re-checks connections: a twentieth of the drain time, within 50 ms .. 1 s. */
function drainTick(ms: number): number {
  return Math.max(50, Math.min(1000, ms / 20));
}
