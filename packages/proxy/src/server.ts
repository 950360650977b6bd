import type { Server } from 'node:http';
import type { BootstrapConfig } from './config/bootstrap.ts';
import { StatsStore } from './stats/store.ts';
import { ClusterManager } from './upstream/manager.ts';
import { ActiveListener } from './listener/active.ts';
import { startAdmin } from './admin/server.ts';
import { log } from './core/log.ts';
import { setLocalNode } from './core/node.ts';

export interface ServerOptions {
  readonly concurrency: number;
  readonly drainTimeS: number;
  readonly configPath: string;
  readonly configYaml: string;
  readonly logLevel: string;
  /** Listen with SO_REUSEPORT so several workers share each port. */
  readonly reusePort: boolean;
  /** Start the admin server (only the main thread does). */
  readonly admin: boolean;
}

export type ServerState = 'PRE_INITIALIZING' | 'INITIALIZING' | 'LIVE' | 'DRAINING';

export const VERSION = '0.1.0';

/** A running proxy: clusters, listeners and admin built from one bootstrap. */
export class ProxyServer {
  readonly bootstrap: BootstrapConfig;
  readonly options: ServerOptions;
  readonly stats = new StatsStore();
  readonly clusters: ClusterManager;
  readonly listeners: ActiveListener[] = [];
  readonly startedAt = Date.now();
  loadedAt = Date.now();
  state: ServerState = 'PRE_INITIALIZING';
  healthFailed = false;
  /** Stats for admin: this thread's store, or all workers' merged (set by startWorkers). */
  collectStats: () => Promise<StatsStore> = () => Promise.resolve(this.stats);
  private admin: Server | undefined;

  constructor(bootstrap: BootstrapConfig, options: ServerOptions) {
    this.bootstrap = bootstrap;
    this.options = options;
    this.clusters = new ClusterManager(this.stats);
    setLocalNode(bootstrap.node);
  }

  async start(): Promise<void> {
    this.state = 'INITIALIZING';
    for (const c of this.bootstrap.clusters) this.clusters.addOrUpdate(c);
    // Envoy's init manager: clusters warm (first DNS answer) before listeners open.
    await this.clusters.warm(15_000);
    const byAddress = new Map<string, ActiveListener>();
    const redirect = (address: string, port: number): ActiveListener | undefined =>
      byAddress.get(`${address}:${port}`) ?? byAddress.get(`0.0.0.0:${port}`) ?? byAddress.get(`:::${port}`);
    for (const cfg of this.bootstrap.listeners) {
      const l = new ActiveListener(cfg, this.clusters, this.stats, redirect);
      this.listeners.push(l);
      byAddress.set(`${cfg.address.address}:${cfg.address.port}`, l);
    }
    const admin = this.bootstrap.admin;
    if (admin && this.options.admin) this.admin = await startAdmin(this, admin.address.address, admin.address.port);
    for (const l of this.listeners) if (l.config.bindToPort) await l.listen(this.options.reusePort);
    this.stats.gauge('listener_manager.total_listeners_active').set(this.listeners.length);
    this.stats.gauge('cluster_manager.active_clusters').set(this.bootstrap.clusters.length);
    this.state = 'LIVE';
    log.info(`skua-proxy ${VERSION} live: ${this.listeners.length} listeners, ${this.bootstrap.clusters.length} clusters`);
  }

  get adminPort(): number {
    const a = this.admin?.address();
    return a && typeof a === 'object' ? a.port : 0;
  }

  listenerStatuses(): Array<{ name: string; address: string; port: number }> {
    return this.listeners.map((l) => ({ name: l.config.name, address: l.config.address.address, port: l.boundPort }));
  }

  /** /drain_listeners: stop accepting; HTTP connections get GOAWAY / `connection: close`. */
  drainListeners(inboundOnly: boolean, graceful: boolean): void {
    this.state = 'DRAINING';
    const drain = (): void => {
      for (const l of this.listeners) {
        if (inboundOnly && (l.config.source.traffic_direction ?? '') !== 'INBOUND') continue;
        l.drain();
      }
    };
    // Envoy's graceful drain keeps accepting for the drain time while discouraging reuse.
    if (graceful) setTimeout(drain, this.options.drainTimeS * 1000).unref();
    else drain();
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
        mode: 'Serve',
      },
      node: this.bootstrap.source.node ?? {},
      uptime_current_epoch: up,
      uptime_all_epochs: up,
    };
  }

  async shutdown(code: number): Promise<never> {
    for (const l of this.listeners) l.close();
    this.clusters.closeAll();
    this.admin?.close();
    process.exit(code);
  }
}
