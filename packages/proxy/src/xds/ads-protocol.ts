/**
 * The two ADS wire protocols over one aggregated stream, as state machines that take
 * response bytes and produce request bytes. Versions and nonces live in `TypeState`,
 * which survives reconnects (a new stream resumes from the last accepted versions).
 */
import { decodeAnyBytes, decodeDeltaResource, removedNames, splitDeltaResponse, splitSotwResponse } from './discovery.ts';
import type { OutgoingRequest } from './request-parts.ts';
import type { FieldEntries } from './wire-split.ts';
import { screenResponse, type ResponseItem, type ResponseItems, type Screened } from './screen.ts';
import { nackMessage, SOTW_FULL_STATE, SUBSCRIBE_ORDER, type XdsHandler, type XdsInterest, type XdsRejection } from './types.ts';
import { log } from '../core/log.ts';
import { eachSliced, TimeSlice } from '../core/time-slice.ts';

type Json = Record<string, unknown>;
const INVALID_ARGUMENT = 3;

/** Bytes that are not a DiscoveryResponse at all: the client resets the stream (Envoy's gRPC client closes it, INTERNAL). */
export class MalformedResponse extends Error {}

function parse<T>(decode: (bytes: Uint8Array) => T, bytes: Uint8Array, what: string): T {
  try {
    return decode(bytes);
  } catch (e) {
    if (e instanceof MalformedResponse) throw e;
    throw new MalformedResponse(`cannot decode a ${what} (${bytes.length} bytes): ${(e as Error).message}`);
  }
}

async function parseAsync<T>(decoding: Promise<T>, what: string): Promise<T> {
  try {
    return await decoding;
  } catch (e) {
    if (e instanceof MalformedResponse) throw e;
    throw new MalformedResponse(`cannot decode a ${what}: ${(e as Error).message}`);
  }
}

/** A response's resources, each decoded when screening reaches it (bytes that do not decode reset the stream). */
function lazyItems(entries: FieldEntries, what: string, item: (bytes: Uint8Array) => ResponseItem | undefined): ResponseItems {
  return { length: entries.length, at: (i) => parse(item, entries.at(i), what) };
}

/** What the client remembers per type across streams. */
export interface TypeState {
  /** SotW: the last accepted version_info. */
  version: string;
  /** Delta: accepted resource versions by name. */
  readonly versions: Map<string, string>;
  /** The names last sent as the subscription (to compute Delta subscribe/unsubscribe). */
  sent: Set<string>;
  sentWildcard: boolean;
  /** The interest revision `sent` was taken from (see XdsInterest.revision). */
  revision: number | undefined;
  /** A subscription request went out on this stream. */
  started: boolean;
  nonce: string;
}

export function newTypeState(): TypeState {
  return { version: '', versions: new Map(), sent: new Set(), sentWildcard: false, revision: undefined, started: false, nonce: '' };
}

/** Counters the client publishes as Envoy's control_plane / xDS stats. */
export interface ProtocolEvents {
  accepted(typeUrl: string, version: string): void;
  rejected(typeUrl: string, version: string, message: string): void;
}

/**
 * Requests come out unencoded: the client encodes them in time slices (request-parts.ts). Name
 * sets are compared and copied in time slices too: EDS subscribes to one name per cluster.
 */
export interface AdsProtocol {
  /** The first requests on a new stream (node on the first one). */
  open(): Promise<OutgoingRequest[]>;
  /**
   * A response arrived: apply it and return the ACK/NACK plus any follow-up subscription changes.
   * Throws MalformedResponse for bytes that are not a response (the stream is then reset).
   */
  onResponse(bytes: Buffer): Promise<OutgoingRequest[]>;
  /** Re-evaluate subscriptions (a handler's interest changed): requests to send now. */
  resubscribe(): Promise<OutgoingRequest[]>;
}

/** What both wire protocols share: the handler, per-type state, and the node sent once per stream. */
abstract class ProtocolBase {
  protected readonly handler: XdsHandler;
  protected readonly states: Map<string, TypeState>;
  protected readonly events: ProtocolEvents;
  private readonly node: Json;
  private nodeSent = false;

  constructor(handler: XdsHandler, states: Map<string, TypeState>, node: Json, events: ProtocolEvents) {
    this.handler = handler;
    this.states = states;
    this.node = node;
    this.events = events;
    // A new stream: nothing is subscribed on it yet, and old nonces mean nothing.
    for (const s of states.values()) { s.started = false; s.nonce = ''; }
  }

  /** The node goes on the first request of each stream only (set_node_on_first_message_only). */
  protected nodeOnce(): Json | undefined {
    const node = this.nodeSent ? undefined : this.node;
    this.nodeSent = true;
    return node;
  }

  protected stateOf(typeUrl: string): TypeState {
    let s = this.states.get(typeUrl);
    if (!s) { s = newTypeState(); this.states.set(typeUrl, s); }
    return s;
  }

  open(): Promise<OutgoingRequest[]> {
    return this.resubscribe();
  }

  abstract resubscribe(): Promise<OutgoingRequest[]>;

  /** The type's subscription on this stream, or undefined (logged) when nothing of it was asked for. */
  protected subscription(typeUrl: string): TypeState | undefined {
    const s = this.states.get(typeUrl);
    if (s?.started) return s;
    // Envoy: "Ignoring the message for type URL ... as it has no current subscribers" (no ACK: an
    // empty-names request would subscribe to the wildcard).
    log.warn(`xDS: ignoring a response for ${typeUrl}: nothing of that type is subscribed`);
    return undefined;
  }

  /** Wanted names: every name for a wildcard subscription, else the names sent. */
  protected static wanted(s: TypeState): ((name: string) => boolean) | undefined {
    if (s.sentWildcard) return undefined;
    const names = s.sent;
    return (name) => names.has(name);
  }

  /**
   * Hands a screened response to the config layer; returns the NACK message (undefined: ACK) and
   * the names refused. A response refused whole changes nothing, but still ends an initial fetch
   * (Envoy's onConfigUpdateFailed) and shows its named resources as error_state.
   */
  protected async applyScreened(typeUrl: string, version: string, sc: Screened, full: boolean): Promise<{ error: string | undefined; refused: Set<string> }> {
    let rejections: readonly XdsRejection[];
    try {
      if (sc.fatal) {
        await this.handler.apply({ typeUrl, version, resources: [], removed: [], full: false, refused: sc.fatal.named });
        rejections = sc.fatal.lines;
      } else {
        rejections = await this.handler.apply({ typeUrl, version, resources: sc.resources, removed: sc.removed, full, refused: sc.refused });
      }
    } catch (e) {
      rejections = [{ name: typeUrl, message: `cannot apply the update: ${(e as Error).message}` }];
    }
    if (rejections.length === 0) { this.events.accepted(typeUrl, version); return { error: undefined, refused: new Set() }; }
    const error = nackMessage(rejections);
    this.events.rejected(typeUrl, version, error);
    return { error, refused: new Set(rejections.map((x) => x.name)) };
  }
}

export class SotwProtocol extends ProtocolBase implements AdsProtocol {
  private request(typeUrl: string, s: TypeState, names: readonly string[], error?: string): OutgoingRequest {
    return { delta: false, request: {
      version_info: s.version, node: this.nodeOnce(), resource_names: names, type_url: typeUrl, response_nonce: s.nonce,
      error_detail: error === undefined ? undefined : { code: INVALID_ARGUMENT, message: error },
    } };
  }

  async resubscribe(): Promise<OutgoingRequest[]> {
    const out: OutgoingRequest[] = [];
    const slice = new TimeSlice();
    for (const typeUrl of SUBSCRIBE_ORDER) {
      const want = this.handler.interest(typeUrl);
      const s = this.stateOf(typeUrl);
      if (!want.wildcard && want.names.size === 0 && !s.started) continue;
      if (s.started && want.wildcard === s.sentWildcard && await unchanged(want, s, slice)) continue;
      s.started = true;
      s.sentWildcard = want.wildcard;
      s.sent = await copied(want.names, slice);
      s.revision = want.revision;
      out.push(this.request(typeUrl, s, want.wildcard ? [] : [...s.sent]));
    }
    return out;
  }

  async onResponse(bytes: Buffer): Promise<OutgoingRequest[]> {
    const { response: r, resources } = await parseAsync(splitSotwResponse(bytes), `DiscoveryResponse (${bytes.length} bytes)`);
    const s = this.subscription(r.type_url);
    if (!s) return [];
    s.nonce = r.nonce;
    const full = SOTW_FULL_STATE.has(r.type_url);
    const items = lazyItems(resources, 'DiscoveryResponse resource', (b) => ({ version: r.version_info, any: decodeAnyBytes(b) }));
    const sc = await screenResponse(r.type_url, items, [], ProtocolBase.wanted(s), { delta: false, full });
    const { error } = await this.applyScreened(r.type_url, r.version_info, sc, full);
    // A NACK repeats the last accepted version (Envoy: the rejected version is never acknowledged).
    if (error === undefined) s.version = r.version_info;
    const names = s.sentWildcard ? [] : [...s.sent];
    return [this.request(r.type_url, s, names, error), ...await this.resubscribe()];
  }
}

export class DeltaProtocol extends ProtocolBase implements AdsProtocol {
  async resubscribe(): Promise<OutgoingRequest[]> {
    const out: OutgoingRequest[] = [];
    const slice = new TimeSlice();
    for (const typeUrl of SUBSCRIBE_ORDER) {
      const want = this.handler.interest(typeUrl);
      const s = this.stateOf(typeUrl);
      if (!s.started) {
        if (!want.wildcard && want.names.size === 0) continue;
        s.started = true;
        s.sentWildcard = want.wildcard;
        s.sent = await copied(want.names, slice);
        s.revision = want.revision;
        const versions: Record<string, string> = {};
        await eachSliced(s.versions, ([name, version]) => { versions[name] = version; }, slice);
        out.push({ delta: true, request: {
          node: this.nodeOnce(), type_url: typeUrl,
          resource_names_subscribe: want.wildcard ? [] : [...s.sent], resource_names_unsubscribe: [],
          initial_resource_versions: versions, response_nonce: '',
        } });
        continue;
      }
      if (want.wildcard || await unchanged(want, s, slice)) continue;
      const subscribe: string[] = [], unsubscribe: string[] = [];
      await eachSliced(want.names, (n) => { if (!s.sent.has(n)) subscribe.push(n); }, slice);
      await eachSliced(s.sent, (n) => { if (!want.names.has(n)) unsubscribe.push(n); }, slice);
      if (subscribe.length === 0 && unsubscribe.length === 0) continue;
      s.sent = await copied(want.names, slice);
      s.revision = want.revision;
      await eachSliced(unsubscribe, (n) => { s.versions.delete(n); }, slice);
      out.push({ delta: true, request: {
        node: this.nodeOnce(), type_url: typeUrl, resource_names_subscribe: subscribe, resource_names_unsubscribe: unsubscribe,
        initial_resource_versions: {}, response_nonce: '',
      } });
    }
    return out;
  }

  async onResponse(bytes: Buffer): Promise<OutgoingRequest[]> {
    const { response: r, resources, removed } = await parseAsync(splitDeltaResponse(bytes), `DeltaDiscoveryResponse (${bytes.length} bytes)`);
    const s = this.subscription(r.type_url);
    if (!s) return [];
    const removedResources = await parseAsync(removedNames(removed), 'DeltaDiscoveryResponse removed_resources');
    const items = lazyItems(resources, 'DeltaDiscoveryResponse resource', (b) => {
      const x = decodeDeltaResource(b);
      return x.resource ? { name: x.name, version: x.version, any: x.resource } : undefined;
    });
    const sc = await screenResponse(r.type_url, items, removedResources, ProtocolBase.wanted(s), { delta: true, full: false });
    const { error, refused } = await this.applyScreened(r.type_url, r.system_version_info, sc, false);
    const slice = new TimeSlice();
    await eachSliced(sc.resources, (res) => { if (!refused.has(res.name)) s.versions.set(res.name, res.version); }, slice);
    await eachSliced(sc.removed, (n) => { s.versions.delete(n); }, slice);
    const ack: OutgoingRequest = { delta: true, request: {
      type_url: r.type_url, resource_names_subscribe: [], resource_names_unsubscribe: [], initial_resource_versions: {},
      response_nonce: r.nonce, error_detail: error === undefined ? undefined : { code: INVALID_ARGUMENT, message: error },
    } };
    return [ack, ...await this.resubscribe()];
  }
}

/** The names wanted are the ones last sent: the same revision, or (no revision, or a new one) the same names. */
async function unchanged(want: XdsInterest, s: TypeState, slice: TimeSlice): Promise<boolean> {
  if (want.revision !== undefined && want.revision === s.revision) return true;
  if (!await sameSet(want.names, s.sent, slice)) return false;
  s.revision = want.revision;
  return true;
}

async function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>, slice: TimeSlice): Promise<boolean> {
  if (a.size !== b.size) return false;
  let same = true;
  await eachSliced(a, (x) => { if (!b.has(x)) same = false; }, slice);
  return same;
}

/** A copy of `names`, made between time slices. */
async function copied(names: ReadonlySet<string>, slice: TimeSlice): Promise<Set<string>> {
  const copy = new Set<string>();
  await eachSliced(names, (n) => { copy.add(n); }, slice);
  return copy;
}
