/**
 * What the ADS client checks in a response before the config layer sees it, with Envoy's rules:
 * - a resource whose Any has another type URL, or whose bytes do not decode as that type, refuses
 *   the whole response (Envoy's grpc_mux throws before any watch is called): nothing changes;
 * - a resource that decodes but holds an Any nothing here knows (deep in a filter's typed_config)
 *   is refused alone, by name: it keeps its last good version and is not treated as removed;
 * - Delta: a name twice among the resources, or in both resources and removed_resources, refuses
 *   the whole response; SotW: the first copy of a listener / cluster stands, later copies are refused
 *   ("duplicate listener x found"), and for the other types every copy is refused;
 * - only subscribed names of a non-wildcard subscription are applied; the rest is ignored.
 */
import { decodeResource } from './decode.ts';
import { TYPE_URL, type AnyBytes } from './discovery.ts';
import { typeForUrl } from './protos.ts';
import { readerOf } from './flat-reader.ts';
import { resourceName, type XdsRejection, type XdsResource } from './types.ts';
import { TimeSlice } from '../core/time-slice.ts';

type Json = Record<string, unknown>;

export interface ResponseItem {
  /** Delta: the Resource wrapper's name; SotW: none (read from the resource). */
  readonly name?: string;
  readonly version: string;
  readonly any: AnyBytes;
}

/** The response's resources, read one at a time (an array will do; the ADS client decodes each on `at`). */
export interface ResponseItems {
  readonly length: number;
  /** Undefined: nothing to screen (a Delta Resource wrapper without a resource). */
  at(i: number): ResponseItem | undefined;
}

export interface Screened {
  /** Decoded, subscribed resources for the config layer. */
  readonly resources: XdsResource[];
  /** Present in the response but refused alone: the config layer keeps their last good version. */
  readonly refused: XdsRejection[];
  /** Subscribed names the response removes. */
  readonly removed: string[];
  /** Set when the whole response is refused: the NACK's lines, and which of them name a resource. */
  readonly fatal: { readonly lines: XdsRejection[]; readonly named: XdsRejection[] } | undefined;
}

const KIND: Readonly<Record<string, string>> = {
  [TYPE_URL.listener]: 'listener', [TYPE_URL.cluster]: 'cluster', [TYPE_URL.route]: 'route configuration',
  [TYPE_URL.endpoint]: 'cluster load assignment', [TYPE_URL.secret]: 'secret', [TYPE_URL.extension]: 'extension config',
};

/** Envoy's words for a resource type in messages ("duplicate listener x found"). */
export function resourceKind(typeUrl: string): string {
  return KIND[typeUrl] ?? 'resource';
}

/**
 * Screens one response. `subscribed` says whether a name was asked for (undefined: a wildcard
 * subscription, every name is wanted); `full` marks SotW LDS/CDS, where absence means removal.
 * Decoding runs in time slices (20,000 clusters take seconds): the loop also serves traffic.
 */
export async function screenResponse(
  typeUrl: string, items: ResponseItems, removedNames: readonly string[],
  subscribed: ((name: string) => boolean) | undefined, opts: { readonly delta: boolean; readonly full: boolean },
): Promise<Screened> {
  const lines: XdsRejection[] = [];
  const named: XdsRejection[] = [];
  const decoded: Array<{ name: string; version: string; json: Json | undefined; any: AnyBytes; error?: string }> = [];
  const slice = new TimeSlice();
  for (let i = 0; i < items.length; i++) {
    if (slice.due) await slice.next();
    const it = items.at(i);
    if (!it) continue;
    const label = it.name || `resources[${i}]`;
    if (it.any.type_url !== typeUrl) {
      lines.push({ name: label, message: `type URL ${it.any.type_url || '(empty)'} does not match the message-wide type URL ${typeUrl}` });
      if (it.name) named.push(lines[lines.length - 1]);
      continue;
    }
    try {
      const json = decodeResource(it.any);
      const name = it.name || resourceName(typeUrl, json);
      if (name === '') throw new Error('resource has no name');
      decoded.push({ name, version: it.version, json, any: it.any });
    } catch (e) {
      // Decodes at its own level (a nested Any is unknown): refused alone, by name. Not at all: fatal.
      const top = decodeTop(typeUrl, it.any.value);
      const name = it.name || (top ? resourceName(typeUrl, top) : '');
      const message = (e as Error).message;
      if (top && name !== '') decoded.push({ name, version: it.version, json: undefined, any: it.any, error: message });
      else {
        lines.push({ name: label, message });
        if (it.name) named.push(lines[lines.length - 1]);
      }
    }
  }
  if (slice.due) await slice.next();
  if (opts.delta) await duplicatesInDelta(decoded.map((d) => d.name), removedNames, lines, named, slice);
  if (lines.length > 0) return { resources: [], refused: [], removed: [], fatal: { lines, named } };

  const resources: XdsResource[] = [];
  const refused: XdsRejection[] = [];
  // (Delta refused duplicates above; SotW lets the first copy of a listener / cluster stand.)
  const copies = opts.delta ? undefined : await countNames(decoded.map((d) => d.name), slice);
  const seen = new Set<string>();
  for (const d of decoded) {
    if (slice.due) await slice.next();
    if (subscribed && !subscribed(d.name)) continue;
    const first = !seen.has(d.name);
    seen.add(d.name);
    if (copies && (copies.get(d.name) ?? 0) > 1 && (!first || !opts.full)) {
      refused.push({ name: d.name, message: `duplicate ${resourceKind(typeUrl)} ${d.name} found` });
      continue;
    }
    if (d.json === undefined) refused.push({ name: d.name, message: d.error ?? 'cannot decode' });
    else resources.push({ name: d.name, version: d.version, json: d.json, any: d.any });
  }
  const removed = subscribed ? removedNames.filter((n) => subscribed(n)) : [...removedNames];
  return { resources, refused, removed, fatal: undefined };
}

/** Names are checked in batches between time-slice checks: 20,000 of them are a few ms. */
const NAME_BATCH = 1000;

async function countNames(names: readonly string[], slice: TimeSlice): Promise<Map<string, number>> {
  const m = new Map<string, number>();
  for (let i = 0; i < names.length; i++) {
    if (i % NAME_BATCH === 0 && slice.due) await slice.next();
    m.set(names[i], (m.get(names[i]) ?? 0) + 1);
  }
  return m;
}

async function duplicatesInDelta(added: readonly string[], removed: readonly string[], lines: XdsRejection[], named: XdsRejection[], slice: TimeSlice): Promise<void> {
  const names = new Set<string>();
  const refuse = (name: string, message: string): void => { lines.push({ name, message }); named.push({ name, message }); };
  for (let i = 0; i < added.length + removed.length; i++) {
    if (i % NAME_BATCH === 0 && slice.due) await slice.next();
    const n = i < added.length ? added[i] : removed[i - added.length];
    if (names.has(n)) refuse(n, i < added.length ? `duplicate name ${n} found among added/updated resources` : `duplicate name ${n} found in the union of added+removed resources`);
    names.add(n);
  }
}

/** The message decoded at its own level only (nested Anys stay bytes), or undefined when even that fails. */
function decodeTop(typeUrl: string, value: Uint8Array): Json | undefined {
  try {
    return typeForUrl(typeUrl)?.decode(readerOf(value)) as unknown as Json | undefined;
  } catch {
    return undefined;
  }
}
