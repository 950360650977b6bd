/**
 * The inverse of decode.ts: proto-JSON (snake_case or lowerCamel field names,
 * {"@type"} Anys, "1.5s" Durations, plain-JSON Structs) to protobuf bytes wrapped
 * as an Any. Used by tests now and by the local control plane later.
 */
import type { Field, Type } from 'protobufjs';
import { ConfigError } from '../core/errors.ts';
import { isType, typeForUrl } from './protos.ts';
import { schemaForUrl } from '../config/schema-protobufjs.ts';
import { checkTypedStructValue, TYPED_STRUCT_TYPES, unknownFieldMessage, type UnknownField } from '../config/strict.ts';

type Json = Record<string, unknown>;

/** A resource that cannot be encoded: a ConfigError, so NACKs name the field path like config errors do. */
export class XdsEncodeError extends ConfigError {
  constructor(path: string, message: string) {
    super(path, message);
    this.name = 'XdsEncodeError';
  }
}

/** `{"@type": url, ...fields}` → `{type_url, value}`. */
export function encodeResource(json: Json, path = ''): { type_url: string; value: Uint8Array } {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new XdsEncodeError(path, 'expected an object with "@type"');
  const url = json['@type'];
  if (typeof url !== 'string' || url === '') throw new XdsEncodeError(path, 'missing "@type"');
  const type = typeForUrl(url);
  if (!type) throw new XdsEncodeError(path, `unknown type URL ${url}`);
  const body: unknown = VALUE_WKTS.has(fullName(type)) ? json.value : withoutType(json);
  const plain = jsonToPlain(type, body, path);
  // A TypedStruct's value is a free-form Struct on the wire: check its names against the named type here.
  if (TYPED_STRUCT_TYPES.has(fullName(type))) checkTypedStructValue(json, path, TYPED_STRUCT_CHECK);
  return { type_url: url, value: type.encode(type.fromObject(plain as Json)).finish() };
}

const VALUE_WKTS = new Set([
  'google.protobuf.Duration', 'google.protobuf.Timestamp', 'google.protobuf.FieldMask',
  'google.protobuf.Struct', 'google.protobuf.Value', 'google.protobuf.ListValue',
  'google.protobuf.DoubleValue', 'google.protobuf.FloatValue', 'google.protobuf.Int64Value',
  'google.protobuf.UInt64Value', 'google.protobuf.Int32Value', 'google.protobuf.UInt32Value',
  'google.protobuf.BoolValue', 'google.protobuf.StringValue', 'google.protobuf.BytesValue',
]);

function rejectUnknownName(f: UnknownField): never {
  throw new XdsEncodeError(f.path, unknownFieldMessage(f.typeName));
}
const TYPED_STRUCT_CHECK = { typeForUrl: schemaForUrl, onUnknown: rejectUnknownName };

function withoutType(json: Json): Json {
  const { '@type': _t, ...rest } = json;
  return rest;
}

function fullName(t: Type): string {
  return t.fullName.startsWith('.') ? t.fullName.slice(1) : t.fullName;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function fieldFor(type: Type, key: string): Field | undefined {
  const f = type.fields[key];
  if (f) return f;
  for (const g of type.fieldsArray) if (g.name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()) === key) return g;
  return undefined;
}

/** proto-JSON → the plain object shape protobufjs `Type.fromObject` accepts. */
function jsonToPlain(type: Type, json: unknown, path: string): unknown {
  switch (fullName(type)) {
    case 'google.protobuf.Any':
      // An empty Any (`{}`, as istiod writes an unset Wasm configuration) has no type.
      if (json !== null && typeof json === 'object' && Object.keys(json).length === 0) return { type_url: '', value: new Uint8Array(0) };
      return encodeResource(json as Json, path);
    case 'google.protobuf.Duration':
      return parseDuration(json, path);
    case 'google.protobuf.Timestamp': {
      const ms = Date.parse(String(json));
      if (Number.isNaN(ms)) throw new XdsEncodeError(path, `bad timestamp ${JSON.stringify(json)}`);
      const frac = /\.(\d+)/.exec(String(json))?.[1] ?? '';
      return { seconds: String(Math.floor(ms / 1000)), nanos: Number(frac.padEnd(9, '0').slice(0, 9)) };
    }
    case 'google.protobuf.FieldMask':
      return { paths: String(json).split(',').filter((p) => p !== '').map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)) };
    case 'google.protobuf.Struct':
      return structToPlain(json, path);
    case 'google.protobuf.Value':
      return valueToPlain(json, path);
    case 'google.protobuf.ListValue':
      return { values: (json as unknown[]).map((v, i) => valueToPlain(v, `${path}[${i}]`)) };
    case 'google.protobuf.DoubleValue': case 'google.protobuf.FloatValue':
    case 'google.protobuf.Int64Value': case 'google.protobuf.UInt64Value':
    case 'google.protobuf.Int32Value': case 'google.protobuf.UInt32Value':
    case 'google.protobuf.BoolValue': case 'google.protobuf.StringValue':
    case 'google.protobuf.BytesValue': {
      // Accept both the JSON form (a plain value) and the message form ({value}).
      const v = json !== null && typeof json === 'object' && !Array.isArray(json) && !(json instanceof Uint8Array) ? (json as Json).value : json;
      return { value: scalarToPlain(v) };
    }
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new XdsEncodeError(path, `expected an object for ${fullName(type)}`);
  }
  const out: Json = {};
  for (const [key, v] of Object.entries(json as Json)) {
    if (v === null || v === undefined) continue;
    const f = fieldFor(type, key);
    if (!f) throw new XdsEncodeError(join(path, key), `unknown field of ${fullName(type)}`);
    const fp = join(path, f.name);
    if (f.map) {
      const o: Json = {};
      for (const [k, x] of Object.entries(v as Json)) o[k] = singleToPlain(f, x, `${fp}[${JSON.stringify(k)}]`);
      out[f.name] = o;
    } else if (f.repeated) {
      if (!Array.isArray(v)) throw new XdsEncodeError(fp, 'expected an array');
      out[f.name] = v.map((x: unknown, i: number) => singleToPlain(f, x, `${fp}[${i}]`));
    } else {
      out[f.name] = singleToPlain(f, v, fp);
    }
  }
  return out;
}

function singleToPlain(f: Field, v: unknown, path: string): unknown {
  const rt = f.resolvedType;
  if (isType(rt)) return jsonToPlain(rt, v, path);
  return scalarToPlain(v);
}

function scalarToPlain(v: unknown): unknown {
  if (v === 'NaN') return NaN;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  return v;
}

function parseDuration(json: unknown, path: string): Json {
  const m = typeof json === 'string' ? /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(json) : null;
  if (!m) throw new XdsEncodeError(path, `bad duration ${JSON.stringify(json)}`);
  const sign = m[1] ? -1 : 1;
  const nanos = Number((m[3] ?? '').padEnd(9, '0'));
  return { seconds: `${m[1] ?? ''}${m[2]}`, nanos: sign * nanos };
}

function structToPlain(json: unknown, path: string): Json {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new XdsEncodeError(path, 'expected an object for google.protobuf.Struct');
  const fields: Json = {};
  for (const [k, v] of Object.entries(json as Json)) fields[k] = valueToPlain(v, join(path, k));
  return { fields };
}

/** protobufjs's bundled google.protobuf.Value uses lowerCamel field names (nullValue, ...). */
function valueToPlain(v: unknown, path: string): Json {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map((x: unknown, i: number) => valueToPlain(x, `${path}[${i}]`)) } };
  return { structValue: structToPlain(v, path) };
}

/** A proto-JSON value of message type `typeName` → the plain shape protobufjs `fromObject` takes. */
export function toPlainMessage(typeName: string, json: unknown, path = ''): Json {
  const type = typeForUrl(`type.googleapis.com/${typeName}`);
  if (!type) throw new XdsEncodeError(path, `unknown message type ${typeName}`);
  return jsonToPlain(type, json, path) as Json;
}

/** A plain JSON object as the protobufjs shape of a google.protobuf.Struct (for messages built in code). */
export function structPlain(json: Json): Json {
  return structToPlain(json, '');
}
