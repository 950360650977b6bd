/**
 * Protobuf bytes straight to proto-JSON (the shape decode.ts documents), one pass over the wire with
 * the descriptors protobufjs loaded: no message objects in between. protobufjs's decode built a
 * message tree that toJson then walked into a second tree; for 20,000 clusters and their
 * assignments that first tree, its key lists and map entries were ~40% of everything a push
 * allocated. The rules are protobufjs's decoder's: a known field with another wire type is kept as
 * unknown, a later value of a non-repeated field wins, a repeated message field merges, implicit-
 * presence scalars at their default are left out, repeated scalars come packed or not.
 * Nested Anys and unknown fields go to the caller's hooks (type URLs, policy, paths: decode.ts).
 */
import type { Enum, Field, Type } from 'protobufjs';
import { isEnum, isType } from './protos.ts';
import { flatString } from './flat-reader.ts';
import { formatDuration, formatFieldMask, formatTimestamp, scalarToJson, shortestFloat32 } from './wkt-json.ts';

type Json = Record<string, unknown>;

/** Bytes that are not a message of the type (decode.ts reports it as "cannot decode <type URL>: ..."). */
export class WireError extends Error {}

export interface WireHooks {
  /** A google.protobuf.Any at `start..end` of the buffer, as proto-JSON. */
  any(typeUrl: string, buf: Buffer, start: number, end: number): Json;
  /** Entered / left around each message-valued field, list index and map key (decode.ts's path trail). */
  enter(key: string | number, kind: number): void;
  leave(): void;
  /** Field numbers a message had that its type does not know (or with another wire type). */
  unknown(type: Type, numbers: readonly number[]): void;
}

export const FIELD = 0, INDEX = 1, MAP_KEY = 2;

/** protoc's and protobufjs's default recursion limit. */
const MAX_DEPTH = 100;

// Scalar kinds, and the wire type each is written with.
const DOUBLE = 1, FLOAT = 2, INT32 = 3, UINT32 = 4, SINT32 = 5, FIXED32 = 6, SFIXED32 = 7, INT64 = 8, UINT64 = 9, SINT64 = 10,
  FIXED64 = 11, SFIXED64 = 12, BOOL = 13, STRING = 14, BYTES = 15, ENUM = 16, MESSAGE = 17;
const KIND: Readonly<Record<string, number>> = {
  double: DOUBLE, float: FLOAT, int32: INT32, uint32: UINT32, sint32: SINT32, fixed32: FIXED32, sfixed32: SFIXED32, int64: INT64,
  uint64: UINT64, sint64: SINT64, fixed64: FIXED64, sfixed64: SFIXED64, bool: BOOL, string: STRING, bytes: BYTES,
};
function wireTypeOf(kind: number): number {
  if (kind === DOUBLE || kind === FIXED64 || kind === SFIXED64) return 1;
  if (kind === FLOAT || kind === FIXED32 || kind === SFIXED32) return 5;
  if (kind === STRING || kind === BYTES || kind === MESSAGE) return 2;
  return 0;
}

interface FieldPlan {
  readonly field: Field;
  readonly name: string;
  readonly kind: number;
  readonly wire: number;
  readonly repeated: boolean;
  readonly map: boolean;
  readonly keyKind: number;
  readonly message: Type | undefined;
  readonly enumType: Enum | undefined;
  readonly presence: boolean;
  readonly verify: boolean;
  readonly typeDefault: unknown;
  /** google.protobuf.NullValue (prints as null). */
  readonly nullValue: boolean;
  /** A map field's key, read as a scalar field of its own. */
  readonly key: FieldPlan | undefined;
}

interface TypePlan {
  readonly fullName: string;
  readonly isAny: boolean;
  /** Printed in a JSON form of its own (google.protobuf.*). */
  readonly wellKnown: boolean;
  readonly fields: ReadonlyMap<number, FieldPlan>;
}

const plans = new WeakMap<Type, TypePlan>();

function planOf(type: Type): TypePlan {
  let plan = plans.get(type);
  if (plan) return plan;
  const fields = new Map<number, FieldPlan>();
  for (const f of type.fieldsArray) {
    f.resolve();
    const rt = f.resolvedType;
    const kind = isType(rt) ? MESSAGE : isEnum(rt) ? ENUM : KIND[f.type];
    const features = (f as unknown as { _features: { utf8_validation?: string } })._features;
    const keyType = (f as unknown as { keyType?: string }).keyType;
    const base = {
      field: f, name: f.name, repeated: f.repeated, map: f.map, presence: f.hasPresence,
      verify: features.utf8_validation === 'VERIFY', typeDefault: f.typeDefault,
    };
    const key = keyType ? { ...base, kind: KIND[keyType], wire: wireTypeOf(KIND[keyType]), keyKind: 0, message: undefined, enumType: undefined, nullValue: false, key: undefined } : undefined;
    fields.set(f.id, {
      ...base, kind, wire: wireTypeOf(kind), keyKind: keyType ? KIND[keyType] : 0, key,
      message: isType(rt) ? rt : undefined, enumType: isEnum(rt) ? rt : undefined,
      nullValue: isEnum(rt) && rt.fullName === '.google.protobuf.NullValue',
    });
  }
  const name = type.fullName.startsWith('.') ? type.fullName.slice(1) : type.fullName;
  plan = { fullName: name, isAny: name === 'google.protobuf.Any', wellKnown: name.startsWith('google.protobuf.'), fields };
  plans.set(type, plan);
  return plan;
}

// The cursor: one buffer at a time (a nested Any is a range of the same one; callers save and restore).
let buf: Buffer = Buffer.alloc(0);
let pos = 0;
/** The two halves of the last 64-bit varint / fixed64 read. */
let lo = 0, hi = 0;

function outOfRange(n: number): WireError {
  return new WireError(`index out of range: ${pos} + ${n} > ${buf.length}`);
}

/** A varint of up to 10 bytes into lo / hi. */
function varint64(end: number): void {
  lo = 0; hi = 0;
  for (let shift = 0; shift < 70; shift += 7) {
    if (pos >= end) throw outOfRange(1);
    const b = buf[pos++];
    if (shift < 28) lo |= (b & 0x7f) << shift;
    else if (shift === 28) { lo |= (b & 0x0f) << 28; hi |= (b & 0x7f) >> 4; }
    else hi |= (b & 0x7f) << (shift - 32);
    if (b < 0x80) { lo >>>= 0; hi >>>= 0; return; }
  }
  throw new WireError(`invalid varint encoding at offset ${pos}`);
}

/** A varint's low 32 bits, unsigned. */
function uint32(end: number): number {
  varint64(end);
  return lo;
}

function fixed64(end: number): void {
  if (pos + 8 > end) throw outOfRange(8);
  lo = buf.readUInt32LE(pos); hi = buf.readUInt32LE(pos + 4);
  pos += 8;
}

/** lo / hi as a decimal string (what proto-JSON writes for 64-bit integers). */
function int64Text(signed: boolean): string {
  if (hi === 0) return String(lo);
  const v = (BigInt(hi) << 32n) | BigInt(lo);
  return String(signed ? BigInt.asIntN(64, v) : v);
}

function sint64Text(): string {
  const v = (BigInt(hi) << 32n) | BigInt(lo);
  return String((v >> 1n) ^ -(v & 1n));
}

/** One scalar (or enum) value as proto-JSON, and whether it is the type's default. */
let wasDefault = false;
function scalar(f: FieldPlan, end: number): unknown {
  switch (f.kind) {
    case STRING: {
      const n = uint32(end);
      if (pos + n > end) throw outOfRange(n);
      const s = f.verify ? flatString(buf, pos, pos + n) : buf.toString('utf8', pos, pos + n);
      pos += n;
      wasDefault = n === 0;
      return s;
    }
    case BYTES: {
      const n = uint32(end);
      if (pos + n > end) throw outOfRange(n);
      const s = buf.toString('base64', pos, pos + n);
      pos += n;
      wasDefault = n === 0;
      return s;
    }
    case BOOL: { varint64(end); const v = lo !== 0 || hi !== 0; wasDefault = !v; return v; }
    case INT32: { const v = uint32(end) | 0; wasDefault = v === 0; return v; }
    case UINT32: { const v = uint32(end); wasDefault = v === 0; return v; }
    case SINT32: { const v = uint32(end); const r = (v >>> 1) ^ -(v & 1); wasDefault = r === 0; return r; }
    case INT64: case UINT64: varint64(end); wasDefault = lo === 0 && hi === 0; return int64Text(f.kind === INT64);
    case SINT64: varint64(end); wasDefault = lo === 0 && hi === 0; return sint64Text();
    case FIXED64: case SFIXED64: fixed64(end); wasDefault = lo === 0 && hi === 0; return int64Text(f.kind === SFIXED64);
    case FIXED32: case SFIXED32: case FLOAT: {
      if (pos + 4 > end) throw outOfRange(4);
      const v = f.kind === FLOAT ? buf.readFloatLE(pos) : f.kind === FIXED32 ? buf.readUInt32LE(pos) : buf.readInt32LE(pos);
      pos += 4;
      wasDefault = Object.is(v, 0);
      return f.kind === FLOAT ? floatJson(v, true) : v;
    }
    case DOUBLE: {
      if (pos + 8 > end) throw outOfRange(8);
      const v = buf.readDoubleLE(pos);
      pos += 8;
      wasDefault = Object.is(v, 0);
      return floatJson(v, false);
    }
    case ENUM: {
      const n = uint32(end) | 0;
      wasDefault = n === f.typeDefault;
      return f.nullValue ? null : (f.enumType!.valuesById[n] ?? n);
    }
  }
  throw new WireError(`field ${f.name} has no scalar type`);
}

function floatJson(n: number, single: boolean): unknown {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return 'Infinity';
  if (n === -Infinity) return '-Infinity';
  return single ? shortestFloat32(n) : n;
}

function skip(wire: number, end: number, depth: number, number: number): void {
  if (wire === 0) varint64(end);
  else if (wire === 1) { if (pos + 8 > end) throw outOfRange(8); pos += 8; }
  else if (wire === 5) { if (pos + 4 > end) throw outOfRange(4); pos += 4; }
  else if (wire === 2) { const n = uint32(end); if (pos + n > end) throw outOfRange(n); pos += n; }
  else if (wire === 3) {
    if (depth > MAX_DEPTH) throw new WireError('max depth exceeded');
    for (;;) {
      const tag = uint32(end);
      const nested = tag >>> 3, w = tag & 7;
      if (nested === 0) throw new WireError('illegal tag: field number 0');
      if (w === 4) { if (nested !== number) throw new WireError('invalid end group tag'); return; }
      skip(w, end, depth + 1, nested);
    }
  } else throw new WireError(`invalid wire type ${wire} at offset ${pos}`);
}

/**
 * The message of `type` in buf[start, end) as proto-JSON (well-known types in their JSON forms).
 * `into`: the JSON of an earlier occurrence of the same field, which this one merges into.
 */
export function messageJson(type: Type, b: Buffer, start: number, end: number, hooks: WireHooks, into?: Json): unknown {
  const savedBuf = buf, savedPos = pos;
  buf = b;
  pos = start;
  try {
    return message(type, end, hooks, 0, into);
  } finally {
    buf = savedBuf;
    pos = savedPos;
  }
}

function message(type: Type, end: number, hooks: WireHooks, depth: number, into?: Json): unknown {
  if (depth > MAX_DEPTH) throw new WireError('max depth exceeded');
  const plan = planOf(type);
  if (plan.isAny) return anyMessage(type, end, hooks);
  const out: Json = into ?? {};
  let unknown: number[] | undefined;
  while (pos < end) {
    const tag = uint32(end);
    const number = tag >>> 3, wire = tag & 7;
    if (number === 0) throw new WireError('illegal tag: field number 0');
    const f = plan.fields.get(number);
    if (f === undefined || !fieldWire(f, wire)) {
      skip(wire, end, depth, number);
      (unknown ??= []).push(number);
      continue;
    }
    if (f.map) mapEntry(f, out, end, hooks, depth);
    else if (f.repeated) repeatedValue(f, wire, out, end, hooks, depth);
    else if (f.kind === MESSAGE) {
      const n = uint32(end);
      if (pos + n > end) throw outOfRange(n);
      const prior = out[f.name];
      hooks.enter(f.name, FIELD);
      out[f.name] = message(f.message!, pos + n, hooks, depth + 1, isPlainObject(prior) ? prior : undefined);
      hooks.leave();
    } else {
      const v = scalar(f, end);
      // Implicit presence: a default is not printed (and clears an earlier value, as protobufjs does).
      if (wasDefault && !f.presence) delete out[f.name];
      else out[f.name] = v;
    }
  }
  if (pos !== end) throw outOfRange(end - pos);
  if (unknown) hooks.unknown(type, unknown);
  return plan.wellKnown ? wellKnown(plan.fullName, type, out) : out;
}

function isPlainObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Whether `wire` is how field `f` is written (packed repeated scalars too). */
function fieldWire(f: FieldPlan, wire: number): boolean {
  if (f.map) return wire === 2;
  if (wire === f.wire) return true;
  return f.repeated && wire === 2 && f.wire !== 2;
}

function repeatedValue(f: FieldPlan, wire: number, out: Json, end: number, hooks: WireHooks, depth: number): void {
  let list = out[f.name] as unknown[] | undefined;
  if (list === undefined) out[f.name] = list = [];
  if (f.kind === MESSAGE) {
    const n = uint32(end);
    if (pos + n > end) throw outOfRange(n);
    hooks.enter(f.name, FIELD);
    hooks.enter(list.length, INDEX);
    list.push(message(f.message!, pos + n, hooks, depth + 1));
    hooks.leave();
    hooks.leave();
  } else if (wire === 2 && f.wire !== 2) {
    // Packed.
    const n = uint32(end);
    const stop = pos + n;
    if (stop > end) throw outOfRange(n);
    while (pos < stop) list.push(scalar(f, stop));
    if (list.length === 0) delete out[f.name];
  } else list.push(scalar(f, end));
}

function mapEntry(f: FieldPlan, out: Json, end: number, hooks: WireHooks, depth: number): void {
  const n = uint32(end);
  const stop = pos + n;
  if (stop > end) throw outOfRange(n);
  let o = out[f.name] as Json | undefined;
  if (o === undefined) out[f.name] = o = {};
  const keyPlan = f.key!;
  let key: unknown = f.keyKind === STRING ? '' : f.keyKind === BOOL ? false : 0;
  let value: unknown;
  let valueSeen = false;
  while (pos < stop) {
    const tag = uint32(stop);
    const number = tag >>> 3, wire = tag & 7;
    if (number === 1 && wire === keyPlan.wire) key = scalar(keyPlan, stop);
    else if (number === 2 && wire === f.wire) {
      if (f.kind === MESSAGE) {
        const len = uint32(stop);
        if (pos + len > stop) throw outOfRange(len);
        hooks.enter(f.name, FIELD);
        hooks.enter(String(key), MAP_KEY);
        value = message(f.message!, pos + len, hooks, depth + 1, isPlainObject(value) ? value : undefined);
        hooks.leave();
        hooks.leave();
      } else value = scalar(f, stop);
      valueSeen = true;
    } else skip(wire, stop, depth, number);
  }
  if (pos !== stop) throw outOfRange(stop - pos);
  const k = String(key);
  if (!valueSeen) value = f.kind === MESSAGE ? message(f.message!, pos, hooks, depth + 1) : scalarToJson(f.field, f.typeDefault);
  // A key named __proto__ is data, not the object's prototype.
  if (k === '__proto__') Object.defineProperty(o, k, { value, enumerable: true, writable: true, configurable: true });
  else o[k] = value;
}

function anyMessage(type: Type, end: number, hooks: WireHooks): Json {
  let typeUrl = '', valueStart = pos, valueEnd = pos;
  let unknown: number[] | undefined;
  while (pos < end) {
    const tag = uint32(end);
    const number = tag >>> 3, wire = tag & 7;
    if (number === 1 && wire === 2) {
      const n = uint32(end);
      if (pos + n > end) throw outOfRange(n);
      typeUrl = flatString(buf, pos, pos + n);
      pos += n;
    } else if (number === 2 && wire === 2) {
      const n = uint32(end);
      if (pos + n > end) throw outOfRange(n);
      valueStart = pos;
      valueEnd = pos += n;
    } else {
      if (number === 0) throw new WireError('illegal tag: field number 0');
      skip(wire, end, 0, number);
      (unknown ??= []).push(number);
    }
  }
  if (unknown) hooks.unknown(type, unknown);
  const savedPos = pos;
  try {
    return hooks.any(typeUrl, buf, valueStart, valueEnd);
  } finally {
    pos = savedPos;
  }
}

/** The JSON forms of the well-known types, from their fields decoded as plain proto-JSON. */
function wellKnown(name: string, type: Type, m: Json): unknown {
  const byId = (id: number): unknown => m[type.fieldsById[id].name];
  switch (name) {
    case 'google.protobuf.Duration': return formatDuration(byId(1), byId(2));
    case 'google.protobuf.Timestamp': return formatTimestamp(byId(1), byId(2));
    case 'google.protobuf.FieldMask': return formatFieldMask(byId(1) as string[] | undefined);
    case 'google.protobuf.Struct': return (byId(1) as Json | undefined) ?? {};
    case 'google.protobuf.ListValue': return (byId(1) as unknown[] | undefined) ?? [];
    case 'google.protobuf.Value': {
      // One of null_value (already null), number, string, bool, struct, list.
      for (let id = 2; id <= 6; id++) { const v = byId(id); if (v !== undefined) return v; }
      return null;
    }
    case 'google.protobuf.DoubleValue': case 'google.protobuf.FloatValue':
    case 'google.protobuf.Int64Value': case 'google.protobuf.UInt64Value':
    case 'google.protobuf.Int32Value': case 'google.protobuf.UInt32Value':
    case 'google.protobuf.BoolValue': case 'google.protobuf.StringValue':
    case 'google.protobuf.BytesValue': {
      const f = type.fieldsById[1];
      return byId(1) ?? scalarToJson(f, f.typeDefault);
    }
    default: return m;
  }
}
