/**
 * LDS and RDS behind the ADS stream, with Envoy's rules: removals first (a new listener may take
 * the address of one removed in the same update); a listener on an address another listener holds
 * is refused ("has duplicate address"); a listener that cannot bind is refused before the ACK and
 * the old one keeps serving; a listener waits (warming) for its RDS routes, or for its route's
 * initial_fetch_timeout, and then binds or updates in place.
 */
import type { ListenerConfig } from '../listener/config.ts';
import type { ListenerManager } from '../listener/manager.ts';
import { occupiedAddress } from '../listener/bind-check.ts';
import { rdsRoute } from '../http/rds.ts';
import { logger } from '../core/log.ts';
import { TYPE_URL } from './discovery.ts';
import type { XdsRejection, XdsUpdate } from './types.ts';
import { track, type ErrorLog, type TrackedResource } from './state.ts';
import type { InitialFetchTimers } from './fetch-timers.ts';
import { adsSecretNames, compileOrWait, contentHash, ecdsNames, rdsSubscriptions, type RdsSubscription } from './resource-refs.ts';
import { NameUnion } from './name-union.ts';

const log = logger('config');
/** Envoy logs listener adds under its upstream logger (lds: add/update listener ...). */
const upstreamLog = logger('upstream');

type Json = Record<string, unknown>;

/** A listener waiting for its RDS routes, or (config undefined) for an ECDS extension config. */
export interface WarmingListener {
  readonly tracked: TrackedResource;
  config: ListenerConfig | undefined;
  readonly routes: readonly RdsSubscription[];
}

export interface ListenerDeps {
  readonly listeners: ListenerManager;
  readonly staticListeners: ReadonlySet<string>;
  readonly errors: ErrorLog;
  /** SDS names (config source `ads`) by owner; this keeps the `listener/<name>` entries. */
  readonly adsSecrets: NameUnion;
  readonly timers: InitialFetchTimers;
  /** Counts one event under its Envoy stat name (RDS update_*). */
  count(name: string): void;
  /** Whether a listener can bind before its update is ACKed (undefined: no check, e.g. on workers). */
  bindCheck(config: ListenerConfig): Promise<void> | undefined;
}

const LDS = TYPE_URL.listener;

export class DynamicListeners {
  readonly active = new Map<string, TrackedResource>();
  readonly warming = new Map<string, WarmingListener>();
  /** RDS subscriptions of each listener (active or warming). */
  private readonly routes = new Map<string, readonly RdsSubscription[]>();
  /** The RDS names of every listener (the RDS interest). */
  readonly routeNames = new NameUnion();
  /** The ECDS names each listener's filters take their config from (the ECDS interest). */
  readonly extensionNames = new NameUnion();
  private readonly deps: ListenerDeps;

  constructor(deps: ListenerDeps) {
    this.deps = deps;
  }

  async applyListeners(u: XdsUpdate, out: XdsRejection[]): Promise<void> {
    const present = new Set([...u.resources.map((r) => r.name), ...(u.refused ?? []).map((x) => x.name)]);
    const removed = u.full ? [...this.active.keys(), ...this.warming.keys()].filter((n) => !present.has(n)) : u.removed;
    for (const name of removed) this.remove(name);
    const owners = this.addressOwners();
    const staged: Array<{ name: string; json: Json; version: string; hash: string; config: ListenerConfig | undefined }> = [];
    for (const r of u.resources) {
      if (this.deps.staticListeners.has(r.name)) { this.deps.errors.reject(LDS, r.name, r.json, `listener '${r.name}' is static and cannot be updated by LDS`, out); continue; }
      const hash = contentHash(r.json);
      if ((this.warming.get(r.name)?.tracked ?? this.active.get(r.name))?.hash === hash) { this.deps.errors.clear(LDS, r.name); continue; }
      let config: ListenerConfig | undefined;
      try {
        config = compileOrWait(r.json);
      } catch (e) {
        this.deps.errors.reject(LDS, r.name, r.json, (e as Error).message, out);
        continue;
      }
      const address = config && occupiedAddress(config);
      if (address !== undefined) {
        const owner = owners.get(address);
        if (owner !== undefined && owner !== r.name) {
          this.deps.errors.reject(LDS, r.name, r.json, `error adding listener: '${r.name}' has duplicate address '${address}' as existing listener '${owner}'`, out);
          continue;
        }
        owners.set(address, r.name);
      }
      staged.push({ name: r.name, json: r.json, version: r.version || u.version, hash, config });
    }
    // Envoy binds a new listener's socket when it creates it, before the ACK: same here.
    const bindErrors = await Promise.all(staged.map((s) => (s.config ? this.deps.bindCheck(s.config)?.then(() => undefined, (e: Error) => e.message) : undefined)));
    for (const [i, s] of staged.entries()) {
      const bindError = bindErrors[i];
      if (bindError !== undefined) { this.deps.errors.reject(LDS, s.name, s.json, bindError, out); continue; }
      this.deps.errors.clear(LDS, s.name);
      this.track(s.name, s.json);
      this.warming.set(s.name, { tracked: { version: s.version, lastUpdated: Date.now(), json: s.json, hash: s.hash }, config: s.config, routes: this.routes.get(s.name) ?? [] });
    }
    await this.promote(out);
  }

  async applyRoutes(u: XdsUpdate, out: XdsRejection[]): Promise<void> {
    for (const r of u.resources) {
      const route = rdsRoute(r.name);
      const scopes = route.statScopes();
      for (const sc of scopes) this.deps.count(`${sc}update_attempt`);
      this.deps.timers.done(`rds/${r.name}`);
      try {
        route.update(r.json, r.version || u.version, track(r, r.version || u.version, '', true));
        this.deps.errors.clear(u.typeUrl, r.name);
        for (const sc of scopes) { this.deps.count(`${sc}update_success`); this.deps.count(`${sc}config_reload`); }
      } catch (e) {
        this.deps.errors.reject(u.typeUrl, r.name, r.json, (e as Error).message, out);
        for (const sc of scopes) this.deps.count(`${sc}update_rejected`);
      }
    }
    for (const name of u.removed) rdsRoute(name).remove();
    await this.promote(out);
  }

  /** A route's initial fetch timed out: its listeners stop waiting and serve without it (404 NR). */
  routeFetchTimedOut(name: string, count: ((stat: string) => void) | undefined): void {
    for (const sc of rdsRoute(name).statScopes()) count?.(`${sc}init_fetch_timeout`);
    void this.promote();
  }

  /** ECDS configs changed: active listeners using them are rebuilt and updated in place (connections drain). */
  async rebuildUsing(changed: ReadonlySet<string>): Promise<void> {
    for (const [name, tracked] of this.active) {
      if (this.warming.has(name) || !this.extensionNames.of(name).some((n) => changed.has(n))) continue;
      this.warming.set(name, { tracked, config: undefined, routes: this.routes.get(name) ?? [] });
    }
    await this.promote();
  }

  /** Warming listeners whose routes have all arrived (or timed out) go live: bind, or update in place. */
  async promote(out?: XdsRejection[]): Promise<void> {
    const binds: Array<Promise<void>> = [];
    for (const [name, w] of this.warming) {
      if (!w.config) {
        try {
          w.config = compileOrWait(w.tracked.json);
        } catch (e) {
          // Accepted earlier, refused now that its extension config is known: drop it, say why.
          this.warming.delete(name);
          this.deps.errors.record(LDS, name, w.tracked.json, (e as Error).message);
          continue;
        }
        if (!w.config) continue;
      }
      if (this.waitsForRoutes(w)) continue;
      this.warming.delete(name);
      const previous = this.active.get(name);
      this.active.set(name, w.tracked);
      const config = w.config;
      binds.push(this.deps.listeners.addOrUpdate(config).then(
        () => upstreamLog.info(`lds: add/update listener '${name}' ${config.internal ? '(internal)' : config.bindToPort ? `on ${config.address.address}:${config.address.port}` : `for ${config.address.address}:${config.address.port} (bind_to_port false)`}`),
        (e: Error) => this.bindFailed(name, w.tracked, previous, e.message, out)));
    }
    await Promise.all(binds);
  }

  remove(name: string): void {
    if (this.deps.staticListeners.has(name)) return;
    this.warming.delete(name);
    this.untrack(name);
    if (this.active.delete(name)) this.deps.listeners.remove(name);
  }

  /** True while a route is neither delivered nor timed out; starts each pending route's timer. */
  private waitsForRoutes(w: WarmingListener): boolean {
    let waiting = false;
    for (const s of w.routes) {
      if (rdsRoute(s.name).ready || this.deps.timers.hasExpired(`rds/${s.name}`)) continue;
      this.deps.timers.start(`rds/${s.name}`, s.fetchTimeoutMs);
      waiting = true;
    }
    return waiting;
  }

  /** The new socket did not bind: the old listener (if any) keeps serving, with its own subscriptions. */
  private bindFailed(name: string, tracked: TrackedResource, previous: TrackedResource | undefined, message: string, out: XdsRejection[] | undefined): void {
    log.error(`listener ${name}: ${message}`);
    if (this.active.get(name) === tracked) {
      if (previous) { this.active.set(name, previous); this.track(name, previous.json); }
      else { this.active.delete(name); this.untrack(name); }
    }
    this.deps.errors.reject(LDS, name, tracked.json, message, out ?? []);
  }

  /** Addresses held by listeners now (static, active, warming), by listener name. */
  private addressOwners(): Map<string, string> {
    const owners = new Map<string, string>();
    for (const l of this.deps.listeners.all()) {
      const a = occupiedAddress(l.config);
      if (a !== undefined) owners.set(a, l.config.name);
    }
    for (const [name, w] of this.warming) {
      const a = w.config && occupiedAddress(w.config);
      if (a !== undefined) owners.set(a, name);
    }
    return owners;
  }

  private track(name: string, json: Json): void {
    const routes = rdsSubscriptions(json);
    this.routes.set(name, routes);
    this.routeNames.set(name, routes.map((r) => r.name));
    this.extensionNames.set(name, ecdsNames(json));
    this.deps.adsSecrets.set(`listener/${name}`, adsSecretNames(json));
  }

  private untrack(name: string): void {
    this.routes.delete(name);
    this.routeNames.delete(name);
    this.extensionNames.delete(name);
    this.deps.adsSecrets.delete(`listener/${name}`);
  }
}
