/**
 * The xDS transport messages (envoy.service.discovery.v3): State-of-the-World and Delta
 * requests/responses to and from bytes, for both ends of an ADS stream. Resources stay
 * as Any bytes here; decode.ts turns them into proto-JSON.
 */
import type { Type } from 'protobufjs';
import { typeForUrl } from './protos.ts';
import { toPlainMessage } from './encode.ts';
import { messageToJson } from './decode.ts';
import { readerOf, utf8String } from './flat-reader.ts';
import { TimeSlice } from '../core/time-slice.ts';
import { splitRepeated, type FieldEntries } from './wire-split.ts';

export { TYPE_URL } from './type-urls.ts';

export const ADS_SERVICE = 'envoy.service.discovery.v3.AggregatedDiscoveryService';
export const SOTW_METHOD = `/${ADS_SERVICE}/StreamAggregatedResources`;
export const DELTA_METHOD = `/${ADS_SERVICE}/DeltaAggregatedResources`;

type Json = Record<string, unknown>;

export interface AnyBytes {
  readonly type_url: string;
  readonly value: Uint8Array;
}

/** google.rpc.Status as xDS uses it for NACKs (code 3 = INVALID_ARGUMENT). */
export interface RpcStatus {
  readonly code: number;
  readonly message: string;
}

export interface SotwRequest {
  readonly version_info: string;
  /** Proto-JSON envoy.config.core.v3.Node (first request only when set_node_on_first_message_only). */
  readonly node?: Json;
  readonly resource_names: readonly string[];
  readonly type_url: string;
  readonly response_nonce: string;
  readonly error_detail?: RpcStatus;
}

export interface SotwResponse {
  readonly version_info: string;
  readonly resources: readonly AnyBytes[];
  readonly type_url: string;
  readonly nonce: string;
}

export interface DeltaRequest {
  readonly node?: Json;
  readonly type_url: string;
  readonly resource_names_subscribe: readonly string[];
  readonly resource_names_unsubscribe: readonly string[];
  readonly initial_resource_versions: Readonly<Record<string, string>>;
  readonly response_nonce: string;
  readonly error_detail?: RpcStatus;
}

export interface DeltaResource {
  readonly name: string;
  readonly version: string;
  readonly resource: AnyBytes | undefined;
}

export interface DeltaResponse {
  readonly system_version_info: string;
  readonly resources: readonly DeltaResource[];
  readonly type_url: string;
  readonly nonce: string;
  readonly removed_resources: readonly string[];
}

const types = new Map<string, Type>();
function t(name: string): Type {
  let type = types.get(name);
  if (!type) {
    const found = typeForUrl(`type.googleapis.com/${name.includes('.') ? name : `envoy.service.discovery.v3.${name}`}`);
    if (!found) throw new Error(`xDS proto ${name} not loaded`);
    type = found;
    types.set(name, type);
  }
  return type;
}

function encode(name: string, plain: Json): Buffer {
  const type = t(name);
  const bytes = type.encode(type.fromObject(plain)).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function decode(name: string, bytes: Uint8Array): Json {
  return t(name).decode(readerOf(bytes)) as unknown as Json;
}

function nodePlain(node: Json | undefined): Json | undefined {
  return node ? toPlainMessage('envoy.config.core.v3.Node', node, 'node') : undefined;
}

function nodeJson(raw: unknown): Json | undefined {
  if (!raw) return undefined;
  const type = typeForUrl('type.googleapis.com/envoy.config.core.v3.Node');
  return type ? messageToJson(type, raw as Json, 'node') as Json : undefined;
}

function status(raw: unknown): RpcStatus | undefined {
  if (!raw) return undefined;
  const s = raw as { code?: number; message?: string };
  return { code: s.code ?? 0, message: s.message ?? '' };
}

function anyOf(raw: unknown): AnyBytes {
  const a = raw as { type_url?: string; value?: Uint8Array };
  return { type_url: a.type_url ?? '', value: a.value ?? new Uint8Array(0) };
}

export function encodeSotwRequest(r: SotwRequest): Buffer {
  return encode('DiscoveryRequest', { ...r, node: nodePlain(r.node), resource_names: [...r.resource_names] });
}

export function decodeSotwRequest(bytes: Uint8Array): SotwRequest {
  const m = decode('DiscoveryRequest', bytes) as Json & { resource_names?: string[] };
  return {
    version_info: String(m.version_info ?? ''), node: nodeJson(m.node), resource_names: m.resource_names ?? [],
    type_url: String(m.type_url ?? ''), response_nonce: String(m.response_nonce ?? ''), error_detail: status(m.error_detail),
  };
}

export function encodeSotwResponse(r: SotwResponse): Buffer {
  return encode('DiscoveryResponse', { version_info: r.version_info, resources: [...r.resources], type_url: r.type_url, nonce: r.nonce });
}

export function decodeSotwResponse(bytes: Uint8Array): SotwResponse {
  const m = decode('DiscoveryResponse', bytes) as Json & { resources?: unknown[] };
  return {
    version_info: String(m.version_info ?? ''), resources: (m.resources ?? []).map(anyOf),
    type_url: String(m.type_url ?? ''), nonce: String(m.nonce ?? ''),
  };
}

export function encodeDeltaRequest(r: DeltaRequest): Buffer {
  return encode('DeltaDiscoveryRequest', {
    ...r, node: nodePlain(r.node), resource_names_subscribe: [...r.resource_names_subscribe],
    resource_names_unsubscribe: [...r.resource_names_unsubscribe], initial_resource_versions: { ...r.initial_resource_versions },
  });
}

export function decodeDeltaRequest(bytes: Uint8Array): DeltaRequest {
  const m = decode('DeltaDiscoveryRequest', bytes) as Json & { resource_names_subscribe?: string[]; resource_names_unsubscribe?: string[] };
  return {
    node: nodeJson(m.node), type_url: String(m.type_url ?? ''),
    resource_names_subscribe: m.resource_names_subscribe ?? [], resource_names_unsubscribe: m.resource_names_unsubscribe ?? [],
    initial_resource_versions: (m.initial_resource_versions as Record<string, string> | undefined) ?? {},
    response_nonce: String(m.response_nonce ?? ''), error_detail: status(m.error_detail),
  };
}

export function encodeDeltaResponse(r: DeltaResponse): Buffer {
  return encode('DeltaDiscoveryResponse', {
    system_version_info: r.system_version_info, type_url: r.type_url, nonce: r.nonce, removed_resources: [...r.removed_resources],
    resources: r.resources.map((x) => ({ name: x.name, version: x.version, resource: x.resource })),
  });
}

export function decodeDeltaResponse(bytes: Uint8Array): DeltaResponse {
  const m = decode('DeltaDiscoveryResponse', bytes) as Json & { resources?: Json[]; removed_resources?: string[] };
  return {
    system_version_info: String(m.system_version_info ?? ''), type_url: String(m.type_url ?? ''), nonce: String(m.nonce ?? ''),
    removed_resources: m.removed_resources ?? [],
    resources: (m.resources ?? []).map((x) => ({ name: String(x.name ?? ''), version: String(x.version ?? ''), resource: x.resource ? anyOf(x.resource) : undefined })),
  };
}

/**
 * A response whose resources are still bytes (SotW: each an encoded Any; Delta: each an encoded
 * Resource): decodeAnyBytes / decodeDeltaResource read one at a time, so a 20,000-resource
 * response is never decoded in one task. Delta's removed_resources stay bytes too (a shrink from
 * 20,000 clusters names them all): removedNames reads them in time slices.
 */
export interface SplitResponse<R> {
  readonly response: R;
  readonly resources: FieldEntries;
  /** Delta: removed_resources (the response's own list is left empty). */
  readonly removed?: FieldEntries;
}

/** The resources field (2) of DiscoveryResponse and DeltaDiscoveryResponse. */
const RESOURCES_FIELD = 2;
/** DeltaDiscoveryResponse.removed_resources. */
const REMOVED_FIELD = 6;

export async function splitSotwResponse(bytes: Uint8Array, slice = new TimeSlice()): Promise<SplitResponse<SotwResponse>> {
  const { entries, rest } = await splitRepeated(bytes, RESOURCES_FIELD, slice);
  return { response: decodeSotwResponse(rest), resources: entries };
}

export async function splitDeltaResponse(bytes: Uint8Array, slice = new TimeSlice()): Promise<SplitResponse<DeltaResponse>> {
  const { entries, rest } = await splitRepeated(bytes, RESOURCES_FIELD, slice);
  const removed = await splitRepeated(rest, REMOVED_FIELD, slice);
  return { response: decodeDeltaResponse(removed.rest), resources: entries, removed: removed.entries };
}

/** Delta's removed_resources, decoded (as protobuf strings: valid UTF-8) in time slices. */
export async function removedNames(entries: FieldEntries | undefined, slice = new TimeSlice()): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < (entries?.length ?? 0); i++) {
    if (i % 1000 === 0 && slice.due) await slice.next();
    names.push(utf8String(entries!.at(i)));
  }
  return names;
}

export function decodeAnyBytes(bytes: Uint8Array): AnyBytes {
  return anyOf(decode('google.protobuf.Any', bytes));
}

export function decodeDeltaResource(bytes: Uint8Array): DeltaResource {
  const x = decode('Resource', bytes);
  return { name: String(x.name ?? ''), version: String(x.version ?? ''), resource: x.resource ? anyOf(x.resource) : undefined };
}
