/**
 * istio.v1.auth.IstioCertificateService as a grpc-js service definition, with
 * protobufjs doing the (de)serialisation from Skua's own ca.proto. Shared by the
 * proxy's CA client and the local control plane's CA server.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import type { Type } from 'protobufjs';

export const CREATE_CERTIFICATE_PATH = '/istio.v1.auth.IstioCertificateService/CreateCertificate';

export interface CertificateRequest {
  readonly csr: string;
  /** Requested lifetime in seconds (0 = the CA's default). */
  readonly validityDuration: number;
  /** google.protobuf.Struct as plain JSON (e.g. ClusterID). */
  readonly metadata: Record<string, unknown>;
}

export interface CertificateResponse {
  /** PEM certificates: leaf first, root last. */
  readonly certChain: readonly string[];
}

let types: { req: Type; res: Type } | undefined;

function load(): { req: Type; res: Type } {
  if (types) return types;
  const file = join(dirname(fileURLToPath(import.meta.url)), '..', 'xds', 'proto', 'istio', 'security', 'v1alpha1', 'ca.proto');
  const root = new protobuf.Root().loadSync(file, { keepCase: true });
  root.resolveAll();
  types = { req: root.lookupType('istio.v1.auth.IstioCertificateRequest'), res: root.lookupType('istio.v1.auth.IstioCertificateResponse') };
  return types;
}

const TO_OBJECT = { longs: Number, defaults: true } as const;

export function encodeRequest(r: CertificateRequest): Buffer {
  const { req } = load();
  const msg = req.fromObject({ csr: r.csr, validity_duration: r.validityDuration, metadata: structFromJson(r.metadata) });
  return Buffer.from(req.encode(msg).finish());
}

export function decodeRequest(buf: Buffer): CertificateRequest {
  const { req } = load();
  const o = req.toObject(req.decode(buf), TO_OBJECT) as { csr?: string; validity_duration?: number; metadata?: StructJson };
  return { csr: o.csr ?? '', validityDuration: Number(o.validity_duration ?? 0), metadata: o.metadata ? jsonFromStruct(o.metadata) : {} };
}

export function encodeResponse(r: CertificateResponse): Buffer {
  const { res } = load();
  return Buffer.from(res.encode(res.fromObject({ cert_chain: [...r.certChain] })).finish());
}

export function decodeResponse(buf: Buffer): CertificateResponse {
  const { res } = load();
  const o = res.toObject(res.decode(buf), TO_OBJECT) as { cert_chain?: string[] };
  return { certChain: o.cert_chain ?? [] };
}

/** grpc-js ServiceDefinition (no proto-loader: the codec is above). */
export const CA_SERVICE = {
  CreateCertificate: {
    path: CREATE_CERTIFICATE_PATH,
    requestStream: false,
    responseStream: false,
    requestSerialize: encodeRequest,
    requestDeserialize: decodeRequest,
    responseSerialize: encodeResponse,
    responseDeserialize: decodeResponse,
    originalName: 'createCertificate',
  },
} as const;

// ---- google.protobuf.Struct <-> JSON (protobufjs keeps the wire shape) ----

// protobufjs predefines google.protobuf.Struct/Value with camelCase field names, whatever keepCase says.
interface ValueJson { nullValue?: number; numberValue?: number; stringValue?: string; boolValue?: boolean; structValue?: StructJson; listValue?: { values?: ValueJson[] } }
interface StructJson { fields?: Record<string, ValueJson> }

function valueFromJson(v: unknown): ValueJson {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(valueFromJson) } };
  return { structValue: structFromJson(v as Record<string, unknown>) };
}

function structFromJson(o: Record<string, unknown>): StructJson {
  const fields: Record<string, ValueJson> = {};
  for (const [k, v] of Object.entries(o)) fields[k] = valueFromJson(v);
  return { fields };
}

function jsonFromValue(v: ValueJson): unknown {
  if (v.structValue) return jsonFromStruct(v.structValue);
  if (v.listValue) return (v.listValue.values ?? []).map(jsonFromValue);
  if (v.stringValue !== undefined && v.stringValue !== '') return v.stringValue;
  if (v.numberValue !== undefined && v.numberValue !== 0) return v.numberValue;
  if (v.boolValue) return true;
  if (v.stringValue !== undefined) return v.stringValue;
  return null;
}

function jsonFromStruct(s: StructJson): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = jsonFromValue(v);
  return out;
}
