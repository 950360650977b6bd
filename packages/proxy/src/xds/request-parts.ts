/**
 * Requests encoded a few thousand names at a time, between time slices: a subscription to 20,000
 * EDS names is a ~1 MB request, 20–30 ms to encode in one go. Protobuf merges concatenated
 * encodings of one message (repeated fields and map entries append; the scalars are in the first
 * part only), so the parts put together are the request.
 */
import { TimeSlice } from '../core/time-slice.ts';
import { encodeDeltaRequest, encodeSotwRequest, type DeltaRequest, type SotwRequest } from './discovery.ts';

/** A request as the wire protocol decided it; the client encodes it (encodeInParts). */
export type OutgoingRequest = { readonly delta: false; readonly request: SotwRequest } | { readonly delta: true; readonly request: DeltaRequest };

const NAMES_PER_PART = 2000;

function* parts<T>(list: readonly T[]): Generator<T[]> {
  for (let i = 0; i < list.length; i += NAMES_PER_PART) yield list.slice(i, i + NAMES_PER_PART);
}

const NO_SOTW: SotwRequest = { version_info: '', resource_names: [], type_url: '', response_nonce: '' };
const NO_DELTA: DeltaRequest = { type_url: '', resource_names_subscribe: [], resource_names_unsubscribe: [], initial_resource_versions: {}, response_nonce: '' };

export async function encodeInParts(out: OutgoingRequest, slice = new TimeSlice()): Promise<Buffer> {
  if (!out.delta) {
    const r = out.request;
    if (r.resource_names.length <= NAMES_PER_PART) return encodeSotwRequest(r);
    const encoded = [encodeSotwRequest({ ...r, resource_names: [] })];
    for (const names of parts(r.resource_names)) {
      if (slice.due) await slice.next();
      encoded.push(encodeSotwRequest({ ...NO_SOTW, resource_names: names }));
    }
    return Buffer.concat(encoded);
  }
  const r = out.request;
  const versions = Object.entries(r.initial_resource_versions);
  if (r.resource_names_subscribe.length + r.resource_names_unsubscribe.length + versions.length <= NAMES_PER_PART) return encodeDeltaRequest(r);
  const encoded = [encodeDeltaRequest({ ...r, resource_names_subscribe: [], resource_names_unsubscribe: [], initial_resource_versions: {} })];
  const add = async (part: Partial<DeltaRequest>): Promise<void> => {
    if (slice.due) await slice.next();
    encoded.push(encodeDeltaRequest({ ...NO_DELTA, ...part }));
  };
  for (const names of parts(r.resource_names_subscribe)) await add({ resource_names_subscribe: names });
  for (const names of parts(r.resource_names_unsubscribe)) await add({ resource_names_unsubscribe: names });
  for (const entries of parts(versions)) await add({ initial_resource_versions: Object.fromEntries(entries) });
  return Buffer.concat(encoded);
}
