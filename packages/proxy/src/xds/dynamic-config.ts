/**
 * The config layer behind the ADS stream: turns accepted xDS resources into live clusters,
 * endpoints, listeners and route tables, with Envoy's warming (an EDS cluster waits for its
 * endpoints, a listener for its RDS routes) and init order (LDS is asked for once the
 * first CDS update has warmed), each subscription timed by its own initial_fetch_timeout.
 * A refused resource leaves the last good one serving and is remembered as error_state for
 * /config_dump. LDS/RDS live in dynamic-listeners.ts.
 */
import { Msg } from '../config/fields.ts';
import { compileCluster, readLoadAssignment, type EndpointConfig } from '../upstream/cluster-config.ts';
import type { Cluster } from '../upstream/cluster.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { ListenerConfig } from '../listener/config.ts';
import type { ListenerManager } from '../listener/manager.ts';
import { TYPE_URL } from './discovery.ts';
import type { XdsHandler, XdsInterest, XdsRejection, XdsResource, XdsUpdate } from './types.ts';
import { removeExtensionConfig, setExtensionConfig } from './ecds.ts';
import { adsSecretNames, edsFetchTimeoutMs, validateExtension } from './resource-refs.ts';
import { ErrorLog, resourceHash, track, type TrackedResource } from './state.ts';
import { InitialFetchTimers } from './fetch-timers.ts';
import { DynamicListeners, type WarmingListener } from './dynamic-listeners.ts';
import { assignmentOf, EdsIndex, endpointsOf } from './eds-index.ts';
import { TimeSlice } from '../core/time-slice.ts';
import { forwardedCluster } from './follower-updates.ts';
import { NameUnion } from './name-union.ts';

export type { ErrorState, TrackedResource } from './state.ts';

type Json = Record<string, unknown>;

/** Hooks for resource types owned elsewhere (SDS secrets, ECDS extension configs, NDS). */
export interface ExtraTypeSink {
  apply(name: string, json: Json, version: string): void;
  remove(name: string): void;
  /** Subscribe to the type as a wildcard (NDS); otherwise the names listeners/clusters refer to. */
  readonly wildcard?: boolean;
}

const NO_NAMES: ReadonlySet<string> = new Set();
const NO_ENDPOINTS: ReadonlyMap<string, readonly EndpointConfig[]> = new Map();

export interface ClusterChange { readonly rebuilt: readonly XdsResource[]; readonly removed: readonly string[] }
const NO_CHANGE: ClusterChange = { rebuilt: [], removed: [] };

/** An EDS resource as the main thread forwards it to --concurrency workers: already compiled. */
export interface CompiledAssignment extends XdsResource {
  readonly endpoints?: readonly EndpointConfig[];
}

export class DynamicConfig implements XdsHandler {
  readonly activeClusters = new Map<string, TrackedResource>();
  readonly warmingClusters = new Map<string, { tracked: TrackedResource; cluster: Cluster }>();
  /** EDS: which clusters use which assignment, and the assignments in use. */
  readonly eds = new EdsIndex();
  /** False on --concurrency workers: accepted cluster configs are not kept for /config_dump. */
  retainConfig = true;
  /**
   * What the last CDS update changed, for --concurrency workers (see takeClusterChange): the
   * resources rebuilt (as JSON text) and the names removed. Only recorded with workers to tell.
   */
  private lastClusterChange: ClusterChange = NO_CHANGE;
  /** Set by the server when workers follow this thread's updates. */
  recordClusterChanges = false;
  /** What the last EDS update stored, compiled, by name (what workers are sent); only with workers to tell. */
  lastEndpointsStored: ReadonlyMap<string, readonly EndpointConfig[]> = NO_ENDPOINTS;
  /** SDS secret names (config source `ads`) each listener / cluster names, by resource name. */
  private readonly adsSecrets = new NameUnion();
  readonly secrets = new Map<string, TrackedResource>();
  readonly extensions = new Map<string, TrackedResource>();
  /** Resources of sink-only types (NDS), by type. */
  readonly others = new Map<string, Map<string, TrackedResource>>();
  private readonly errorLog = new ErrorLog();
  readonly errors = this.errorLog.byType;
  /** initial_fetch_timeout per subscription (keys `cds`, `lds`, `rds/<name>`, `eds/<service>`). */
  readonly fetchTimers = new InitialFetchTimers();
  private readonly clusters: ClusterManager;
  private readonly staticClusters: ReadonlySet<string>;
  private readonly lds: DynamicListeners;
  private ldsFetchTimeoutMs = 0;
  private cdsInitDone = false;
  private ldsInitDone = false;
  private readonly sinks = new Map<string, ExtraTypeSink>();
  private initResolve!: () => void;
  /** Resolves when the first CDS and LDS updates (and their warming) are done: the server may go LIVE. */
  readonly initialized: Promise<void>;

  constructor(clusters: ClusterManager, listeners: ListenerManager, staticClusters: ReadonlySet<string>, staticListeners: ReadonlySet<string>) {
    this.clusters = clusters;
    this.staticClusters = staticClusters;
    // Static EDS clusters (bootstrap) subscribe too.
    for (const c of clusters.all()) this.eds.track(c);
    this.lds = new DynamicListeners({
      listeners, staticListeners, errors: this.errorLog, adsSecrets: this.adsSecrets, timers: this.fetchTimers,
      count: (name) => this.counters?.(name),
      bindCheck: (config) => this.bindCheck?.(config),
    });
    this.fetchTimers.onExpire = (key) => this.expireFetch(key);
    this.initialized = new Promise((r) => { this.initResolve = r; });
  }

  get activeListeners(): ReadonlyMap<string, TrackedResource> {
    return this.lds.active;
  }

  get warmingListeners(): ReadonlyMap<string, WarmingListener> {
    return this.lds.warming;
  }

  /** Route SDS secrets / ECDS configs to their owner. */
  setSink(typeUrl: string, sink: ExtraTypeSink): void {
    this.sinks.set(typeUrl, sink);
  }

  /** ADS has started: CDS's initial fetch is timed from now, LDS's from when it is asked for. */
  startInitialFetch(cdsTimeoutMs: number, ldsTimeoutMs: number): void {
    this.ldsFetchTimeoutMs = ldsTimeoutMs;
    if (!this.sawCds) this.fetchTimers.start('cds', cdsTimeoutMs);
  }

  /**
   * One subscription's initial fetch timed out (here, or on the main thread for a worker): stop
   * waiting for it. CDS / LDS init goes on, a listener serves without its routes (404 NR), a
   * cluster goes active without endpoints.
   */
  expireFetch(key: string): void {
    this.fetchTimers.expire(key);
    const slash = key.indexOf('/');
    const kind = slash < 0 ? key : key.slice(0, slash);
    const name = key.slice(slash + 1);
    // Counted where the timer ran (the main thread), not again on each worker that hears of it.
    const count = this.fetchTimers.enabled ? this.counters : undefined;
    if (kind === 'cds') { this.sawCds = true; count?.('cluster_manager.cds.init_fetch_timeout'); }
    else if (kind === 'lds') { this.sawLds = true; count?.('listener_manager.lds.init_fetch_timeout'); }
    else if (kind === 'eds') this.edsFetchTimedOut(name);
    else if (kind === 'rds') this.lds.routeFetchTimedOut(name, count);
    this.finishInit();
    this.onFetchTimeout?.(key);
    this.interestChanged?.();
  }

  /** Set by the server: forwards a timed-out fetch to --concurrency workers. */
  onFetchTimeout: ((key: string) => void) | undefined;
  /** Set by the server: the subscriptions may have changed outside a response (tell the ADS server). */
  interestChanged: (() => void) | undefined;
  /** Set by the main thread: can this listener bind? (rejects with Envoy's "cannot bind" message). */
  bindCheck: ((config: ListenerConfig) => Promise<void>) | undefined;

  get initDone(): boolean {
    return this.ldsInitDone;
  }

  interest(typeUrl: string): XdsInterest {
    switch (typeUrl) {
      case TYPE_URL.cluster: return { wildcard: true, names: NO_NAMES };
      case TYPE_URL.listener: return { wildcard: this.cdsInitDone, names: NO_NAMES };
      case TYPE_URL.endpoint: return { wildcard: false, names: this.eds.names, revision: this.eds.revision };
      case TYPE_URL.route: return { wildcard: false, names: this.lds.routeNames.names, revision: this.lds.routeNames.revision };
      case TYPE_URL.extension: return { wildcard: false, names: this.lds.extensionNames.names, revision: this.lds.extensionNames.revision };
      case TYPE_URL.secret: return { wildcard: false, names: this.adsSecrets.names, revision: this.adsSecrets.revision };
      default: return { wildcard: this.sinks.get(typeUrl)?.wildcard === true, names: NO_NAMES };
    }
  }

  async apply(u: XdsUpdate): Promise<readonly XdsRejection[]> {
    const rejections: XdsRejection[] = [];
    if (u.typeUrl === TYPE_URL.cluster) { this.sawCds = true; this.fetchTimers.done('cds'); }
    if (u.typeUrl === TYPE_URL.listener) { this.sawLds = true; this.fetchTimers.done('lds'); }
    switch (u.typeUrl) {
      case TYPE_URL.cluster: await this.applyClusters(u, rejections); break;
      case TYPE_URL.endpoint: await this.applyEndpoints(u, rejections); break;
      case TYPE_URL.listener: await this.lds.applyListeners(u, rejections); break;
      case TYPE_URL.route: await this.lds.applyRoutes(u, rejections); break;
      case TYPE_URL.secret: this.applyExtra(u, this.secrets, rejections); break;
      case TYPE_URL.extension: await this.applyExtensions(u, rejections); break;
      default: {
        if (!this.sinks.has(u.typeUrl)) { for (const r of u.resources) rejections.push({ name: r.name, message: `unsupported resource type ${u.typeUrl}` }); break; }
        let into = this.others.get(u.typeUrl);
        if (!into) { into = new Map(); this.others.set(u.typeUrl, into); }
        this.applyExtra(u, into, rejections);
      }
    }
    // Refused before they got here: shown as error_state; whatever was under the name stays.
    for (const x of u.refused ?? []) this.errorLog.reject(u.typeUrl, x.name, { name: x.name }, x.message, rejections);
    this.finishInit();
    return rejections;
  }

  private reject(typeUrl: string, r: XdsResource, message: string, out: XdsRejection[]): void {
    this.errorLog.reject(typeUrl, r.name, r.json, message, out);
  }

  private accepted(typeUrl: string, name: string): void {
    this.errorLog.clear(typeUrl, name);
  }

  // ---- CDS / EDS ----

  private async applyClusters(u: XdsUpdate, out: XdsRejection[]): Promise<void> {
    const seen = new Set<string>((u.refused ?? []).map((x) => x.name));
    const rebuilt: XdsResource[] = [];
    const slice = new TimeSlice();
    for (const r of u.resources) {
      if (slice.due) await slice.next();
      seen.add(r.name);
      if (this.staticClusters.has(r.name)) { this.reject(u.typeUrl, r, `cluster '${r.name}' is static and cannot be updated by CDS`, out); continue; }
      const hash = resourceHash(r);
      if ((this.warmingClusters.get(r.name)?.tracked ?? this.activeClusters.get(r.name))?.hash === hash) { this.accepted(u.typeUrl, r.name); continue; }
      let cluster: Cluster;
      try {
        cluster = this.clusters.build(compileCluster(new Msg(r.json, ''), false));
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      if (this.recordClusterChanges) rebuilt.push(forwardedCluster(r.name, r.version, r.json));
      this.adsSecrets.set(`cluster/${r.name}`, adsSecretNames(r.json));
      // (A --concurrency worker serves no config_dump: it keeps the hash, not the config.)
      const tracked = track(r, r.version || u.version, hash, this.retainConfig);
      // An update of a live cluster takes the endpoints it has (a removed one's went with it).
      const cla = cluster.config.type === 'EDS' ? this.eds.assignments.get(cluster.config.edsServiceName) : undefined;
      if (cla) cluster.setLoadAssignment(endpointsOf(cla));
      this.eds.track(cluster);
      this.dropWarming(r.name);
      if (cluster.warm) this.activateCluster(r.name, tracked, cluster);
      else {
        this.warmingClusters.set(r.name, { tracked, cluster });
        this.fetchTimers.start(`eds/${cluster.config.edsServiceName}`, edsFetchTimeoutMs(r.json));
      }
    }
    const removed = u.full ? [...this.activeClusters.keys(), ...this.warmingClusters.keys()].filter((n) => !seen.has(n)) : u.removed;
    for (const name of removed) {
      if (slice.due) await slice.next();
      if (this.staticClusters.has(name)) continue;
      const warming = this.warmingClusters.get(name)?.cluster;
      this.dropWarming(name);
      this.adsSecrets.delete(`cluster/${name}`);
      if (this.activeClusters.delete(name)) this.removeActive(name);
      else warming?.releaseStats();
    }
    if (this.recordClusterChanges) this.lastClusterChange = { rebuilt, removed: removed.filter((n) => !this.staticClusters.has(n)) };
    this.publishClusterGauges();
  }

  /** What the last CDS update changed (once: it is forgotten here, not kept until the next update). */
  takeClusterChange(): ClusterChange {
    const change = this.lastClusterChange;
    this.lastClusterChange = NO_CHANGE;
    return change;
  }

  /** Puts a warmed cluster in place of the active one of that name. */
  private activateCluster(name: string, tracked: TrackedResource, cluster: Cluster): void {
    const old = this.clusters.get(name);
    this.eds.track(cluster);
    this.clusters.install(cluster);
    if (old && old !== cluster) this.eds.forget(old);
    this.activeClusters.set(name, tracked);
  }

  private removeActive(name: string): void {
    const old = this.clusters.get(name);
    this.clusters.remove(name);
    if (old) this.eds.forget(old);
  }

  private dropWarming(name: string): void {
    const w = this.warmingClusters.get(name);
    if (!w) return;
    this.warmingClusters.delete(name);
    w.cluster.close();
    this.eds.forget(w.cluster);
  }

  private async applyEndpoints(u: XdsUpdate, out: XdsRejection[]): Promise<void> {
    const slice = new TimeSlice();
    // Workers are sent what this update stored, compiled (follower-updates.ts): kept until the next one.
    const stored = new Map<string, readonly EndpointConfig[]>();
    this.lastEndpointsStored = stored;
    for (const r of u.resources) {
      if (slice.due) await slice.next();
      let endpoints: readonly EndpointConfig[];
      try {
        endpoints = (r as CompiledAssignment).endpoints ?? readLoadAssignment(new Msg(r.json, ''), 'EDS');
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      this.fetchTimers.done(`eds/${r.name}`);
      // Not stored when no cluster uses the name (a removed cluster's, or one nobody asked for).
      if (this.eds.store(r.name, assignmentOf(track(r, r.version || u.version, '', true), endpoints))) {
        if (this.recordClusterChanges) stored.set(r.name, endpoints);
        this.deliverEndpoints(r.name, endpoints);
      }
    }
    for (const name of u.removed) {
      if (slice.due) await slice.next();
      this.eds.assignments.delete(name);
      this.deliverEndpoints(name, []);
    }
    this.publishClusterGauges();
  }

  /** Hands endpoints to the clusters using `serviceName`; warming ones go active. */
  private deliverEndpoints(serviceName: string, endpoints: readonly EndpointConfig[]): void {
    for (const c of this.eds.usersOf(serviceName)) {
      this.eds.delivered();
      c.setLoadAssignment(endpoints);
      const name = c.config.name;
      const w = this.warmingClusters.get(name);
      if (w?.cluster !== c) continue;
      this.warmingClusters.delete(name);
      this.activateCluster(name, w.tracked, c);
    }
  }

  /** EDS initial fetch timed out: clusters waiting for these endpoints go active without any. */
  private edsFetchTimedOut(serviceName: string): void {
    for (const c of this.eds.usersOf(serviceName)) {
      const w = this.warmingClusters.get(c.config.name);
      if (w?.cluster !== c) continue;
      c.setLoadAssignment([]);
      this.warmingClusters.delete(c.config.name);
      this.activateCluster(c.config.name, w.tracked, c);
    }
    this.publishClusterGauges();
  }

  private publishClusterGauges(): void {
    // Read by /stats and by tests; Envoy's names.
    this.gauges?.('cluster_manager.active_clusters', this.clusters.size);
    this.gauges?.('cluster_manager.warming_clusters', this.warmingClusters.size);
    // Not Envoy's: the ClusterLoadAssignments this thread holds (they go with their clusters).
    this.gauges?.('skua.eds.assignments', this.eds.assignments.size);
  }

  /** Set by the server: publishes a gauge value / counts one event. */
  gauges: ((name: string, value: number) => void) | undefined;
  counters: ((name: string) => void) | undefined;

  // ---- SDS / ECDS ----

  private applyExtra(u: XdsUpdate, into: Map<string, TrackedResource>, out: XdsRejection[]): void {
    const sink = this.sinks.get(u.typeUrl);
    for (const r of u.resources) {
      try {
        sink?.apply(r.name, r.json, r.version || u.version);
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      into.set(r.name, { version: r.version || u.version, lastUpdated: Date.now(), json: r.json, hash: '' });
    }
    // A full-state (SotW) response removes what it no longer lists; a refused name keeps what it had.
    const keep = u.full ? new Set([...u.resources.map((r) => r.name), ...(u.refused ?? []).map((x) => x.name)]) : undefined;
    const removed = keep ? [...into.keys()].filter((n) => !keep.has(n)) : u.removed;
    for (const name of removed) { into.delete(name); sink?.remove(name); }
  }

  /** ECDS: validate each extension config by compiling it, then rebuild the listeners that use it. */
  private async applyExtensions(u: XdsUpdate, out: XdsRejection[]): Promise<void> {
    const changed = new Set<string>();
    for (const r of u.resources) {
      const typedConfig = r.json.typed_config as Json | undefined;
      try {
        if (typedConfig) validateExtension(r.name, typedConfig);
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      setExtensionConfig(r.name, { typedConfig, version: r.version || u.version });
      this.extensions.set(r.name, { version: r.version || u.version, lastUpdated: Date.now(), json: r.json, hash: '' });
      changed.add(r.name);
    }
    for (const name of u.removed) { removeExtensionConfig(name); this.extensions.delete(name); changed.add(name); }
    await this.lds.rebuildUsing(changed);
  }

  // ---- init ----

  private finishInit(): void {
    if (!this.cdsInitDone && this.sawCds && this.warmingClusters.size === 0) {
      this.cdsInitDone = true;
      // LDS is asked for now (interest turns wildcard); its initial fetch is timed from here.
      if (!this.sawLds) this.fetchTimers.start('lds', this.ldsFetchTimeoutMs);
    }
    if (this.cdsInitDone && !this.ldsInitDone && this.sawLds && this.lds.warming.size === 0) {
      this.ldsInitDone = true;
      this.initResolve();
    }
  }

  /** The first response of the type arrived (even an empty one), or its initial fetch timed out. */
  private sawCds = false;
  private sawLds = false;
}
