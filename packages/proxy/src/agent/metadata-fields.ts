/**
 * The typed node-metadata fields Istio knows (model.NodeMetadata + BootstrapNodeMetadata) and
 * how each is carried in JSON. pilot-agent round-trips the ISTIO_META_* map through this typed
 * struct, so these keys come out normalised (StringBool → "true"/"false", ports as numbers,
 * POD_PORTS re-encoded, empty values dropped); unknown keys pass through untouched.
 */
import { ConfigError } from '../core/errors.ts';

export type FieldKind =
  | 'string' | 'int' | 'stringBool' | 'optionalStringBool' | 'stringList' | 'stringMap' | 'stringArray' | 'podPorts' | 'object';

export const METADATA_FIELDS: Readonly<Record<string, FieldKind>> = {
  PROXY_CONFIG: 'object', ISTIO_VERSION: 'string', ISTIO_REVISION: 'string', LABELS: 'stringMap', STATIC_LABELS: 'stringMap',
  ANNOTATIONS: 'stringMap', INSTANCE_IPS: 'stringList', NAMESPACE: 'string', NODE_NAME: 'string', WORKLOAD_NAME: 'string',
  INTERCEPTION_MODE: 'string', SERVICE_ACCOUNT: 'string', HTTP_PROXY_PORT: 'string', MESH_ID: 'string', CLUSTER_ID: 'string',
  NETWORK: 'string', REQUESTED_NETWORK_VIEW: 'stringList', POD_PORTS: 'podPorts',
  TLS_SERVER_CERT_CHAIN: 'string', TLS_SERVER_KEY: 'string', TLS_SERVER_ROOT_CERT: 'string',
  TLS_CLIENT_CERT_CHAIN: 'string', TLS_CLIENT_KEY: 'string', TLS_CLIENT_ROOT_CERT: 'string', BASE: 'string',
  IDLE_TIMEOUT: 'string', HTTP10: 'string', GENERATOR: 'string', DNS_CAPTURE: 'stringBool', DNS_AUTO_ALLOCATE: 'stringBool',
  ENABLE_HBONE: 'stringBool', DISABLE_HBONE_SEND: 'stringBool', AUTO_REGISTER_GROUP: 'string', WORKLOAD_ENTRY: 'string',
  UNPRIVILEGED_POD: 'string', PLATFORM_METADATA: 'stringMap', STS_PORT: 'string', ENVOY_STATUS_PORT: 'int',
  ENVOY_PROMETHEUS_PORT: 'int', EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'stringBool', INBOUND_LISTENER_EXACT_BALANCE: 'stringBool',
  OUTBOUND_LISTENER_EXACT_BALANCE: 'stringBool', CLOUDRUN_ADDR: 'string', METADATA_DISCOVERY: 'optionalStringBool',
  ENVOY_SKIP_DEPRECATED_LOGS: 'stringBool', WORKLOAD_IDENTITY_SOCKET_FILE: 'string',
  // BootstrapNodeMetadata
  NAME: 'string', OWNER: 'string', PILOT_SAN: 'stringArray', OUTLIER_LOG_PATH: 'string', APP_CONTAINERS: 'string',
  ISTIO_PROXY_SHA: 'string',
};

const BY_FOLDED = new Map(Object.keys(METADATA_FIELDS).map((k) => [k.toLowerCase(), k]));

/** Go's encoding/json matches struct fields case-insensitively when there is no exact match. */
export function typedFieldFor(key: string): string | undefined {
  return key in METADATA_FIELDS ? key : BY_FOLDED.get(key.toLowerCase());
}

export interface PodPort { readonly name?: string; readonly containerPort: number; readonly protocol: string }

const TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/** strconv.ParseBool. */
export function parseGoBool(s: string): boolean | undefined {
  return TRUE.has(s) ? true : FALSE.has(s) ? false : undefined;
}

/** One raw JSON value → the typed field's value; a ConfigError (the agent refuses to start) on a mismatch. */
export function decodeField(key: string, kind: FieldKind, v: unknown): unknown {
  const path = `node.metadata.${key}`;
  const bad = (what: string): ConfigError => new ConfigError(path, `expected ${what}, got ${JSON.stringify(v)}`);
  switch (kind) {
    case 'string': if (typeof v !== 'string') throw bad('a string'); return v;
    case 'int': if (typeof v !== 'number' || !Number.isInteger(v)) throw bad('an integer'); return v;
    case 'stringBool': case 'optionalStringBool': {
      const b = typeof v === 'string' ? parseGoBool(v) : undefined;
      if (b === undefined) throw bad('a boolean string ("true"/"false")');
      return b;
    }
    case 'stringList': if (typeof v !== 'string') throw bad('a comma-separated string'); return v === '' ? [] : v.split(',');
    case 'stringMap': {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('a map of strings');
      for (const x of Object.values(v)) if (typeof x !== 'string') throw bad('a map of strings');
      return { ...(v as Record<string, string>) };
    }
    case 'stringArray':
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw bad('a list of strings');
      return [...v];
    case 'podPorts': return decodePodPorts(v, path);
    case 'object':
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('an object');
      return v;
  }
}

/** POD_PORTS is a JSON array carried inside a string, e.g. `[{"name":"http","containerPort":8080,"protocol":"TCP"}]`. */
function decodePodPorts(v: unknown, path: string): PodPort[] {
  if (typeof v !== 'string') throw new ConfigError(path, `expected a string holding a JSON list, got ${JSON.stringify(v)}`);
  let list: unknown;
  try { list = JSON.parse(v); } catch (err) { throw new ConfigError(path, `not JSON: ${(err as Error).message}`); }
  if (list === null) return [];
  if (!Array.isArray(list)) throw new ConfigError(path, 'expected a JSON list of ports');
  return list.map((p: unknown, i) => {
    if (typeof p !== 'object' || p === null) throw new ConfigError(`${path}[${i}]`, 'expected an object');
    const { name, containerPort, protocol } = p as Record<string, unknown>;
    if (name !== undefined && name !== null && typeof name !== 'string') throw new ConfigError(`${path}[${i}].name`, 'expected a string');
    if (containerPort !== undefined && containerPort !== null && (typeof containerPort !== 'number' || !Number.isInteger(containerPort))) {
      throw new ConfigError(`${path}[${i}].containerPort`, 'expected an integer');
    }
    if (protocol !== undefined && protocol !== null && typeof protocol !== 'string') throw new ConfigError(`${path}[${i}].protocol`, 'expected a string');
    return { ...(name ? { name } : {}), containerPort: (containerPort as number | null | undefined) ?? 0, protocol: (protocol as string | null | undefined) ?? '' };
  });
}

/** The typed value as Go marshals it, or undefined when `omitempty` drops it. */
export function encodeField(kind: FieldKind, v: unknown): unknown {
  switch (kind) {
    case 'string': return v === '' ? undefined : v;
    case 'int': return v === 0 ? undefined : v;
    case 'stringBool': return v ? 'true' : undefined;
    case 'optionalStringBool': return v === undefined ? undefined : String(v);
    case 'stringList': return (v as string[]).length ? (v as string[]).join(',') : undefined;
    case 'stringMap': return Object.keys(v as object).length ? v : undefined;
    case 'stringArray': return (v as string[]).length ? v : undefined;
    case 'podPorts': {
      const ports = v as PodPort[];
      return ports.length ? JSON.stringify(ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), containerPort: p.containerPort, protocol: p.protocol }))) : undefined;
    }
    case 'object': return v;
  }
}
