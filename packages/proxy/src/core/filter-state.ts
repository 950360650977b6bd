import { isIP } from 'node:net';

/**
 * Envoy's filter state objects, as stored in `ConnInfo.filterState` (and per request): a string
 * value (what `serializeAsString` gives) plus how far it travels upstream. `String(obj)` is the value,
 * so a reader that only wants the text (RBAC's filter_state matcher, %FILTER_STATE%) needs nothing else.
 */
export type StreamSharing = 'NONE' | 'ONCE' | 'TRANSITIVE';

export class FilterStateObject {
  readonly value: string;
  readonly readOnly: boolean;
  /** ONCE: copied to the upstream connection only; TRANSITIVE: and on from there (Envoy's StreamSharing). */
  readonly shared: StreamSharing;
  constructor(value: string, shared: StreamSharing = 'NONE', readOnly = true) {
    this.value = value;
    this.shared = shared;
    this.readOnly = readOnly;
  }
  toString(): string { return this.value; }
}

export type FilterState = Map<string, unknown>;

/** istio.set_internal_dst_address: the CONNECT authority (connect_authority) and the tunnel port override. */
export class TunnelAuthority extends FilterStateObject {
  /** Port for the ORIGINAL_DST override (0: keep the authority's port). */
  readonly port: number;
  constructor(authority: string, port: number, shared: StreamSharing) {
    super(authority, shared, false);
    this.port = port;
  }
}

/** Well-known keys (Envoy's and Istio's). */
export const ORIGINAL_DST_ADDRESS_KEY = 'envoy.network.transport_socket.original_dst_address';
export const ORIGINAL_DST_LOCAL_IP_KEY = 'envoy.filters.listener.original_dst.local_ip';
export const ORIGINAL_DST_REMOTE_IP_KEY = 'envoy.filters.listener.original_dst.remote_ip';
export const PEER_PRINCIPAL_KEY = 'io.istio.peer_principal';
export const LOCAL_PRINCIPAL_KEY = 'io.istio.local_principal';
export const INTERNAL_DST_AUTHORITY_KEY = 'istio.set_internal_dst_address';

/** The string form of a filter state object, undefined when absent. */
export function filterStateString(fs: FilterState | undefined, key: string): string | undefined {
  const v = fs?.get(key);
  return v === undefined || v === null ? undefined : String(v);
}

/**
 * Sets `key` unless a read-only object is already there (Envoy refuses to overwrite those).
 * Returns false when it was refused.
 */
export function setFilterState(owner: { filterState: FilterState | undefined }, key: string, obj: unknown): boolean {
  const fs = owner.filterState ?? (owner.filterState = new Map());
  const existing = fs.get(key);
  if (existing instanceof FilterStateObject && existing.readOnly) return false;
  fs.set(key, obj);
  return true;
}

/**
 * The objects an upstream connection inherits (Envoy: shared with the upstream connection), as the
 * upstream side's own filter state: ONCE objects arrive unshared, TRANSITIVE ones stay shared.
 * Undefined when nothing is shared.
 */
export function sharedWithUpstream(...sources: Array<FilterState | undefined>): FilterState | undefined {
  let out: FilterState | undefined;
  for (const fs of sources) {
    if (!fs) continue;
    for (const [k, v] of fs) {
      if (!(v instanceof FilterStateObject) || v.shared === 'NONE') continue;
      out ??= new Map();
      out.set(k, v.shared === 'ONCE' ? unsharedCopy(v) : v);
    }
  }
  return out;
}

/**
 * A ONCE object as the upstream side holds it: the same kind of object (a peer stays a peer for
 * telemetry), no longer shared. Made once per object, so a long-lived object (a discovered peer)
 * yields one copy, not one per connection.
 */
const onceCopies = new WeakMap<FilterStateObject, FilterStateObject>();
function unsharedCopy(v: FilterStateObject): FilterStateObject {
  let c = onceCopies.get(v);
  if (!c) {
    c = Object.assign(Object.create(Object.getPrototypeOf(v) as object) as FilterStateObject, v, { shared: 'NONE' });
    onceCopies.set(v, c);
  }
  return c;
}

/** `ip:port` / `[v6]:port` as an address, undefined when it is not one. */
export function parseIpPort(v: string): { address: string; port: number } | undefined {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(v.trim());
  if (!m || isIP(m[1]) === 0) return undefined;
  const port = Number(m[2]);
  return port > 65535 ? undefined : { address: m[1], port };
}
