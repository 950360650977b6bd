import { TYPE_URL, type AnyBytes } from './discovery.ts';

type Json = Record<string, unknown>;

/** One resource as the handlers see it: decoded proto-JSON with its name and version. */
export interface XdsResource {
  readonly name: string;
  readonly version: string;
  readonly json: Json;
  /** The resource as it came over ADS (screening keeps it): CDS / EDS remember these bytes, not the JSON. */
  readonly any?: AnyBytes;
}

/**
 * One accepted response for one type. SotW responses are `full` for LDS/CDS (absent
 * resources are removed) and partial for EDS/RDS/SDS; Delta responses list removals.
 */
export interface XdsUpdate {
  readonly typeUrl: string;
  readonly version: string;
  readonly resources: readonly XdsResource[];
  readonly removed: readonly string[];
  readonly full: boolean;
  /**
   * In the response but refused before the handler (an Any that does not decode deep inside, a
   * duplicate name) or by the main thread (forwarded to --concurrency workers): the handler records
   * each as error_state, keeps what it has under that name, and never treats it as removed.
   */
  readonly refused?: readonly XdsRejection[];
}

/** A resource the handler refused: the NACK's error_detail lists these. */
export interface XdsRejection {
  readonly name: string;
  readonly message: string;
}

/** What the ADS client asks of the config layer. */
export interface XdsHandler {
  /**
   * Apply what is valid, keep the last good config for the rest, and say what was refused
   * (`update.refused` included). Resolves once new listeners are bound: the ACK waits for it.
   */
  apply(update: XdsUpdate): Promise<readonly XdsRejection[]>;
  /** The resource names to subscribe to for a type (LDS/CDS: wildcard). */
  interest(typeUrl: string): XdsInterest;
}

/** What the config layer wants of one type. */
export interface XdsInterest {
  readonly wildcard: boolean;
  readonly names: ReadonlySet<string>;
  /** When given, changes whenever `names` does: an unchanged revision spares comparing (EDS: one name per cluster). */
  readonly revision?: number;
}

/** Types in the order Envoy (re)subscribes on a new stream: clusters before endpoints, listeners before routes. */
export const SUBSCRIBE_ORDER: readonly string[] = [TYPE_URL.cluster, TYPE_URL.endpoint, TYPE_URL.listener, TYPE_URL.route, TYPE_URL.secret, TYPE_URL.extension, TYPE_URL.nameTable,
  // Workload discovery (the waypoint's bootstrap extension) and ztunnel's WDS (Delta only): subscribed only by a handler that asks for them.
  TYPE_URL.workload, TYPE_URL.address, TYPE_URL.authorization];

/** NDS sends one unnamed NameTable; this is the name it is tracked (and served) under. */
export const NAME_TABLE_RESOURCE = 'name-table';

/** Types whose SotW responses carry the whole state (absent = removed). */
export const SOTW_FULL_STATE: ReadonlySet<string> = new Set([TYPE_URL.listener, TYPE_URL.cluster, TYPE_URL.workload]);

/** Types served over Delta ADS only (ztunnel's WDS). */
export const DELTA_ONLY: ReadonlySet<string> = new Set([TYPE_URL.address, TYPE_URL.authorization]);

/**
 * The name a resource is known by: `cluster_name` for endpoints; for WDS, a workload's `uid`, a
 * service's `namespace/hostname` and a policy's `namespace/name` (istiod's keys); `name` for the rest.
 */
export function resourceName(typeUrl: string, json: Json): string {
  if (typeUrl === TYPE_URL.address) {
    const w = json.workload as Json | undefined;
    if (w) return typeof w.uid === 'string' ? w.uid : '';
    const s = json.service as Json | undefined;
    return s && typeof s.hostname === 'string' && s.hostname !== '' ? `${typeof s.namespace === 'string' ? s.namespace : ''}/${s.hostname}` : '';
  }
  if (typeUrl === TYPE_URL.nameTable) return NAME_TABLE_RESOURCE;
  if (typeUrl === TYPE_URL.workload) return typeof json.uid === 'string' ? json.uid : '';
  if (typeUrl === TYPE_URL.authorization) {
    return typeof json.name === 'string' && json.name !== '' ? `${typeof json.namespace === 'string' ? json.namespace : ''}/${json.name}` : '';
  }
  const v = typeUrl === TYPE_URL.endpoint ? json.cluster_name : json.name;
  return typeof v === 'string' ? v : '';
}

export function nackMessage(rejections: readonly XdsRejection[]): string {
  return rejections.map((r) => `${r.name}: ${r.message}`).join('\n');
}
