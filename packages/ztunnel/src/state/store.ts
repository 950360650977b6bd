/**
 * The proxy state: workloads, services and policies with the indexes the data path asks for
 * (workload by network/ip, by uid, by identity, by network; service by namespace/hostname, by
 * hostname, by VIP and CIDR VIP; endpoints per service; policies by key and namespace). Updated by
 * WDS or the local config file; listeners hear what changed (live policy, workload removal).
 */
import { BlockList } from 'node:net';
import { compileIstioAuthorization, type CompiledIstioPolicy } from '../core.ts';
import {
  hostKey, networkKey, policyKey, type Authorization, type Endpoint, type Service, type Workload,
} from './model.ts';

export interface StateEvents {
  /** Policies were added, changed or removed (open connections are re-checked). */
  policiesChanged?(): void;
  /** A workload was removed (its connections close). */
  workloadRemoved?(w: Workload): void;
  /** Anything changed (DNS, admin). */
  changed?(): void;
}

interface PolicyEntry {
  readonly auth: Authorization;
  readonly compiled: CompiledIstioPolicy;
}

const NONE: readonly never[] = Object.freeze([]);

export class ProxyState {
  readonly workloadsByUid = new Map<string, Workload>();
  private readonly workloadsByAddr = new Map<string, Workload>();
  private readonly uidsByIdentity = new Map<string, Set<string>>();
  private readonly uidsByNetwork = new Map<string, Set<string>>();
  readonly servicesByKey = new Map<string, Service>();
  private readonly servicesByHostname = new Map<string, Service[]>();
  private readonly servicesByVip = new Map<string, Service[]>();
  private cidrVips: Array<{ readonly network: string; readonly range: BlockList; readonly length: number; readonly service: Service }> = [];
  /** Service key → workload uid → endpoint (kept even before the service arrives, as ztunnel stages them). */
  private readonly endpoints = new Map<string, Map<string, Endpoint>>();
  private readonly policies = new Map<string, PolicyEntry>();
  private readonly policiesByNamespace = new Map<string, Set<string>>();
  private readonly listeners: StateEvents[] = [];
  /** Bumped on every change. */
  version = 0;

  subscribe(l: StateEvents): () => void {
    this.listeners.push(l);
    return () => { const i = this.listeners.indexOf(l); if (i >= 0) this.listeners.splice(i, 1); };
  }

  // ---- updates ------------------------------------------------------------------------------

  upsertWorkload(w: Workload): void {
    const old = this.workloadsByUid.get(w.uid);
    if (old) this.unindexWorkload(old);
    this.workloadsByUid.set(w.uid, w);
    if (w.networkMode !== 'HostNetwork') for (const ip of w.workloadIps) this.workloadsByAddr.set(networkKey(w.network, ip), w);
    addTo(this.uidsByIdentity, w.identity, w.uid);
    addTo(this.uidsByNetwork, w.network, w.uid);
    for (const [svc, port] of w.services) {
      let eps = this.endpoints.get(svc);
      if (!eps) { eps = new Map(); this.endpoints.set(svc, eps); }
      eps.set(w.uid, { workloadUid: w.uid, service: svc, port, status: w.status });
    }
    this.version++;
  }

  private unindexWorkload(w: Workload): void {
    this.workloadsByUid.delete(w.uid);
    for (const ip of w.workloadIps) {
      const k = networkKey(w.network, ip);
      if (this.workloadsByAddr.get(k) === w) this.workloadsByAddr.delete(k);
    }
    removeFrom(this.uidsByIdentity, w.identity, w.uid);
    removeFrom(this.uidsByNetwork, w.network, w.uid);
    for (const svc of w.services.keys()) {
      const eps = this.endpoints.get(svc);
      eps?.delete(w.uid);
      if (eps?.size === 0) this.endpoints.delete(svc);
    }
  }

  upsertService(s: Service): void {
    const key = hostKey(s.namespace, s.hostname);
    const old = this.servicesByKey.get(key);
    if (old) this.unindexService(old);
    this.servicesByKey.set(key, s);
    pushTo(this.servicesByHostname, s.hostname, s);
    for (const v of s.vips) pushTo(this.servicesByVip, networkKey(v.network, v.address), s);
    for (const c of s.cidrVips) {
      const range = new BlockList();
      range.addSubnet(c.address, c.length, c.address.includes(':') ? 'ipv6' : 'ipv4');
      this.cidrVips.push({ network: c.network, range, length: c.length, service: s });
    }
    this.version++;
  }

  private unindexService(s: Service): void {
    this.servicesByKey.delete(hostKey(s.namespace, s.hostname));
    dropFrom(this.servicesByHostname, s.hostname, s);
    for (const v of s.vips) dropFrom(this.servicesByVip, networkKey(v.network, v.address), s);
    if (s.cidrVips.length) this.cidrVips = this.cidrVips.filter((c) => c.service !== s);
  }

  /** Removes a WDS Address by its resource name (workload uid or namespace/hostname). */
  removeAddress(name: string): boolean {
    const w = this.workloadsByUid.get(name);
    if (w) {
      this.unindexWorkload(w);
      this.version++;
      this.emit((l) => l.workloadRemoved?.(w));
      return true;
    }
    const s = this.servicesByKey.get(name);
    if (s) { this.unindexService(s); this.version++; return true; }
    return false;
  }

  /** Compiles first (a bad policy throws and changes nothing), then replaces. */
  upsertPolicy(a: Authorization): void {
    const compiled = compileIstioAuthorization(a);
    const key = policyKey(a);
    this.removePolicyEntry(key);
    this.policies.set(key, { auth: a, compiled });
    const scopeNs = a.scope === 'Global' ? '' : a.scope === 'Namespace' ? a.namespace : undefined;
    if (scopeNs !== undefined) addTo(this.policiesByNamespace, scopeNs, key);
    this.version++;
  }

  removePolicy(key: string): boolean {
    if (!this.removePolicyEntry(key)) return false;
    this.version++;
    return true;
  }

  private removePolicyEntry(key: string): boolean {
    const old = this.policies.get(key);
    if (!old) return false;
    this.policies.delete(key);
    const a = old.auth;
    const scopeNs = a.scope === 'Global' ? '' : a.scope === 'Namespace' ? a.namespace : undefined;
    if (scopeNs !== undefined) removeFrom(this.policiesByNamespace, scopeNs, key);
    return true;
  }

  /** Drops everything (a LOCAL_XDS_PATH reload replaces the whole state). */
  clear(): void {
    for (const w of [...this.workloadsByUid.values()]) this.removeAddress(w.uid);
    for (const k of [...this.servicesByKey.keys()]) this.removeAddress(k);
    for (const k of [...this.policies.keys()]) this.removePolicyEntry(k);
    this.version++;
  }

  /** Tells listeners a batch of updates is complete. */
  notify(policiesChanged: boolean): void {
    if (policiesChanged) this.emit((l) => l.policiesChanged?.());
    this.emit((l) => l.changed?.());
  }

  private emit(f: (l: StateEvents) => void): void {
    for (const l of [...this.listeners]) f(l);
  }

  // ---- lookups ------------------------------------------------------------------------------

  workloadByAddress(network: string, ip: string): Workload | undefined {
    return this.workloadsByAddr.get(networkKey(network, ip));
  }

  workloadsWithIdentity(identity: string): Workload[] {
    const uids = this.uidsByIdentity.get(identity);
    return uids ? [...uids].map((u) => this.workloadsByUid.get(u) as Workload) : [];
  }

  workloadsOnNetwork(network: string): Workload[] {
    const uids = this.uidsByNetwork.get(network);
    return uids ? [...uids].map((u) => this.workloadsByUid.get(u) as Workload) : [];
  }

  /** ztunnel's find_by_info: the workload on `node` with this namespace, name and service account. */
  workloadByInfo(node: string | undefined, namespace: string, name: string, serviceAccount: string): Workload | undefined {
    for (const w of this.workloadsByUid.values()) {
      if (w.namespace === namespace && w.name === name && w.serviceAccount === serviceAccount && (node === undefined || w.node === node)) return w;
    }
    return undefined;
  }

  serviceByHost(namespace: string, hostname: string): Service | undefined {
    return this.servicesByKey.get(hostKey(namespace, hostname));
  }

  /** The best service for a hostname: one in the client's namespace, else a canonical one, else the first. */
  bestServiceByHostname(hostname: string, clientNamespace: string | undefined): Service | undefined {
    return bestMatch(this.servicesByHostname.get(hostname) ?? NONE, clientNamespace);
  }

  /** The best service for a VIP (exact VIPs first, then the most specific CIDR VIP). */
  bestServiceByVip(network: string, ip: string, clientNamespace: string | undefined): Service | undefined {
    const exact = bestMatch(this.servicesByVip.get(networkKey(network, ip)) ?? NONE, clientNamespace);
    if (exact) return exact;
    let best: { service: Service; len: number } | undefined;
    for (const c of this.cidrVips) {
      if (c.network !== network || !c.range.check(ip, ip.includes(':') ? 'ipv6' : 'ipv4')) continue;
      if (clientNamespace !== undefined && c.service.visibility === 'Namespace' && c.service.namespace !== clientNamespace) continue;
      if (!best || c.length > best.len) best = { service: c.service, len: c.length };
    }
    return best?.service;
  }

  /** Endpoints of a service, health-filtered by its policy (ztunnel drops unhealthy ones unless ALLOW_ALL). */
  endpointsOf(s: Service): Endpoint[] {
    const eps = this.endpoints.get(hostKey(s.namespace, s.hostname));
    if (!eps) return [];
    const all = s.loadBalancer?.healthPolicy === 'AllowAll';
    const out: Endpoint[] = [];
    for (const ep of eps.values()) if (all || ep.status === 'Healthy') out.push(ep);
    return out;
  }

  /** All endpoints of a service key, unfiltered (admin dump). */
  rawEndpoints(key: string): ReadonlyMap<string, Endpoint> | undefined {
    return this.endpoints.get(key);
  }

  /** Services a workload backs (those known). */
  servicesOf(w: Workload): Service[] {
    const out: Service[] = [];
    for (const key of w.services.keys()) { const s = this.servicesByKey.get(key); if (s) out.push(s); }
    return out;
  }

  policy(key: string): Authorization | undefined {
    return this.policies.get(key)?.auth;
  }

  allPolicies(): Authorization[] {
    return [...this.policies.values()].map((p) => p.auth);
  }

  /** Policies that apply to a destination workload: its namespace's, global ones, and those selecting it. */
  policiesFor(w: Workload): CompiledIstioPolicy[] {
    const out: CompiledIstioPolicy[] = [];
    const seen = new Set<string>();
    const add = (key: string): void => {
      if (seen.has(key)) return;
      seen.add(key);
      const p = this.policies.get(key);
      if (p) out.push(p.compiled);
    };
    for (const k of this.policiesByNamespace.get(w.namespace) ?? NONE) add(k);
    for (const k of this.policiesByNamespace.get('') ?? NONE) add(k);
    for (const k of w.authorizationPolicies) add(k);
    return out;
  }
}

function bestMatch(list: readonly Service[], ns: string | undefined): Service | undefined {
  let canonical: Service | undefined;
  let first: Service | undefined;
  for (const s of list) {
    if (ns !== undefined && s.visibility === 'Namespace' && s.namespace !== ns) continue;
    if (ns !== undefined && s.namespace === ns) return s;
    if (s.canonical) canonical = s;
    first ??= s;
  }
  return canonical ?? first;
}

function addTo(m: Map<string, Set<string>>, k: string, v: string): void {
  let s = m.get(k);
  if (!s) { s = new Set(); m.set(k, s); }
  s.add(v);
}

function removeFrom(m: Map<string, Set<string>>, k: string, v: string): void {
  const s = m.get(k);
  if (!s) return;
  s.delete(v);
  if (s.size === 0) m.delete(k);
}

function pushTo<T>(m: Map<string, T[]>, k: string, v: T): void {
  const l = m.get(k);
  if (l) l.push(v); else m.set(k, [v]);
}

function dropFrom<T>(m: Map<string, T[]>, k: string, v: T): void {
  const l = m.get(k);
  if (!l) return;
  const i = l.indexOf(v);
  if (i >= 0) l.splice(i, 1);
  if (l.length === 0) m.delete(k);
}
