/**
 * What the main thread sends --concurrency workers after it applied a CDS or EDS update: only what
 * changed, compiled where the result can cross threads, in chunks so that no postMessage (a
 * structured clone on the main thread, which also serves traffic) takes long.
 * - CDS: the clusters rebuilt and the names removed, never a whole SotW state again. Workers build
 *   their own Cluster objects: pools, sockets and TLS contexts (bound to the thread's secrets)
 *   cannot be cloned, so each thread decodes and compiles the cluster. What crosses is its protobuf
 *   bytes as one string: cloning 20,000 clusters' proto-JSON (~40 objects each) took the main
 *   thread ~360 ms of CPU; decoding them again is the worker's work.
 * - EDS: the compiled endpoints of each assignment the main thread kept (plain data; a worker does
 *   not parse or validate it again), none for names no cluster uses.
 */
import type { DynamicConfig, CompiledAssignment } from './dynamic-config.ts';
import { TYPE_URL, type AnyBytes } from './discovery.ts';
import { decodeAccepted } from './decode.ts';
import type { XdsResource, XdsUpdate } from './types.ts';

type Json = Record<string, unknown>;

/** A resource on its way to a worker: with `bytes` (latin1), its JSON is left out. */
interface ForwardedResource extends XdsResource {
  readonly bytes?: string;
}

/** Resources per message: a few milliseconds of cloning on each side. */
export const FOLLOWER_CHUNK = 200;
const NO_JSON: Readonly<Record<string, unknown>> = Object.freeze({});

/** The CDS / EDS update `u` as workers should apply it, in chunks (at least one: it also marks the type seen). */
export function followerUpdates(u: XdsUpdate, dynamic: DynamicConfig): XdsUpdate[] {
  if (u.typeUrl === TYPE_URL.cluster) {
    const change = dynamic.takeClusterChange();
    // Never `any` itself: its bytes are a view into the whole response, which postMessage would copy whole.
    const resources = change.rebuilt.map((r): ForwardedResource => (r.any
      ? { name: r.name, version: r.version, json: NO_JSON, bytes: Buffer.from(r.any.value.buffer, r.any.value.byteOffset, r.any.value.byteLength).toString('latin1') }
      : { name: r.name, version: r.version, json: r.json }));
    return chunked(u, resources, change.removed);
  }
  const compiled: CompiledAssignment[] = [];
  for (const r of u.resources) {
    const a = dynamic.eds.assignments.get(r.name);
    // Kept by the main thread from this very update: send what it compiled.
    if (a && dynamic.lastEndpointsStored.has(r.name)) compiled.push({ name: r.name, version: r.version, json: NO_JSON, endpoints: a.endpoints });
  }
  return chunked(u, compiled, u.removed);
}

/** A cluster that crossed as bytes: decoded on the worker, once, when the config layer reads it. */
class Forwarded implements XdsResource {
  readonly name: string;
  readonly version: string;
  readonly any: AnyBytes;
  private decoded: Json | undefined;

  constructor(typeUrl: string, name: string, version: string, bytes: string) {
    this.name = name;
    this.version = version;
    this.any = { type_url: typeUrl, value: Buffer.from(bytes, 'latin1') };
  }

  get json(): Json {
    // The main thread accepted it: unknown fields were counted there.
    return (this.decoded ??= decodeAccepted(this.any));
  }
}

/** On the worker: the update as the main thread sent it, with resources that crossed as bytes ready to decode. */
export function receivedUpdate(u: XdsUpdate): XdsUpdate {
  if (!u.resources.some((r) => (r as ForwardedResource).bytes !== undefined)) return u;
  const resources = u.resources.map((r: ForwardedResource) => (r.bytes === undefined ? r : new Forwarded(u.typeUrl, r.name, r.version, r.bytes)));
  return { ...u, resources };
}

function chunked(u: XdsUpdate, resources: readonly XdsResource[], removed: readonly string[]): XdsUpdate[] {
  const out: XdsUpdate[] = [];
  for (let i = 0; i < resources.length; i += FOLLOWER_CHUNK) {
    out.push({ typeUrl: u.typeUrl, version: u.version, resources: resources.slice(i, i + FOLLOWER_CHUNK), removed: [], full: false });
  }
  for (let i = 0; i < removed.length; i += FOLLOWER_CHUNK) {
    out.push({ typeUrl: u.typeUrl, version: u.version, resources: [], removed: removed.slice(i, i + FOLLOWER_CHUNK), full: false });
  }
  if (out.length === 0) out.push({ typeUrl: u.typeUrl, version: u.version, resources: [], removed: [], full: false });
  return out;
}
