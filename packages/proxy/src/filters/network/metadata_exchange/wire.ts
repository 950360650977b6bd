import { decodeAny, decodeStruct, encodeAny, encodeStruct, STRUCT_TYPE_URL, type JsonStruct } from '../../../telemetry/istio/struct-codec.ts';

/**
 * Istio's TCP metadata exchange wire format: an 8-byte header (magic 0x3D230467, then the payload
 * length, both 32-bit big-endian) followed by a google.protobuf.Any holding a Struct with
 * `x-envoy-peer-metadata` (the node metadata subset, a Struct) and `x-envoy-peer-metadata-id`.
 */
export const MX_MAGIC = 0x3d230467;
export const MX_HEADER_BYTES = 8;
const METADATA_KEY = 'x-envoy-peer-metadata';
const ID_KEY = 'x-envoy-peer-metadata-id';

export function encodeExchange(metadata: JsonStruct, id: string): Buffer {
  const data: JsonStruct = { [METADATA_KEY]: metadata };
  if (id) data[ID_KEY] = id;
  const any = encodeAny(STRUCT_TYPE_URL, encodeStruct(data));
  const out = Buffer.allocUnsafe(MX_HEADER_BYTES + any.length);
  out.writeUInt32BE(MX_MAGIC, 0);
  out.writeUInt32BE(any.length, 4);
  any.copy(out, MX_HEADER_BYTES);
  return out;
}

export type ReadResult =
  | { state: 'need-more' }
  | { state: 'bad-magic' }
  | { state: 'bad-payload'; consumed: number }
  | { state: 'done'; consumed: number; metadata: JsonStruct | undefined; id: string };

/** Reads one exchange from the start of `buf`. */
export function readExchange(buf: Buffer, maxBytes = 64 * 1024): ReadResult {
  if (buf.length < MX_HEADER_BYTES) return { state: 'need-more' };
  if (buf.readUInt32BE(0) !== MX_MAGIC) return { state: 'bad-magic' };
  const len = buf.readUInt32BE(4);
  if (len > maxBytes) return { state: 'bad-payload', consumed: 0 };
  if (buf.length < MX_HEADER_BYTES + len) return { state: 'need-more' };
  const consumed = MX_HEADER_BYTES + len;
  try {
    const any = decodeAny(buf.subarray(MX_HEADER_BYTES, consumed));
    if (any.typeUrl !== STRUCT_TYPE_URL) return { state: 'bad-payload', consumed };
    const s = decodeStruct(any.value);
    const md = s[METADATA_KEY];
    const id = s[ID_KEY];
    return {
      state: 'done', consumed,
      metadata: md !== null && typeof md === 'object' && !Array.isArray(md) ? md : undefined,
      id: typeof id === 'string' ? id : '',
    };
  } catch {
    return { state: 'bad-payload', consumed };
  }
}
