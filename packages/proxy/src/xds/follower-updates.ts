/**
 * What the main thread sends --concurrency workers after it applied a CDS or EDS update: only what
 * changed, compiled where the result can cross threads, in chunks made one at a time (the caller
 * yields between them) so that no postMessage (a structured clone on the main thread, which also
 * serves traffic) takes long.
 * - CDS: the clusters rebuilt and the names removed, never a whole SotW state again. Workers build
 *   their own Cluster objects: pools, sockets and TLS contexts (bound to the thread's secrets)
 *   cannot be cloned, so each thread compiles the cluster. What crosses is its proto-JSON as one
 *   JSON string, made as the config layer applies the cluster (in its time slices: stringified
 *   here all at once, 20,000 clusters were a 118 ms task): structured-cloning 20,000 clusters' objects (~40 each) took the main thread
 *   ~360 ms of CPU (JSON.stringify is about half of v8.serialize's cost); the worker parses it.
 *   Not the protobuf bytes: decoding them would make each worker load the whole proto root
 *   (~14 MB of heap per worker).
 * - EDS: the compiled endpoints of each assignment the main thread kept (plain data; a worker does
 *   not parse or validate it again), none for names no cluster uses.
 */
import type { DynamicConfig, CompiledAssignment } from './dynamic-config.ts';
import { TYPE_URL } from './type-urls.ts';
import type { XdsResource, XdsUpdate } from './types.ts';

type Json = Record<string, unknown>;

/** A resource on its way to a worker: with `text` (its JSON, stringified), `json` is left empty. */
export interface ForwardedResource extends XdsResource {
  readonly text?: string;
}

/** Resources per message: a few milliseconds of cloning on each side. */
export const FOLLOWER_CHUNK = 200;
const NO_JSON: Readonly<Record<string, unknown>> = Object.freeze({});

/** A cluster as the config layer records it for workers: never `any` (its bytes are a view into the whole response, which postMessage would copy whole). */
export function forwardedCluster(name: string, version: string, json: Json): ForwardedResource {
  return { name, version, json: NO_JSON, text: JSON.stringify(json) };
}

/** The CDS / EDS update `u` as workers should apply it, chunk by chunk (at least one: it also marks the type seen). */
export function* followerUpdates(u: XdsUpdate, dynamic: DynamicConfig): Generator<XdsUpdate> {
  if (u.typeUrl === TYPE_URL.cluster) {
    const change = dynamic.takeClusterChange();
    yield* chunked(u, change.rebuilt, change.removed);
    return;
  }
  // Kept by the main thread from this very update: send what it compiled.
  function* compiled(): Generator<CompiledAssignment> {
    for (const r of u.resources) {
      const endpoints = dynamic.lastEndpointsStored.get(r.name);
      if (endpoints && dynamic.eds.assignments.has(r.name)) yield { name: r.name, version: r.version, json: NO_JSON, endpoints };
    }
  }
  yield* chunked(u, compiled(), u.removed);
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

function* chunked(u: XdsUpdate, resources: Iterable<XdsResource>, removed: readonly string[]): Generator<XdsUpdate> {
  const part = (r: XdsResource[], gone: string[]): XdsUpdate => ({ typeUrl: u.typeUrl, version: u.version, resources: r, removed: gone, full: false });
  let any = false, batch: XdsResource[] = [];
  for (const r of resources) {
    batch.push(r);
    if (batch.length === FOLLOWER_CHUNK) { yield part(batch, []); any = true; batch = []; }
  }
  if (batch.length) { yield part(batch, []); any = true; }
  for (let i = 0; i < removed.length; i += FOLLOWER_CHUNK) { yield part([], removed.slice(i, i + FOLLOWER_CHUNK)); any = true; }
  if (!any) yield part([], []);
}
