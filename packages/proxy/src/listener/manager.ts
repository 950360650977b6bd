/**
 * Every listener of the proxy by name, static (bootstrap) and dynamic (LDS). An LDS update of
 * a listener on the same address keeps its socket and swaps the config (old connections drain);
 * a changed address or a removal stops the old socket and drains its connections.
 */
import { ActiveListener } from './active.ts';
import type { ListenerConfig } from './config.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { StatsStore } from '../stats/store.ts';
import type { DrainStrategy } from '../core/drain.ts';

export class ListenerManager {
  private readonly byName = new Map<string, ActiveListener>();
  private readonly byAddress = new Map<string, ActiveListener>();
  private readonly clusters: ClusterManager;
  private readonly store: StatsStore;
  private readonly reusePort: boolean;
  /** Sockets are bound only once the server starts (Envoy's init manager), then on every add. */
  private started = false;

  constructor(clusters: ClusterManager, store: StatsStore, reusePort: boolean) {
    this.clusters = clusters;
    this.store = store;
    this.reusePort = reusePort;
  }

  /** Finds the listener for an original destination (use_original_dst hand-off). */
  private readonly redirect = (address: string, port: number): ActiveListener | undefined =>
    this.byAddress.get(`${address}:${port}`) ?? this.byAddress.get(`0.0.0.0:${port}`) ?? this.byAddress.get(`:::${port}`);

  get(name: string): ActiveListener | undefined {
    return this.byName.get(name);
  }

  all(): ActiveListener[] {
    return [...this.byName.values()];
  }

  get size(): number {
    return this.byName.size;
  }

  /** Adds a listener or updates the one of that name; binds it if the manager has started. */
  async addOrUpdate(config: ListenerConfig): Promise<void> {
    const old = this.byName.get(config.name);
    if (old && sameAddress(old.config, config)) {
      old.update(config);
      this.publish();
      return;
    }
    const l = new ActiveListener(config, this.clusters, this.store, this.redirect);
    if (old) this.removeListener(old);
    this.byName.set(config.name, l);
    this.byAddress.set(addressKey(config), l);
    this.publish();
    if (this.started && (config.bindToPort || config.internal)) await l.listen(this.reusePort);
  }

  remove(name: string): void {
    const l = this.byName.get(name);
    if (l) this.removeListener(l);
    this.publish();
  }

  private removeListener(l: ActiveListener): void {
    this.byName.delete(l.config.name);
    const key = addressKey(l.config);
    if (this.byAddress.get(key) === l) this.byAddress.delete(key);
    l.drain();
  }

  /** Binds every listener added so far; later additions bind as they come. */
  async start(): Promise<void> {
    this.started = true;
    for (const l of this.byName.values()) if (l.config.bindToPort || l.config.internal) await l.listen(this.reusePort);
  }

  drainAll(inboundOnly: boolean): void {
    for (const l of this.selected(inboundOnly)) l.drain();
  }

  /** Close every listening socket: new connections are refused; open ones carry on. */
  stopAccepting(): void {
    for (const l of this.byName.values()) l.stopAccepting();
  }

  /** Start the drain managers: HTTP connections are asked to go away as `strategy` says. */
  startDrain(inboundOnly: boolean, strategy: DrainStrategy, ms: number): void {
    for (const l of this.selected(inboundOnly)) l.drainManager.start(strategy, ms);
  }

  /** Idle HTTP/1 connections close and HTTP/2 sessions get GOAWAY as their drain managers decide. */
  drainTick(): void {
    for (const l of this.byName.values()) l.drainTick();
  }

  private selected(inboundOnly: boolean): ActiveListener[] {
    const all = [...this.byName.values()];
    return inboundOnly ? all.filter((l) => (l.config.source.traffic_direction ?? '') === 'INBOUND') : all;
  }

  closeAll(): void {
    for (const l of this.byName.values()) l.close();
  }

  private publish(): void {
    this.store.gauge('listener_manager.total_listeners_active').set(this.byName.size);
  }
}

function addressKey(c: ListenerConfig): string {
  return `${c.address.address}:${c.address.port}`;
}

function sameAddress(a: ListenerConfig, b: ListenerConfig): boolean {
  return addressKey(a) === addressKey(b) && a.bindToPort === b.bindToPort;
}
