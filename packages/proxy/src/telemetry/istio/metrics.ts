import type { Counter, Gauge, Histogram, StatsStore } from '../../stats/store.ts';
import { labelledFamily, type LabelledFamily } from '../../stats/labelled.ts';
import { localExchange, type PeerInfo } from './peer.ts';
import { HTTP_TAGS, STANDARD_METRICS, TCP_TAGS, type IstioStatsConfig, type LabelSource } from '../../filters/http/istio_stats/config.ts';
import type { AttrContext } from './attributes.ts';

/** Istio's custom stat namespace: exported to Prometheus without Envoy's `envoy_` prefix. */
export const ISTIO_NAMESPACE = 'istiocustom';

/** Who reports: a client sidecar (outbound), a server sidecar (inbound) or a shared server gateway (waypoint). */
export type Role = 'source' | 'destination' | 'waypoint';

/** What varies per request/connection on the peer side of the labels. */
export interface PeerFacts {
  /** The other side: downstream peer for servers, upstream peer for clients. */
  peer: PeerInfo | null;
  /** For a gateway: the upstream (endpoint) peer. */
  endpointPeer: PeerInfo | null;
  peerSan: string;
  localSan: string;
  serviceHost: string;
  serviceName: string;
}

const UNKNOWN = 'unknown';
const LATEST = 'latest';

function namespaceOf(san: string): string {
  const i = san.indexOf('/ns/');
  if (i < 0) return '';
  const start = i + 4;
  const end = san.indexOf('/', start);
  return end < 0 ? san.slice(start) : san.slice(start, end);
}

/** The 20 standard peer labels (reporter first), as istio-proxy fills them for each role. */
export function peerLabelValues(role: Role, f: PeerFacts): string[] {
  const local = localExchange().peer;
  const p = f.peer;
  const peerNs = namespaceOf(f.peerSan) || p?.namespace || '';
  const or = (v: string | undefined, d: string): string => (v ? v : d);
  if (role === 'source') {
    return [role, local.workloadName, local.canonicalName, local.canonicalRevision, local.namespace, or(f.localSan, UNKNOWN),
      local.app, local.version, local.clusterId,
      or(p?.workloadName, UNKNOWN), or(peerNs, UNKNOWN), or(f.peerSan, UNKNOWN), or(p?.app, UNKNOWN), or(p?.version, UNKNOWN),
      or(f.serviceHost, UNKNOWN), or(p?.canonicalName, UNKNOWN), or(p?.canonicalRevision, LATEST), or(f.serviceName, UNKNOWN),
      or(peerNs, UNKNOWN), or(p?.clusterId, UNKNOWN)];
  }
  const src = [role, or(p?.workloadName, UNKNOWN), or(p?.canonicalName, UNKNOWN), or(p?.canonicalRevision, LATEST), or(peerNs, UNKNOWN),
    or(f.peerSan, UNKNOWN), or(p?.app, UNKNOWN), or(p?.version, UNKNOWN), or(p?.clusterId, UNKNOWN)];
  if (role === 'waypoint') {
    const e = f.endpointPeer;
    const canonical = e ? e.canonicalName : UNKNOWN;
    return [...src, e ? e.workloadName : UNKNOWN, or(e?.namespace, UNKNOWN), UNKNOWN, or(e?.app, UNKNOWN), e ? e.version : UNKNOWN,
      f.serviceHost || canonical, canonical, e ? e.canonicalRevision : UNKNOWN, f.serviceName || canonical, local.namespace, local.clusterId];
  }
  return [...src, local.workloadName, local.namespace, or(f.localSan, UNKNOWN), local.app, local.version,
    f.serviceHost || local.canonicalName, local.canonicalName, local.canonicalRevision, f.serviceName || local.canonicalName,
    local.namespace, local.clusterId];
}

type Metric = Counter | Histogram | Gauge;

/**
 * One series of a resolved label set. It joins its family, and so the export, on first use: an Envoy
 * stat exists from its first add, so istio_tcp_connections_closed_total appears only once a
 * connection closed (never as a 0 while it is open) and the gRPC message counters only for gRPC.
 */
export class SeriesSlot {
  private readonly family: LabelledFamily;
  private readonly names: readonly string[];
  private readonly values: readonly string[];
  private metric: Metric | undefined;
  constructor(family: LabelledFamily, names: readonly string[], values: readonly string[]) {
    this.family = family;
    this.names = names;
    this.values = values;
  }
  private get(): Metric { return (this.metric ??= this.family.get(this.names, this.values)); }
  counter(): Counter { return this.get() as Counter; }
  histogram(): Histogram { return this.get() as Histogram; }
}

/** The resolved series of one label set: one entry per metric of the protocol (undefined = dropped). */
export type SeriesSet = ReadonlyArray<SeriesSlot | undefined>;

interface PeerLevel {
  readonly values: string[];
  readonly tails: Map<string, SeriesSet>;
}

/**
 * The standard Istio metrics of one protocol (HTTP or TCP) for one filter config: families, label
 * plans, and a two-level cache from (peer object, service/principals) and (protocol, code, flags...)
 * to resolved series, so a request costs two Map lookups and a short string concatenation.
 */
export class IstioMetrics {
  readonly role: Role;
  /** Standard metric short names of this protocol, in SeriesSet order. */
  readonly names: readonly string[];
  private readonly families: ReadonlyArray<LabelledFamily | undefined>;
  private readonly plans: ReadonlyArray<readonly LabelSource[] | undefined>;
  private readonly tags: readonly string[];
  private readonly peers = new Map<PeerInfo | null, Map<string, PeerLevel>>();
  private readonly config: IstioStatsConfig;
  private readonly customFamilies: LabelledFamily[];

  constructor(store: StatsStore, config: IstioStatsConfig, role: Role, tcp: boolean) {
    this.role = role;
    this.config = config;
    this.tags = tcp ? TCP_TAGS : HTTP_TAGS;
    this.names = Object.keys(STANDARD_METRICS).filter((n) => STANDARD_METRICS[n].tcp === tcp);
    this.plans = this.names.map((n) => config.plans.get(n));
    this.families = this.names.map((n, i) => (this.plans[i] ? labelledFamily(store, ISTIO_NAMESPACE, `istio_${n}`, STANDARD_METRICS[n].kind) : undefined));
    this.customFamilies = config.custom.map((c) => labelledFamily(store, ISTIO_NAMESPACE, c.name, c.kind));
    const version = localExchange().peer.metadata.ISTIO_VERSION;
    labelledFamily(store, ISTIO_NAMESPACE, 'istio_build', 'gauge').get(['component', 'tag'], ['proxy', typeof version === 'string' && version ? version : UNKNOWN]).set(1);
  }

  /** Expression values for one request/connection ([] without dimension expressions). */
  evaluate(ctx: AttrContext): string[] {
    const exprs = this.config.exprs;
    if (exprs.length === 0) return NO_VALUES;
    const out = new Array<string>(exprs.length);
    for (let i = 0; i < exprs.length; i++) {
      let v: unknown;
      try { v = exprs[i](ctx); } catch { v = undefined; }
      out[i] = v === undefined || v === null ? UNKNOWN : String(v);
    }
    return out;
  }

  /** The series for these facts and trailing standard values (protocol, code, ..., security policy). */
  resolve(f: PeerFacts, tail: readonly string[], exprValues: readonly string[]): SeriesSet {
    // Consecutive requests mostly share every fact: the last answer is reused without building keys.
    const m = this.memo;
    if (m && exprValues.length === 0 && sameFacts(m.facts, f) && sameTail(m.tail, tail)) return m.set;
    const set = this.lookup(f, tail, exprValues);
    if (exprValues.length === 0) this.memo = { facts: { ...f }, tail: [...tail], set };
    return set;
  }

  private memo: { readonly facts: PeerFacts; readonly tail: readonly string[]; readonly set: SeriesSet } | undefined;

  private lookup(f: PeerFacts, tail: readonly string[], exprValues: readonly string[]): SeriesSet {
    let byService = this.peers.get(f.peer);
    if (!byService) { byService = new Map(); this.peers.set(f.peer, byService); }
    const key = f.endpointPeer === null
      ? `${f.serviceHost}\u0001${f.serviceName}\u0001${f.peerSan}\u0001${f.localSan}`
      : `${f.serviceHost}\u0001${f.serviceName}\u0001${f.peerSan}\u0001${f.localSan}\u0001${f.endpointPeer.id}\u0001${f.endpointPeer.workloadName}`;
    let level = byService.get(key);
    if (!level) { level = { values: peerLabelValues(this.role, f), tails: new Map() }; byService.set(key, level); }
    let tailKey = tail[0];
    for (let i = 1; i < tail.length; i++) tailKey += '\u0001' + tail[i];
    for (let i = 0; i < exprValues.length; i++) tailKey += '\u0002' + exprValues[i];
    let set = level.tails.get(tailKey);
    if (!set) { set = this.build([...level.values, ...tail], exprValues); level.tails.set(tailKey, set); }
    return set;
  }

  private build(std: readonly string[], exprValues: readonly string[]): SeriesSet {
    return this.families.map((fam, i) => {
      const plan = this.plans[i];
      if (!fam || !plan) return undefined;
      const names = plan.map((l) => l.name);
      const values = plan.map((l) => ('std' in l ? std[l.std] : exprValues[l.expr]));
      return new SeriesSlot(fam, names, values);
    });
  }

  /** Definitions (custom metrics): labels from expressions only, value from the definition's expression. */
  recordCustom(ctx: AttrContext, exprValues: readonly string[]): void {
    const custom = this.config.custom;
    for (let i = 0; i < custom.length; i++) {
      const c = custom[i];
      let raw: unknown;
      try { raw = c.value(ctx); } catch { raw = undefined; }
      const amount = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : 0;
      const names = c.labels.map((l) => l.name);
      const values = c.labels.map((l) => ('expr' in l ? exprValues[l.expr] : UNKNOWN));
      const m = this.customFamilies[i].get(names, values) as Metric;
      if ('record' in m) m.record(amount); else if (c.kind === 'gauge') (m as Gauge).set(amount); else (m as Counter).inc(amount);
    }
  }

  get hasCustom(): boolean { return this.config.custom.length > 0; }
  get tagCount(): number { return this.tags.length; }
}

const NO_VALUES: string[] = [];

function sameFacts(a: PeerFacts, b: PeerFacts): boolean {
  return a.peer === b.peer && a.endpointPeer === b.endpointPeer && a.serviceHost === b.serviceHost && a.serviceName === b.serviceName
    && a.peerSan === b.peerSan && a.localSan === b.localSan;
}

function sameTail(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
