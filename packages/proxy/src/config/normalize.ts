/**
 * Envoy accepts proto JSON with either field spelling (snake_case or lowerCamelCase).
 * We normalise to snake_case once at load time, but never inside map-valued fields
 * (their keys are data: header names, extension names, metadata namespaces).
 */
const MAP_FIELDS = new Set([
  'typed_extension_protocol_options',
  'filter_metadata',
  'typed_filter_metadata',
  'typed_per_filter_config',
  'static_layer',
  'fields',
  'labels',
  // RBAC policies by name, jwt_authn providers and requirements by name, matcher-tree maps.
  'policies',
  'providers',
  'requirement_map',
  'map',
]);

const CAMEL = /^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$/;

export function toSnakeKey(key: string): string {
  if (!CAMEL.test(key)) return key;
  return key.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
}

/** Fields whose values are google.protobuf.Struct (or maps of them): free-form JSON at every depth. */
const STRUCT_VALUED = new Set(['filter_metadata', 'static_layer']);

export function normalizeKeys(value: unknown, parentKey = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => normalizeKeys(v, parentKey));
  if (value === null || typeof value !== 'object') return value;
  // A Struct's content is data (node metadata such as Istio's PROXY_CONFIG keeps its camelCase keys).
  if (STRUCT_VALUED.has(parentKey)) return value;
  const keepKeys = MAP_FIELDS.has(parentKey);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const key = keepKeys ? k : toSnakeKey(k);
    // Struct-typed fields named by their parent: the node's metadata (Istio's PROXY_CONFIG keeps its
    // camelCase keys) and transport_socket_matches[].match (compared with endpoint metadata).
    if ((parentKey === 'node' && key === 'metadata') || (parentKey === 'transport_socket_matches' && key === 'match')) { out[key] = v; continue; }
    // Values of a map keep their own shape: a map's value is normalised as a message.
    out[key] = normalizeKeys(v, keepKeys ? '' : key);
  }
  return out;
}
