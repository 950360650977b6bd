import { localNode, type LocalNode } from '../../core/node.ts';
import { decodeStruct, encodeStruct, type JsonStruct, type JsonValue } from './struct-codec.ts';

/**
 * One side of a connection as Istio's telemetry sees it: the workload facts metadata exchange
 * carries (node metadata NAME, NAMESPACE, WORKLOAD_NAME, CLUSTER_ID, LABELS, ...). Immutable and
 * shared: peers are decoded once per distinct header value and reused by identity, so stats can
 * key their series caches on the object.
 */
export interface PeerInfo {
  readonly id: string;
  readonly name: string;
  readonly namespace: string;
  readonly workloadName: string;
  readonly clusterId: string;
  readonly meshId: string;
  readonly canonicalName: string;
  readonly canonicalRevision: string;
  readonly app: string;
  readonly version: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The exchanged metadata (the subset Istio sends), for attribute expressions. */
  readonly metadata: Readonly<JsonStruct>;
}

/** Filter state keys, as istio-proxy names them (the `wasm.` prefix of its Wasm-era state). */
export const DOWNSTREAM_PEER = 'wasm.downstream_peer';
export const UPSTREAM_PEER = 'wasm.upstream_peer';
export const DOWNSTREAM_PEER_ID = 'wasm.downstream_peer_id';
export const UPSTREAM_PEER_ID = 'wasm.upstream_peer_id';
/** Set when the exchange ran and found no peer metadata (istio-proxy's peer_unknown marker). */
export const PEER_UNKNOWN = 'wasm.envoy.wasm.metadata_exchange.peer_unknown';

/** The node metadata keys metadata exchange sends (istio-proxy's FlatNode fields). */
const STRING_KEYS = ['NAME', 'NAMESPACE', 'OWNER', 'WORKLOAD_NAME', 'ISTIO_VERSION', 'MESH_ID', 'CLUSTER_ID', 'APP_CONTAINERS'];
const MAP_KEYS = ['LABELS', 'PLATFORM_METADATA'];

/** The subset of node metadata that is exchanged: strings, and string-valued maps. */
export function exchangedSubset(metadata: Readonly<Record<string, unknown>>): JsonStruct {
  const out: JsonStruct = {};
  for (const k of STRING_KEYS) {
    const v = metadata[k];
    if (typeof v === 'string') out[k] = v;
    else if (k === 'APP_CONTAINERS' && Array.isArray(v)) out[k] = v.filter((x) => typeof x === 'string').join(',');
  }
  for (const k of MAP_KEYS) {
    const v = metadata[k];
    if (v === null || typeof v !== 'object' || Array.isArray(v)) continue;
    const m: JsonStruct = {};
    for (const [lk, lv] of Object.entries(v as Record<string, unknown>)) if (typeof lv === 'string') m[lk] = lv;
    out[k] = m;
  }
  return out;
}

function str(s: Readonly<JsonStruct>, key: string): string {
  const v = s[key];
  return typeof v === 'string' ? v : '';
}

export function peerFromMetadata(id: string, metadata: Readonly<JsonStruct>): PeerInfo {
  const raw = metadata.LABELS;
  const labels: Record<string, string> = {};
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
    for (const [k, v] of Object.entries(raw as Record<string, JsonValue>)) if (typeof v === 'string') labels[k] = v;
  }
  return {
    id,
    name: str(metadata, 'NAME'),
    namespace: str(metadata, 'NAMESPACE'),
    workloadName: str(metadata, 'WORKLOAD_NAME'),
    clusterId: str(metadata, 'CLUSTER_ID'),
    meshId: str(metadata, 'MESH_ID'),
    canonicalName: labels['service.istio.io/canonical-name'] ?? '',
    canonicalRevision: labels['service.istio.io/canonical-revision'] ?? '',
    app: labels.app ?? '',
    version: labels.version ?? '',
    labels,
    metadata,
  };
}

interface LocalExchange {
  readonly node: LocalNode;
  readonly peer: PeerInfo;
  /** x-envoy-peer-metadata: base64 of the serialized Struct. */
  readonly header: string;
  /** The serialized Struct, for the TCP exchange. */
  readonly struct: Buffer;
}

let local: LocalExchange | undefined;

/** This proxy as a peer (from the bootstrap node), recomputed only when the node changes. */
export function localExchange(): LocalExchange {
  const node = localNode();
  if (local && local.node === node) return local;
  const subset = exchangedSubset(node.metadata);
  const struct = encodeStruct(subset);
  local = { node, peer: peerFromMetadata(node.id, subset), header: struct.toString('base64'), struct };
  return local;
}

/**
 * Peers decoded from header values, bounded: a mesh has few distinct workloads, and each value is
 * decoded once. When full the oldest quarter goes (insertion order), as istio-proxy trims its cache.
 */
const MAX_PEERS = 1024;
/** By header value, then by peer id: no key is built per request (a value is ~0.5-1 KB of base64). */
const byHeader = new Map<string, Map<string, PeerInfo | null>>();
let cached = 0;

/** Decodes x-envoy-peer-metadata (base64 Struct); null when it does not parse. */
export function peerFromHeader(id: string, value: string): PeerInfo | null {
  let byId = byHeader.get(value);
  const hit = byId?.get(id);
  if (hit !== undefined) return hit;
  let peer: PeerInfo | null;
  try {
    peer = peerFromMetadata(id, decodeStruct(Buffer.from(value, 'base64')));
  } catch {
    peer = null;
  }
  if (cached >= MAX_PEERS) {
    let drop = MAX_PEERS >> 2;
    for (const [k, ids] of byHeader) { byHeader.delete(k); cached -= ids.size; drop -= ids.size; if (drop <= 0) break; }
    byId = byHeader.get(value);
  }
  if (!byId) { byId = new Map(); byHeader.set(value, byId); }
  byId.set(id, peer);
  cached++;
  return peer;
}
