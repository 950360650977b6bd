/**
 * protobufjs keeps names, field type names and option values as substrings of the .proto text it
 * parsed, and V8 makes a substring of 13 or more characters a slice that points into its parent: one
 * `java_package` option kept the whole file alive (envoy/config/cluster/v3/cluster.proto: 139 KB).
 * A sidecar held 36 such texts, ~1 MB of heap for the process's life (issue 13). Every string of the
 * reflection objects gets storage of its own here, so the texts can be collected.
 */
import type { ReflectionObject } from 'protobufjs';

/** V8's shortest slice (SlicedString::kMinLength); shorter substrings are copies already. */
const MIN_SLICE = 13;

/** A string with storage of its own (V8 copies what it parses). */
export const ownCopy = (s: string): string => JSON.parse(JSON.stringify(s)) as string;

type Bag = Record<string, unknown>;

/** Strings in plain option data (`options`, `parsedOptions`, `valuesOptions`): objects and arrays. */
function ownData(data: unknown): void {
  if (data === null || typeof data !== 'object') return;
  const bag = data as Bag;
  for (const k of Object.keys(bag)) {
    const v = bag[k];
    if (typeof v === 'string') { if (v.length >= MIN_SLICE) bag[k] = ownCopy(v); }
    else ownData(v);
  }
}

/** Reflection children a parsed object holds (namespaces, types, services, enums). */
const CHILD_LISTS = ['nestedArray', 'fieldsArray', 'oneofsArray', 'methodsArray'] as const;
/** Plain data under a reflection object (`reserved`: names and ranges). */
const DATA_KEYS = new Set(['options', 'parsedOptions', 'valuesOptions', 'comments', 'reserved']);

/** Per reflection object walked: how many parsedOptions it had then (see ownProtoStrings). */
export type OwnedObjects = WeakMap<object, number>;

const optionCount = (bag: Bag): number => (Array.isArray(bag.parsedOptions) ? bag.parsedOptions.length : 0);

/**
 * Gives every string under `obj` (its own, its option data's, its children's) storage of its own.
 * A root is walked again after each load for what it gained: objects in `done` are not copied
 * again, except a namespace's options when a newly loaded file of the same package added some;
 * their children are visited.
 */
export function ownProtoStrings(obj: ReflectionObject, done: OwnedObjects): void {
  const bag = obj as unknown as Bag;
  const seen = done.get(obj);
  if (seen === undefined) {
    for (const k of Object.keys(bag)) {
      const v = bag[k];
      if (typeof v === 'string') { if (v.length >= MIN_SLICE) bag[k] = ownCopy(v); }
      else if (DATA_KEYS.has(k)) ownData(v);
    }
    done.set(obj, optionCount(bag));
  } else if (optionCount(bag) !== seen) {
    ownData(bag.options);
    ownData(bag.parsedOptions);
    done.set(obj, optionCount(bag));
  }
  for (const list of CHILD_LISTS) {
    // Getters: read only where the object has the backing store (a Type's fieldsArray, a Namespace's nested).
    if (!(list in obj)) continue;
    const children = bag[list];
    if (Array.isArray(children)) for (const c of children as ReflectionObject[]) ownProtoStrings(c, done);
  }
}
