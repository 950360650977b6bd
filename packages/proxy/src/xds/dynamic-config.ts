/**
 * The config layer behind the ADS stream: turns accepted xDS resources into live clusters,
 * endpoints, listeners and route tables, with Envoy's warming (an EDS cluster waits for its
 * endpoints, a listener for its RDS routes) and init order (LDS is asked for once the
 * first CDS update has warmed). A refused resource leaves the last good one serving and
 * is remembered as error_state for /config_dump.
 */
import { Msg } from '../config/fields.ts';
import { compileCluster, readLoadAssignment, type EndpointConfig } from '../upstream/cluster-config.ts';
import type { Cluster } from '../upstream/cluster.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { ListenerConfig } from '../listener/config.ts';
import type { ListenerManager } from '../listener/manager.ts';
import { rdsRoute } from '../http/rds.ts';
import { TYPE_URL } from './discovery.ts';
import type { XdsHandler, XdsRejection, XdsResource, XdsUpdate } from './types.ts';
import { logger } from '../core/log.ts';
import { removeExtensionConfig, setExtensionConfig } from './ecds.ts';
import { adsSecretNames, compileOrWait, contentHash, ecdsNames, rdsNames, validateExtension } from './resource-refs.ts';

const log = logger('config');
const upstreamLog = logger('upstream');

type Json = Record<string, unknown>;

/** One resource as /config_dump shows it. */
export interface TrackedResource {
  readonly version: string;
  readonly lastUpdated: number;
  readonly json: Json;
  /** A hash of the JSON, to skip updates that change nothing (Envoy compares hashes too). */
  readonly hash: string;
}

export interface ErrorState {
  readonly json: Json;
  readonly details: string;
  readonly time: number;
}

/** Hooks for resource types owned elsewhere (SDS secrets, ECDS extension configs, NDS). */
export interface ExtraTypeSink {
  apply(name: string, json: Json, version: string): void;
  remove(name: string): void;
  /** Subscribe to the type as a wildcard (NDS); otherwise the names listeners/clusters refer to. */
  readonly wildcard?: boolean;
}

const NO_NAMES: ReadonlySet<string> = new Set();

export class DynamicConfig implements XdsHandler {
  readonly activeClusters = new Map<string, TrackedResource>();
  readonly warmingClusters = new Map<string, { tracked: TrackedResource; cluster: Cluster }>();
  readonly endpoints = new Map<string, { tracked: TrackedResource; endpoints: readonly EndpointConfig[] }>();
  readonly activeListeners = new Map<string, TrackedResource>();
  /** Listeners waiting for their RDS routes, or (config undefined) for an ECDS extension config. */
  readonly warmingListeners = new Map<string, { tracked: TrackedResource; config: ListenerConfig | undefined; routes: readonly string[] }>();
  /** ECDS names each listener's filters take their config from. */
  private readonly listenerExtensions = new Map<string, readonly string[]>();
  /** RDS names each listener (active or warming) uses. */
  private readonly listenerRoutes = new Map<string, readonly string[]>();
  /** SDS secret names (config source `ads`) each listener / cluster names, by resource name. */
  private readonly adsSecrets = new Map<string, readonly string[]>();
  readonly secrets = new Map<string, TrackedResource>();
  readonly extensions = new Map<string, TrackedResource>();
  /** Resources of sink-only types (NDS), by type. */
  readonly others = new Map<string, Map<string, TrackedResource>>();
  readonly errors = new Map<string, Map<string, ErrorState>>();
  private readonly clusters: ClusterManager;
  private readonly listeners: ListenerManager;
  private readonly staticClusters: ReadonlySet<string>;
  private readonly staticListeners: ReadonlySet<string>;
  private cdsInitDone = false;
  private ldsInitDone = false;
  private readonly sinks = new Map<string, ExtraTypeSink>();
  private initResolve!: () => void;
  /** Resolves when the first CDS and LDS updates (and their warming) are done: the server may go LIVE. */
  readonly initialized: Promise<void>;

  constructor(clusters: ClusterManager, listeners: ListenerManager, staticClusters: ReadonlySet<string>, staticListeners: ReadonlySet<string>) {
    this.clusters = clusters;
    this.listeners = listeners;
    this.staticClusters = staticClusters;
    this.staticListeners = staticListeners;
    this.initialized = new Promise((r) => { this.initResolve = r; });
  }

  /** Route SDS secrets / ECDS configs to their owner. */
  setSink(typeUrl: string, sink: ExtraTypeSink): void {
    this.sinks.set(typeUrl, sink);
  }

  /** initial_fetch_timeout: stop waiting and let the server go live with what it has. */
  giveUpInitialFetch(): void {
    this.finishInit(true);
  }

  get initDone(): boolean {
    return this.ldsInitDone;
  }

  interest(typeUrl: string): { wildcard: boolean; names: ReadonlySet<string> } {
    switch (typeUrl) {
      case TYPE_URL.cluster: return { wildcard: true, names: NO_NAMES };
      case TYPE_URL.listener: return { wildcard: this.cdsInitDone, names: NO_NAMES };
      case TYPE_URL.endpoint: {
        const names = new Set<string>();
        for (const c of this.clusters.all()) if (c.config.type === 'EDS') names.add(c.config.edsServiceName);
        for (const w of this.warmingClusters.values()) names.add(w.cluster.config.edsServiceName);
        return { wildcard: false, names };
      }
      case TYPE_URL.route: {
        const names = new Set<string>();
        for (const list of this.listenerRoutes.values()) for (const n of list) names.add(n);
        return { wildcard: false, names };
      }
      case TYPE_URL.secret: case TYPE_URL.extension: {
        const names = new Set<string>();
        for (const list of (typeUrl === TYPE_URL.secret ? this.adsSecrets : this.listenerExtensions).values()) for (const n of list) names.add(n);
        return { wildcard: false, names };
      }
      default: return { wildcard: this.sinks.get(typeUrl)?.wildcard === true, names: NO_NAMES };
    }
  }

  apply(u: XdsUpdate): readonly XdsRejection[] {
    const rejections: XdsRejection[] = [];
    if (u.typeUrl === TYPE_URL.cluster) this.sawCds = true;
    if (u.typeUrl === TYPE_URL.listener) this.sawLds = true;
    switch (u.typeUrl) {
      case TYPE_URL.cluster: this.applyClusters(u, rejections); break;
      case TYPE_URL.endpoint: this.applyEndpoints(u, rejections); break;
      case TYPE_URL.listener: this.applyListeners(u, rejections); break;
      case TYPE_URL.route: this.applyRoutes(u, rejections); break;
      case TYPE_URL.secret: this.applyExtra(u, this.secrets, rejections); break;
      case TYPE_URL.extension: this.applyExtensions(u, rejections); break;
      default: {
        if (!this.sinks.has(u.typeUrl)) { for (const r of u.resources) rejections.push({ name: r.name, message: `unsupported resource type ${u.typeUrl}` }); break; }
        let into = this.others.get(u.typeUrl);
        if (!into) { into = new Map(); this.others.set(u.typeUrl, into); }
        this.applyExtra(u, into, rejections);
      }
    }
    this.finishInit(false);
    return rejections;
  }

  private reject(typeUrl: string, r: XdsResource, message: string, out: XdsRejection[]): void {
    out.push({ name: r.name, message });
    let m = this.errors.get(typeUrl);
    if (!m) { m = new Map(); this.errors.set(typeUrl, m); }
    m.set(r.name, { json: r.json, details: message, time: Date.now() });
  }

  private accepted(typeUrl: string, name: string): void {
    this.errors.get(typeUrl)?.delete(name);
  }

  // ---- CDS / EDS ----

  private applyClusters(u: XdsUpdate, out: XdsRejection[]): void {
    const seen = new Set<string>();
    for (const r of u.resources) {
      seen.add(r.name);
      if (this.staticClusters.has(r.name)) { this.reject(u.typeUrl, r, `cluster '${r.name}' is static and cannot be updated by CDS`, out); continue; }
      const hash = contentHash(r.json);
      if ((this.warmingClusters.get(r.name)?.tracked ?? this.activeClusters.get(r.name))?.hash === hash) { this.accepted(u.typeUrl, r.name); continue; }
      let cluster: Cluster;
      try {
        cluster = this.clusters.build(compileCluster(new Msg(r.json, '')));
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      this.adsSecrets.set(`cluster/${r.name}`, adsSecretNames(r.json));
      const tracked = { version: r.version || u.version, lastUpdated: Date.now(), json: r.json, hash };
      const cla = cluster.config.type === 'EDS' ? this.endpoints.get(cluster.config.edsServiceName) : undefined;
      if (cla) cluster.setLoadAssignment(cla.endpoints);
      this.warmingClusters.get(r.name)?.cluster.close();
      this.warmingClusters.delete(r.name);
      if (cluster.warm) this.activateCluster(r.name, tracked, cluster);
      else this.warmingClusters.set(r.name, { tracked, cluster });
    }
    const removed = u.full ? [...this.activeClusters.keys(), ...this.warmingClusters.keys()].filter((n) => !seen.has(n)) : u.removed;
    for (const name of removed) {
      if (this.staticClusters.has(name)) continue;
      this.warmingClusters.get(name)?.cluster.close();
      this.warmingClusters.delete(name);
      this.adsSecrets.delete(`cluster/${name}`);
      if (this.activeClusters.delete(name)) this.clusters.remove(name);
    }
    this.publishClusterGauges();
  }

  private activateCluster(name: string, tracked: TrackedResource, cluster: Cluster): void {
    this.clusters.install(cluster);
    this.activeClusters.set(name, tracked);
  }

  private applyEndpoints(u: XdsUpdate, out: XdsRejection[]): void {
    for (const r of u.resources) {
      let endpoints: EndpointConfig[];
      try {
        endpoints = readLoadAssignment(new Msg(r.json, ''), 'EDS');
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      this.endpoints.set(r.name, { tracked: { version: r.version || u.version, lastUpdated: Date.now(), json: r.json, hash: '' }, endpoints });
      this.deliverEndpoints(r.name, endpoints);
    }
    for (const name of u.removed) {
      this.endpoints.delete(name);
      this.deliverEndpoints(name, []);
    }
    this.publishClusterGauges();
  }

  private deliverEndpoints(serviceName: string, endpoints: readonly EndpointConfig[]): void {
    for (const c of this.clusters.all()) if (c.config.type === 'EDS' && c.config.edsServiceName === serviceName) c.setLoadAssignment(endpoints);
    for (const [name, w] of this.warmingClusters) {
      if (w.cluster.config.edsServiceName !== serviceName) continue;
      w.cluster.setLoadAssignment(endpoints);
      this.warmingClusters.delete(name);
      this.activateCluster(name, w.tracked, w.cluster);
    }
  }

  private publishClusterGauges(): void {
    // Read by /stats and by tests; Envoy's names.
    this.gauges?.('cluster_manager.active_clusters', this.clusters.size);
    this.gauges?.('cluster_manager.warming_clusters', this.warmingClusters.size);
  }

  /** Set by the server: publishes a gauge value / counts one event. */
  gauges: ((name: string, value: number) => void) | undefined;
  counters: ((name: string) => void) | undefined;

  // ---- LDS / RDS ----

  private applyListeners(u: XdsUpdate, out: XdsRejection[]): void {
    const seen = new Set<string>();
    for (const r of u.resources) {
      seen.add(r.name);
      if (this.staticListeners.has(r.name)) { this.reject(u.typeUrl, r, `listener '${r.name}' is static and cannot be updated by LDS`, out); continue; }
      const hash = contentHash(r.json);
      if ((this.warmingListeners.get(r.name)?.tracked ?? this.activeListeners.get(r.name))?.hash === hash) { this.accepted(u.typeUrl, r.name); continue; }
      let config: ListenerConfig | undefined;
      try {
        config = compileOrWait(r.json);
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        continue;
      }
      this.accepted(u.typeUrl, r.name);
      const routes = rdsNames(r.json);
      const tracked = { version: r.version || u.version, lastUpdated: Date.now(), json: r.json, hash };
      this.listenerRoutes.set(r.name, routes);
      this.listenerExtensions.set(r.name, ecdsNames(r.json));
      this.adsSecrets.set(`listener/${r.name}`, adsSecretNames(r.json));
      this.warmingListeners.set(r.name, { tracked, config, routes });
    }
    const removed = u.full ? [...this.activeListeners.keys(), ...this.warmingListeners.keys()].filter((n) => !seen.has(n)) : u.removed;
    for (const name of removed) {
      if (this.staticListeners.has(name)) continue;
      this.warmingListeners.delete(name);
      this.listenerRoutes.delete(name);
      this.listenerExtensions.delete(name);
      this.adsSecrets.delete(`listener/${name}`);
      if (this.activeListeners.delete(name)) this.listeners.remove(name);
    }
    this.promoteListeners();
  }

  private applyRoutes(u: XdsUpdate, out: XdsRejection[]): void {
    for (const r of u.resources) {
      const route = rdsRoute(r.name);
      const scopes = route.statScopes();
      for (const sc of scopes) this.counters?.(`${sc}update_attempt`);
      try {
        route.update(r.json, r.version || u.version);
        this.accepted(u.typeUrl, r.name);
        for (const sc of scopes) { this.counters?.(`${sc}update_success`); this.counters?.(`${sc}config_reload`); }
      } catch (e) {
        this.reject(u.typeUrl, r, (e as Error).message, out);
        for (const sc of scopes) this.counters?.(`${sc}update_rejected`);
      }
    }
    for (const name of u.removed) rdsRoute(name).remove();
    this.promoteListeners();
  }

  /** Warming listeners whose routes have all arrived go live (bind or update in place). */
  private promoteListeners(): void {
    for (const [name, w] of this.warmingListeners) {
      if (!w.config) {
        try {
          w.config = compileOrWait(w.tracked.json);
        } catch (e) {
          // Accepted earlier, refused now that its extension config is known: drop it, say why.
          this.warmingListeners.delete(name);
          this.recordError(TYPE_URL.listener, name, w.tracked.json, (e as Error).message);
          continue;
        }
        if (!w.config) continue;
      }
      if (!w.routes.every((n) => rdsRoute(n).ready)) continue;
      this.warmingListeners.delete(name);
      this.activeListeners.set(name, w.tracked);
      const config = w.config;
      this.listeners.addOrUpdate(config).then(() => {
        upstreamLog.info(`lds: add/update listener '${name}' ${config.internal ? '(internal)' : config.bindToPort ? `on ${config.address.address}:${config.address.port}` : `for ${config.address.address}:${config.address.port} (bind_to_port false)`}`);
      }, (e: Error) => {
        log.error(`listener ${name}: cannot bind ${config.address.address}:${config.address.port}: ${e.message}`);
        this.activeListeners.delete(name);
        this.listeners.remove(name);
        this.recordError(TYPE_URL.listener, name, w.tracked.json, `cannot bind: ${e.message}`);
      });
    }
  }

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
    for (const name of u.removed) { into.delete(name); sink?.remove(name); }
  }

  /** ECDS: validate each extension config by compiling it, then rebuild the listeners that use it. */
  private applyExtensions(u: XdsUpdate, out: XdsRejection[]): void {
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
    // Active listeners using a changed config are rebuilt and updated in place (their connections drain).
    for (const [name, tracked] of this.activeListeners) {
      if (this.warmingListeners.has(name) || !(this.listenerExtensions.get(name) ?? []).some((n) => changed.has(n))) continue;
      this.warmingListeners.set(name, { tracked, config: undefined, routes: this.listenerRoutes.get(name) ?? [] });
    }
    this.promoteListeners();
  }

  private recordError(typeUrl: string, name: string, json: Json, details: string): void {
    const m = this.errors.get(typeUrl) ?? new Map<string, ErrorState>();
    m.set(name, { json, details, time: Date.now() });
    this.errors.set(typeUrl, m);
  }

  // ---- init ----

  private finishInit(force: boolean): void {
    if (!this.cdsInitDone && (force || (this.sawCds && this.warmingClusters.size === 0))) {
      this.cdsInitDone = true;
    }
    if (this.cdsInitDone && !this.ldsInitDone && (force || (this.sawLds && this.warmingListeners.size === 0))) {
      this.ldsInitDone = true;
      this.initResolve();
    }
  }

  /** The first response of the type arrived (even an empty one). */
  private sawCds = false;
  private sawLds = false;
}
