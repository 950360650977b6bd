/**
 * Envoy's strict validation of proto-JSON (YAML/JSON bootstraps, TypedStruct values over xDS):
 * every field name at every level must exist in the message's proto descriptor. Walks nested
 * messages, repeated fields, maps, oneofs and google.protobuf.Any (by its "@type", TypedStruct
 * values by their type_url) so the error names the full path from the root:
 * `static_resources.clusters[0].conect_timeout: unknown field of envoy.config.cluster.v3.Cluster`.
 * Only names: fields that exist but Skua does not implement, values and shapes are the readers'
 * business ("is not supported", "expected a list"), so configs that load today keep their verdict.
 */
import { ConfigError } from '../core/errors.ts';

type Json = Record<string, unknown>;

export interface UnknownField {
  /** The full path of the unknown field, e.g. `static_resources.clusters[0].conect_timeout`. */
  readonly path: string;
  /** The message type it is not a field of. */
  readonly typeName: string;
  /** The object that has it, and its key there (so that a lenient caller can drop it). */
  readonly owner: Json;
  readonly key: string;
}

/** What the check needs of a message descriptor (config/proto-schema.ts, or protobufjs via schema-protobufjs.ts). */
export interface MessageSchema {
  /** `envoy.config.cluster.v3.Cluster` */
  readonly fullName: string;
  /** The field named `key` (proto name or lowerCamel JSON name), undefined when there is none. */
  field(key: string): FieldSchema | undefined;
}

export interface FieldSchema {
  /** The field's message type; null for scalars and enums (and types the descriptors do not have). */
  readonly message: MessageSchema | null;
  readonly map: boolean;
  readonly repeated: boolean;
}

export interface StrictCheck {
  /** The message type a type URL names (for Any and TypedStruct), or null when it is not known. */
  readonly typeForUrl: (typeUrl: string) => MessageSchema | null;
  /** Called for each unknown field: throw to reject, return to go on (warn and count). */
  readonly onUnknown: (field: UnknownField) => void;
}

/** What Envoy says about a field name the message does not have. */
export function unknownFieldMessage(typeName: string): string {
  return `unknown field of ${typeName}`;
}

/** `onUnknown` for strict (default) validation: the first unknown field is an error. */
export function rejectUnknown(field: UnknownField): never {
  throw new ConfigError(field.path, unknownFieldMessage(field.typeName));
}

/**
 * Fields real configs use that the descriptors @grpc/grpc-js-xds ships do not have, or have in
 * another shape: Envoy's own envoyproxy_io_proxy.yaml writes HCM `scheme_header_transformation`
 * as an enum with a sibling `scheme`. The readers check these fields themselves.
 */
const NEWER_FIELDS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager', new Set(['scheme_header_transformation', 'scheme'])],
]);

export const TYPED_STRUCT_TYPES: ReadonlySet<string> = new Set(['udpa.type.v1.TypedStruct', 'xds.type.v3.TypedStruct']);

/** Checks the field names of `json` as a `type` message (throws whatever onUnknown throws). */
export function checkMessage(type: MessageSchema, json: unknown, path: string, check: StrictCheck): void {
  checkValue(type, json, path, check, false);
}

/** A TypedStruct's `value` against the type its type_url names (unchecked when that type is unknown). */
export function checkTypedStructValue(typedStruct: Json, path: string, check: StrictCheck): void {
  const url = typedStruct.type_url ?? typedStruct.typeUrl;
  const value = typedStruct.value;
  if (typeof url !== 'string' || value === undefined || value === null) return;
  const inner = check.typeForUrl(url.includes('/') ? url : `type.googleapis.com/${url}`);
  if (inner) checkValue(inner, value, join(path, 'value'), check, false);
}

const WRAPPERS = new Set([
  'google.protobuf.DoubleValue', 'google.protobuf.FloatValue', 'google.protobuf.Int64Value',
  'google.protobuf.UInt64Value', 'google.protobuf.Int32Value', 'google.protobuf.UInt32Value',
  'google.protobuf.BoolValue', 'google.protobuf.StringValue', 'google.protobuf.BytesValue',
]);
/** Well-known types whose JSON form is not an object: inside an Any they sit under "value". */
const VALUE_WKTS = new Set([...WRAPPERS, 'google.protobuf.Duration', 'google.protobuf.Timestamp',
  'google.protobuf.FieldMask', 'google.protobuf.Struct', 'google.protobuf.Value', 'google.protobuf.ListValue']);
/** Free-form JSON: not checked by name. */
const FREE_FORM = new Set(['google.protobuf.Struct', 'google.protobuf.Value', 'google.protobuf.ListValue']);

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/**
 * `inAny`: the object is an Any's body, so its "@type" key is not a field. Only names are
 * checked: a value of another shape (a newer API's enum form, a single object for a repeated
 * field, which Envoy's JSON parser takes as a one-element list) is left to the readers, so
 * configs that load today keep their verdict.
 */
function checkValue(type: MessageSchema, json: unknown, path: string, check: StrictCheck, inAny: boolean): void {
  const name = type.fullName;
  if (name === 'google.protobuf.Any') { checkAny(json, path, check); return; }
  // Scalars in JSON form ("1.5s", wrappers as plain values) have no names to check; {seconds, nanos}
  // and {value} objects are checked like any message.
  if (FREE_FORM.has(name) || !isObject(json)) return;
  const newer = NEWER_FIELDS.get(name);
  for (const key of Object.keys(json)) {
    const v = json[key];
    if (v === null || v === undefined || (inAny && key === '@type') || newer?.has(key)) continue;
    const f = type.field(key);
    const fp = join(path, key);
    if (!f) { check.onUnknown({ path: fp, typeName: name, owner: json, key }); continue; }
    const rt = f.message;
    if (rt === null) continue; // scalars and enums: the readers check what they use
    if (f.map) {
      if (isObject(v)) for (const k of Object.keys(v)) checkValue(rt, v[k], `${fp}[${JSON.stringify(k)}]`, check, false);
    } else if (f.repeated && Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) checkValue(rt, v[i], `${fp}[${i}]`, check, false);
    } else {
      checkValue(rt, v, fp, check, false);
    }
  }
}

function checkAny(json: unknown, path: string, check: StrictCheck): void {
  if (!isObject(json) || typeof json['@type'] !== 'string') return;
  const type = check.typeForUrl(json['@type']);
  // A type this build has no descriptor for: the extension's reader refuses it by name.
  if (!type) return;
  const name = type.fullName;
  if (VALUE_WKTS.has(name)) {
    for (const k of Object.keys(json)) if (k !== '@type' && k !== 'value') check.onUnknown({ path: join(path, k), typeName: name, owner: json, key: k });
    return;
  }
  checkValue(type, json, path, check, true);
  if (TYPED_STRUCT_TYPES.has(name)) checkTypedStructValue(json, path, check);
}
