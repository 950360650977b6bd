import { FilterStateObject, type StreamSharing } from '../../core/filter-state.ts';
import { canonicalIp } from '../../core/canonical-ip.ts';
import { formatWords } from '../../core/cidr.ts';
import type { PeerInfo } from './peer.ts';
import type { JsonStruct } from './struct-codec.ts';

/**
 * Peer workloads as Istio's peer_metadata filter discovers them: from WDS (istio.workload.Workload
 * resources the istio.workload.BootstrapExtension subscribes to, looked up by peer IP) or from a
 * `baggage` header. Each is a filter state object (its string form is the baggage that describes
 * it) and a PeerInfo for telemetry. Peers are built once per resource / distinct baggage and reused
 * by identity, so istio_stats' series caches stay bounded.
 */

/** The workload facts baggage carries (and WDS gives). */
export interface PeerWorkloadFacts {
  readonly cluster: string;
  readonly namespace: string;
  readonly workloadName: string;
  /** deployment, pod, job, cronjob; '' when unknown. */
  readonly workloadType: string;
  readonly canonicalService: string;
  readonly canonicalRevision: string;
  readonly appName: string;
  readonly appVersion: string;
  /** The pod (instance) name; '' from baggage. */
  readonly instance: string;
}

export class DiscoveredPeer extends FilterStateObject implements PeerInfo {
  readonly facts: PeerWorkloadFacts;
  readonly id = '';
  readonly name: string;
  readonly namespace: string;
  readonly workloadName: string;
  readonly clusterId: string;
  readonly meshId = '';
  readonly canonicalName: string;
  readonly canonicalRevision: string;
  readonly app: string;
  readonly version: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly metadata: Readonly<JsonStruct>;
  constructor(facts: PeerWorkloadFacts, shared: StreamSharing) {
    super(toBaggage(facts), shared, false);
    this.facts = facts;
    this.name = facts.instance;
    this.namespace = facts.namespace;
    this.workloadName = facts.workloadName;
    this.clusterId = facts.cluster;
    this.canonicalName = facts.canonicalService;
    this.canonicalRevision = facts.canonicalRevision;
    this.app = facts.appName;
    this.version = facts.appVersion;
    const labels: Record<string, string> = {};
    if (facts.canonicalService) labels['service.istio.io/canonical-name'] = facts.canonicalService;
    if (facts.canonicalRevision) labels['service.istio.io/canonical-revision'] = facts.canonicalRevision;
    this.labels = labels;
    this.metadata = { NAME: facts.instance, NAMESPACE: facts.namespace, WORKLOAD_NAME: facts.workloadName, CLUSTER_ID: facts.cluster, LABELS: labels };
  }
}

/** Istio's baggage members for a workload, in its order; empty values are left out. */
export function toBaggage(f: PeerWorkloadFacts): string {
  const parts: string[] = [];
  const add = (k: string, v: string): void => { if (v) parts.push(`${k}=${encodeURIComponent(v)}`); };
  add('k8s.cluster.name', f.cluster);
  add('k8s.namespace.name', f.namespace);
  add(`k8s.${f.workloadType || 'deployment'}.name`, f.workloadName);
  add('service.name', f.canonicalService);
  add('service.version', f.canonicalRevision);
  add('app.name', f.appName);
  add('app.version', f.appVersion);
  return parts.join(',');
}

/** One workload's peers: as discovered, and the variant shared with the upstream connection; its SPIFFE id. */
interface Entry { readonly name: string; readonly addresses: readonly string[]; readonly local: DiscoveredPeer; readonly shared: DiscoveredPeer; readonly identity: string }

const WORKLOAD_TYPES: Record<string, string> = { DEPLOYMENT: 'deployment', CRONJOB: 'cronjob', POD: 'pod', JOB: 'job' };

/**
 * The workloads WDS delivered (proto-JSON istio.workload.Workload, bytes as base64), by IP. A later
 * resource for an address replaces an earlier one's claim; removing a resource drops its addresses.
 */
export class WorkloadIndex {
  readonly #byName = new Map<string, Entry>();
  readonly #byIp = new Map<string, Entry>();

  get size(): number { return this.#byName.size; }

  apply(name: string, json: Record<string, unknown>): void {
    const str = (k: string): string => (typeof json[k] === 'string' ? json[k] as string : '');
    const canonical = str('canonical_name'), revision = str('canonical_revision');
    const facts: PeerWorkloadFacts = {
      cluster: str('cluster_id'), namespace: str('namespace'), workloadName: str('workload_name') || str('name'),
      workloadType: WORKLOAD_TYPES[str('workload_type') || 'DEPLOYMENT'] ?? 'deployment',
      canonicalService: canonical, canonicalRevision: revision, appName: canonical, appVersion: revision, instance: str('name'),
    };
    const raw = Array.isArray(json.addresses) ? json.addresses : [];
    const addresses = raw.map((a) => ipFromBase64(String(a))).filter((a) => a !== '');
    this.remove(name);
    const identity = `spiffe://${str('trust_domain') || 'cluster.local'}/ns/${facts.namespace}/sa/${str('service_account') || 'default'}`;
    const entry: Entry = { name, addresses, local: new DiscoveredPeer(facts, 'NONE'), shared: new DiscoveredPeer(facts, 'ONCE'), identity };
    this.#byName.set(name, entry);
    for (const ip of addresses) this.#byIp.set(ip, entry);
  }

  remove(name: string): void {
    const old = this.#byName.get(name);
    if (!old) return;
    this.#byName.delete(name);
    for (const ip of old.addresses) if (this.#byIp.get(ip) === old) this.#byIp.delete(ip);
  }

  /** The SPIFFE id of the workload at `ip` (what its HBONE endpoint must present), if WDS knows it. */
  identityOf(ip: string): string | undefined {
    return (this.#byIp.get(ip) ?? this.#byIp.get(canonicalIp(ip)))?.identity;
  }

  /** The workload at `ip` (any spelling of an IPv4-mapped address), as a filter state peer. */
  lookup(ip: string, sharedWithUpstream: boolean): DiscoveredPeer | undefined {
    const e = this.#byIp.get(ip) ?? this.#byIp.get(canonicalIp(ip));
    return e === undefined ? undefined : sharedWithUpstream ? e.shared : e.local;
  }
}

function ipFromBase64(b64: string): string {
  const b = Buffer.from(b64, 'base64');
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length !== 16) return '';
  const words = new Uint32Array([b.readUInt32BE(0), b.readUInt32BE(4), b.readUInt32BE(8), b.readUInt32BE(12)]);
  // The text sockets report (IPv4-mapped addresses as IPv4).
  return canonicalIp(formatWords(6, words));
}

/**
 * This thread's workload index: the bootstrap extension's WDS subscription fills it (every
 * --concurrency worker applies the same updates), peer_metadata filters read it.
 */
export const workloadDiscovery = new WorkloadIndex();
