/**
 * The two ADS wire protocols over one aggregated stream, as state machines that take
 * response bytes and produce request bytes. Versions and nonces live in `TypeState`,
 * which survives reconnects (a new stream resumes from the last accepted versions).
 */
import { decodeResource } from './decode.ts';
import {
  decodeDeltaResponse, decodeSotwResponse, encodeDeltaRequest, encodeSotwRequest, type AnyBytes,
} from './discovery.ts';
import { nackMessage, resourceName, SOTW_FULL_STATE, SUBSCRIBE_ORDER, type XdsHandler, type XdsResource, type XdsRejection } from './types.ts';

type Json = Record<string, unknown>;
const INVALID_ARGUMENT = 3;

/** What the client remembers per type across streams. */
export interface TypeState {
  /** SotW: the last accepted version_info. */
  version: string;
  /** Delta: accepted resource versions by name. */
  readonly versions: Map<string, string>;
  /** The names last sent as the subscription (to compute Delta subscribe/unsubscribe). */
  sent: Set<string>;
  sentWildcard: boolean;
  /** A subscription request went out on this stream. */
  started: boolean;
  nonce: string;
}

export function newTypeState(): TypeState {
  return { version: '', versions: new Map(), sent: new Set(), sentWildcard: false, started: false, nonce: '' };
}

/** Counters the client publishes as Envoy's control_plane / xDS stats. */
export interface ProtocolEvents {
  accepted(typeUrl: string, version: string): void;
  rejected(typeUrl: string, version: string, message: string): void;
}

export interface AdsProtocol {
  /** The first requests on a new stream (node on the first one). */
  open(): Buffer[];
  /** A response arrived: apply it and return the ACK/NACK plus any follow-up subscription changes. */
  onResponse(bytes: Buffer): Buffer[];
  /** Re-evaluate subscriptions (a handler's interest changed): requests to send now. */
  resubscribe(): Buffer[];
}

function decodeAll(typeUrl: string, items: ReadonlyArray<{ name?: string; version: string; any: AnyBytes }>, rejections: XdsRejection[]): XdsResource[] {
  const out: XdsResource[] = [];
  for (const [i, it] of items.entries()) {
    try {
      if (it.any.type_url !== typeUrl) throw new Error(`resource type ${it.any.type_url} does not match the response type ${typeUrl}`);
      const json = decodeResource(it.any) as Json;
      const name = it.name || resourceName(typeUrl, json);
      if (name === '') throw new Error('resource has no name');
      out.push({ name, version: it.version, json });
    } catch (e) {
      rejections.push({ name: it.name || `resources[${i}]`, message: (e as Error).message });
    }
  }
  return out;
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

  open(): Buffer[] {
    return this.resubscribe();
  }

  abstract resubscribe(): Buffer[];
}

export class SotwProtocol extends ProtocolBase implements AdsProtocol {
  private request(typeUrl: string, s: TypeState, names: readonly string[], error?: string): Buffer {
    return encodeSotwRequest({
      version_info: s.version, node: this.nodeOnce(), resource_names: names, type_url: typeUrl, response_nonce: s.nonce,
      error_detail: error === undefined ? undefined : { code: INVALID_ARGUMENT, message: error },
    });
  }

  resubscribe(): Buffer[] {
    const out: Buffer[] = [];
    for (const typeUrl of SUBSCRIBE_ORDER) {
      const want = this.handler.interest(typeUrl);
      const s = this.stateOf(typeUrl);
      if (!want.wildcard && want.names.size === 0 && !s.started) continue;
      if (s.started && want.wildcard === s.sentWildcard && sameSet(want.names, s.sent)) continue;
      s.started = true;
      s.sentWildcard = want.wildcard;
      s.sent = new Set(want.names);
      out.push(this.request(typeUrl, s, want.wildcard ? [] : [...want.names]));
    }
    return out;
  }

  onResponse(bytes: Buffer): Buffer[] {
    const r = decodeSotwResponse(bytes);
    const s = this.stateOf(r.type_url);
    s.nonce = r.nonce;
    const rejections: XdsRejection[] = [];
    const resources = decodeAll(r.type_url, r.resources.map((any) => ({ version: r.version_info, any })), rejections);
    rejections.push(...this.handler.apply({ typeUrl: r.type_url, version: r.version_info, resources, removed: [], full: SOTW_FULL_STATE.has(r.type_url) }));
    let error: string | undefined;
    if (rejections.length === 0) { s.version = r.version_info; this.events.accepted(r.type_url, r.version_info); }
    else { error = nackMessage(rejections); this.events.rejected(r.type_url, r.version_info, error); }
    const names = s.sentWildcard ? [] : [...s.sent];
    return [this.request(r.type_url, s, names, error), ...this.resubscribe()];
  }
}

export class DeltaProtocol extends ProtocolBase implements AdsProtocol {
  resubscribe(): Buffer[] {
    const out: Buffer[] = [];
    for (const typeUrl of SUBSCRIBE_ORDER) {
      const want = this.handler.interest(typeUrl);
      const s = this.stateOf(typeUrl);
      if (!s.started) {
        if (!want.wildcard && want.names.size === 0) continue;
        s.started = true;
        s.sentWildcard = want.wildcard;
        s.sent = new Set(want.names);
        out.push(encodeDeltaRequest({
          node: this.nodeOnce(), type_url: typeUrl,
          resource_names_subscribe: want.wildcard ? [] : [...want.names], resource_names_unsubscribe: [],
          initial_resource_versions: Object.fromEntries(s.versions), response_nonce: '',
        }));
        continue;
      }
      if (want.wildcard) continue;
      const subscribe = [...want.names].filter((n) => !s.sent.has(n));
      const unsubscribe = [...s.sent].filter((n) => !want.names.has(n));
      if (subscribe.length === 0 && unsubscribe.length === 0) continue;
      s.sent = new Set(want.names);
      for (const n of unsubscribe) s.versions.delete(n);
      out.push(encodeDeltaRequest({
        node: this.nodeOnce(), type_url: typeUrl, resource_names_subscribe: subscribe, resource_names_unsubscribe: unsubscribe,
        initial_resource_versions: {}, response_nonce: '',
      }));
    }
    return out;
  }

  onResponse(bytes: Buffer): Buffer[] {
    const r = decodeDeltaResponse(bytes);
    const s = this.stateOf(r.type_url);
    const rejections: XdsRejection[] = [];
    const items = r.resources.filter((x) => x.resource !== undefined).map((x) => ({ name: x.name, version: x.version, any: x.resource as AnyBytes }));
    const resources = decodeAll(r.type_url, items, rejections);
    rejections.push(...this.handler.apply({ typeUrl: r.type_url, version: r.system_version_info, resources, removed: r.removed_resources, full: false }));
    const refused = new Set(rejections.map((x) => x.name));
    for (const res of resources) if (!refused.has(res.name)) s.versions.set(res.name, res.version);
    for (const n of r.removed_resources) s.versions.delete(n);
    let error: string | undefined;
    if (rejections.length === 0) this.events.accepted(r.type_url, r.system_version_info);
    else { error = nackMessage(rejections); this.events.rejected(r.type_url, r.system_version_info, error); }
    const ack = encodeDeltaRequest({
      type_url: r.type_url, resource_names_subscribe: [], resource_names_unsubscribe: [], initial_resource_versions: {},
      response_nonce: r.nonce, error_detail: error === undefined ? undefined : { code: INVALID_ARGUMENT, message: error },
    });
    return [ack, ...this.resubscribe()];
  }
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}
