import type { Msg } from '../../../config/fields.ts';
import type { HttpFilterConfig, HttpFilterExtension, LiveHttpFilter } from '../types.ts';
import { FilterStateObject, setFilterState } from '../../../core/filter-state.ts';
import type { PeerInfo } from '../../../telemetry/istio/peer.ts';
import type { JsonStruct } from '../../../telemetry/istio/struct-codec.ts';

export const CONNECT_BAGGAGE_TYPE = 'type.googleapis.com/io.istio.http.connect_baggage.Config';
export const DOWNSTREAM_PEER_KEY = 'wasm.downstream_peer';
export const DOWNSTREAM_PEER_ID_KEY = 'wasm.downstream_peer_id';

/** The workload a `baggage` header describes (Istio's workload metadata, from W3C baggage members). */
export interface PeerWorkload {
  readonly cluster: string;
  readonly namespace: string;
  readonly workloadName: string;
  /** deployment, pod, job, cronjob (from which k8s.*.name member named the workload); '' when none did. */
  readonly workloadType: string;
  readonly canonicalService: string;
  readonly canonicalRevision: string;
  readonly appName: string;
  readonly appVersion: string;
}

const WORKLOAD_KEYS: ReadonlyArray<[string, string]> = [
  ['k8s.deployment.name', 'deployment'], ['k8s.pod.name', 'pod'], ['k8s.job.name', 'job'], ['k8s.cronjob.name', 'cronjob'],
];

/** W3C baggage: `key=value` members separated by commas; properties after ';' are dropped. */
export function parseBaggage(header: string): PeerWorkload {
  const kv = new Map<string, string>();
  for (const member of header.split(',')) {
    const m = member.split(';')[0];
    const eq = m.indexOf('=');
    if (eq <= 0) continue;
    let v = m.slice(eq + 1).trim();
    try { v = decodeURIComponent(v); } catch { /* keep it raw */ }
    kv.set(m.slice(0, eq).trim(), v);
  }
  let workloadName = '', workloadType = '';
  for (const [k, type] of WORKLOAD_KEYS) {
    const v = kv.get(k);
    if (v !== undefined) { workloadName = v; workloadType = type; break; }
  }
  return {
    cluster: kv.get('k8s.cluster.name') ?? '',
    namespace: kv.get('k8s.namespace.name') ?? '',
    workloadName,
    workloadType,
    canonicalService: kv.get('service.name') ?? '',
    canonicalRevision: kv.get('service.version') ?? '',
    appName: kv.get('app.name') ?? '',
    appVersion: kv.get('app.version') ?? '',
  };
}

/**
 * `wasm.downstream_peer`: the parsed workload in the shape Istio telemetry reads (PeerInfo); its
 * string form is the baggage it came from.
 */
export class PeerWorkloadObject extends FilterStateObject implements PeerInfo {
  readonly workload: PeerWorkload;
  readonly id = '';
  readonly name = '';
  readonly namespace: string;
  readonly workloadName: string;
  readonly clusterId: string;
  readonly meshId = '';
  readonly canonicalName: string;
  readonly canonicalRevision: string;
  readonly app: string;
  readonly version: string;
  readonly labels: Readonly<Record<string, string>> = {};
  readonly metadata: Readonly<JsonStruct>;
  constructor(baggage: string, workload: PeerWorkload) {
    super(baggage, 'TRANSITIVE', false);
    this.workload = workload;
    this.namespace = workload.namespace;
    this.workloadName = workload.workloadName;
    this.clusterId = workload.cluster;
    this.canonicalName = workload.canonicalService;
    this.canonicalRevision = workload.canonicalRevision;
    this.app = workload.appName;
    this.version = workload.appVersion;
    this.metadata = { NAMESPACE: workload.namespace, WORKLOAD_NAME: workload.workloadName, CLUSTER_ID: workload.cluster };
  }
}

const UNKNOWN_PEER_ID = new FilterStateObject('unknown', 'TRANSITIVE', false);

/**
 * io.istio.http.connect_baggage: on a CONNECT (HBONE) request carrying `baggage`, records the
 * downstream peer's workload as filter state `wasm.downstream_peer` (and `wasm.downstream_peer_id`
 * "unknown"), shared with the upstream connection, so telemetry on the internal listener behind the
 * tunnel knows who is calling.
 */
export const CONNECT_BAGGAGE_EXTENSION: HttpFilterExtension = {
  typeUrl: CONNECT_BAGGAGE_TYPE,
  legacyName: 'io.istio.http.connect_baggage',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    m?.onlyFields(['@type', 'propagate']);
    if (m?.bool('propagate')) throw m.error('propagate', 'is not supported yet');
    const live: LiveHttpFilter = {
      decodeHeaders(cb) {
        const raw = cb.ex.headers.baggage;
        if (raw === undefined) return 'continue';
        const baggage = Array.isArray(raw) ? raw.join(',') : raw;
        setFilterState(cb.rec, DOWNSTREAM_PEER_KEY, new PeerWorkloadObject(baggage, parseBaggage(baggage)));
        setFilterState(cb.rec, DOWNSTREAM_PEER_ID_KEY, UNKNOWN_PEER_ID);
        return 'continue';
      },
    };
    return { name, live: () => live };
  },
};
