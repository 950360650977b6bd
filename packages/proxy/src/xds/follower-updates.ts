/**
 * What the main thread sends --concurrency workers after it applied a CDS or EDS update: only what
 * changed, compiled where the result can cross threads, in chunks so that no postMessage (a
 * structured clone on the main thread, which also serves traffic) takes long.
 * - CDS: the clusters rebuilt and the names removed, never a whole SotW state again. Workers build
 *   their own Cluster objects: pools, sockets and TLS contexts (bound to the thread's secrets)
 *   cannot be cloned, so each thread compiles the cluster. What crosses is its proto-JSON as one
 *   JSON string: structured-cloning 20,000 clusters' objects (~40 each) took the main thread
 *   ~360 ms of CPU (JSON.stringify is about half of v8.serialize's cost); the worker parses it.
 *   Not the protobuf bytes: decoding them would make each worker load the whole proto root
 *   (~14 MB of heap per worker).
 * - EDS: the compiled endpoints of each assignment the main thread kept (plain data; a worker does
 *   not parse or validate it again), none for names no cluster uses.
 */
import type { DynamicConfig, CompiledAssignment } from './dynamic-config.ts';
import { TYPE_URL } from './discovery.ts';
import type { XdsResource, XdsUpdate } from './types.ts';

type Json = Record<string, unknown>;

/** A resource on its way to a worker: with `text` (its JSON, stringified), `json` is left empty. */
interface ForwardedResource extends XdsResource {
  readonly text?: string;
}

/** Resources per message: a few milliseconds of cloning on each side. */
export const FOLLOWER_CHUNK = 200;
const NO_JSON: Readonly<Record<string, unknown>> = Object.freeze({});

/** The CDS / EDS update `u` as workers should apply it, in chunks (at least one: it also marks the type seen). */
export function followerUpdates(u: XdsUpdate, dynamic: DynamicConfig): XdsUpdate[] {
  if (u.typeUrl === TYPE_URL.cluster) {
    const change = dynamic.takeClusterChange();
    // Never `any` itself: its bytes are a view into the whole response, which postMessage would copy whole.
    const resources = change.rebuilt.map((r): ForwardedResource => ({ name: r.name, version: r.version, json: NO_JSON, text: JSON.stringify(r.json) }));
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

/** A cluster that crossed as JSON text: parsed on the worker, once, when the config layer reads it. */
class Forwarded implements XdsResource {
  readonly name: string;
  readonly version: string;
  private readonly text: string;
  private parsed: Json | undefined;

  constructor(name: string, version: string, text: string) {
    this.name = name;
    this.version = version;
    this.text = text;
  }

  get json(): Json {
    return (this.parsed ??= JSON.parse(this.text) as Json);
  }
}

/** On the worker: the update as the main thread sent it, resources that crossed as text ready to parse. */
export function receivedUpdate(u: XdsUpdate): XdsUpdate {
  if (!u.resources.some((r) => (r as ForwardedResource).text !== undefined)) return u;
  const resources = u.resources.map((r: ForwardedResource) => (r.text === undefined ? r : new Forwarded(r.name, r.version, r.text)));
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
