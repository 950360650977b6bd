/**
 * Istio's ProxyConfig (istio.mesh.v1alpha1.ProxyConfig) as pilot-agent builds it: the mesh
 * defaults, then the mesh config file's `defaultConfig`, then PROXY_CONFIG, then the
 * `proxy.istio.io/config` pod annotation. Each layer replaces whole top-level fields, except
 * `proxyMetadata`, whose keys merge. Kept in its proto-JSON (camelCase) form, which is also
 * what the node metadata's PROXY_CONFIG carries.
 */
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../core/errors.ts';

export type ProxyConfig = Readonly<Record<string, unknown>>;

type Kind = 'string' | 'duration' | 'int' | 'int32Value' | 'boolValue' | 'stringMap' | 'stringList' | 'message' | 'enum';

const ENUMS: Record<string, readonly string[]> = {
  controlPlaneAuthPolicy: ['NONE', 'MUTUAL_TLS', 'INHERIT'],
  interceptionMode: ['REDIRECT', 'TPROXY', 'NONE'],
  tracingServiceName: ['APP_LABEL_AND_NAMESPACE', 'CANONICAL_NAME_ONLY', 'CANONICAL_NAME_AND_NAMESPACE'],
};

/** Every ProxyConfig field by its JSON name (the proto's field list). */
const FIELDS: Readonly<Record<string, Kind>> = {
  configPath: 'string', binaryPath: 'string', serviceCluster: 'string', tracingServiceName: 'enum',
  drainDuration: 'duration', parentShutdownDuration: 'duration', discoveryAddress: 'string',
  discoveryRefreshDelay: 'duration', zipkinAddress: 'string', statsdUdpAddress: 'string',
  envoyMetricsServiceAddress: 'string', proxyAdminPort: 'int', availabilityZone: 'string',
  controlPlaneAuthPolicy: 'enum', customConfigFile: 'string', statNameLength: 'int', concurrency: 'int32Value',
  proxyBootstrapTemplatePath: 'string', interceptionMode: 'enum', tracing: 'message', sds: 'message',
  envoyAccessLogService: 'message', envoyMetricsService: 'message', proxyMetadata: 'stringMap',
  runtimeValues: 'stringMap', statusPort: 'int', extraStatTags: 'stringList', gatewayTopology: 'message',
  terminationDrainDuration: 'duration', meshId: 'string', readinessProbe: 'message', proxyStatsMatcher: 'message',
  holdApplicationUntilProxyStarts: 'boolValue', caCertificatesPem: 'stringList', image: 'message',
  privateKeyProvider: 'message', proxyHeaders: 'message', fileFlushInterval: 'duration', fileFlushMinSizeKb: 'int',
};

/** mesh.DefaultProxyConfig(): what a proxy gets with no mesh config at all. */
export function defaultProxyConfig(): Record<string, unknown> {
  return {
    configPath: './etc/istio/proxy', serviceCluster: 'istio-proxy', drainDuration: '45s', parentShutdownDuration: '60s',
    terminationDrainDuration: '5s', proxyAdminPort: 15000, concurrency: 2, controlPlaneAuthPolicy: 'MUTUAL_TLS',
    discoveryAddress: 'istiod.istio-system.svc:15012', tracing: { zipkin: { address: 'zipkin.istio-system:9411' } },
    binaryPath: '/usr/local/bin/envoy', statNameLength: 189, statusPort: 15020,
  };
}

const camel = (k: string): string => k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** Parses one YAML/JSON ProxyConfig layer into checked proto-JSON; `where` names the source in errors. */
export function parseProxyConfig(text: string, where: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new ConfigError(where, `cannot parse proxy config: ${(err as Error).message}`);
  }
  if (raw === null || raw === undefined) return {};
  return checkProxyConfig(raw, where);
}

/** Validates field names and types of a ProxyConfig object (either spelling) and normalises values. */
export function checkProxyConfig(raw: unknown, where: string): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(where, 'a ProxyConfig must be an object');
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    const name = camel(key);
    const kind = FIELDS[name];
    const path = where ? `${where}.${name}` : name;
    if (!kind) throw new ConfigError(path, 'unknown ProxyConfig field');
    if (value === null) continue;
    out[name] = checkValue(kind, name, value, path);
  }
  return out;
}

function checkValue(kind: Kind, name: string, v: unknown, path: string): unknown {
  const bad = (what: string): ConfigError => new ConfigError(path, `expected ${what}, got ${JSON.stringify(v)}`);
  switch (kind) {
    case 'string': if (typeof v !== 'string') throw bad('a string'); return v;
    case 'duration': return formatDuration(parseDuration(v, path));
    case 'int': case 'int32Value': {
      const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v; // proto-JSON allows quoted integers
      if (typeof n !== 'number' || !Number.isInteger(n) || Math.abs(n) > 2 ** 31) throw bad('an integer');
      return n;
    }
    case 'boolValue': if (typeof v !== 'boolean') throw bad('true or false'); return v;
    case 'enum': {
      const values = ENUMS[name];
      if (typeof v === 'number' && values[v] !== undefined) return values[v];
      if (typeof v === 'number' && name === 'controlPlaneAuthPolicy' && v === 1000) return 'INHERIT';
      if (typeof v !== 'string' || !values.includes(v)) throw bad(`one of ${values.join(', ')}`);
      return v;
    }
    case 'stringMap': {
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('a map of strings');
      const m: Record<string, string> = {};
      for (const [k, s] of Object.entries(v as Record<string, unknown>)) {
        if (typeof s !== 'string') throw new ConfigError(`${path}.${k}`, `expected a string, got ${JSON.stringify(s)}`);
        m[k] = s;
      }
      return m;
    }
    case 'stringList':
      if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw bad('a list of strings');
      return [...v];
    case 'message':
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('an object');
      return v;
  }
}

/** A proto-JSON Duration ("2s", "0.5s") in nanoseconds (exact below ~104 days). */
function parseDuration(v: unknown, path: string): number {
  const m = typeof v === 'string' ? /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(v) : null;
  if (!m) throw new ConfigError(path, `expected a duration like "2s", got ${JSON.stringify(v)}`);
  const nanos = Number((m[3] ?? '').padEnd(9, '0') || '0');
  const total = Number(m[2]) * 1e9 + nanos;
  return m[1] ? -total : total;
}

/** protojson's Duration form: whole seconds, or 3/6/9 fractional digits. */
export function formatDuration(nanos: number): string {
  const sign = nanos < 0 ? '-' : '';
  const abs = Math.abs(nanos);
  const secs = Math.floor(abs / 1e9);
  const frac = abs - secs * 1e9;
  if (frac === 0) return `${sign}${secs}s`;
  let f = String(frac).padStart(9, '0');
  f = f.endsWith('000000') ? f.slice(0, 3) : f.endsWith('000') ? f.slice(0, 6) : f;
  return `${sign}${secs}.${f}s`;
}

/**
 * protojson's output form: proto3 fields at their default (empty string, 0, the first enum
 * value, empty map/list) are left out; wrappers, messages and the cluster_name oneof are kept.
 */
export function proxyConfigProtoJson(pc: ProxyConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(pc)) {
    const kind = FIELDS[k];
    const oneof = k === 'serviceCluster' || k === 'tracingServiceName';
    if (!oneof && (kind === 'string' && v === '' || kind === 'int' && v === 0 || kind === 'enum' && v === ENUMS[k][0])) continue;
    if ((kind === 'stringMap' && Object.keys(v as object).length === 0) || (kind === 'stringList' && (v as unknown[]).length === 0)) continue;
    out[k] = v;
  }
  return out;
}

export function durationSeconds(pc: ProxyConfig, field: string, fallback: number): number {
  const v = pc[field];
  return typeof v === 'string' ? parseDuration(v, field) / 1e9 : fallback;
}

/** One overlay: top-level fields replace, `proxyMetadata` merges, the cluster_name oneof stays one-of. */
export function overlayProxyConfig(base: ProxyConfig, layer: ProxyConfig): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(layer)) {
    if (k === 'proxyMetadata') out[k] = { ...(base.proxyMetadata as Record<string, string> | undefined), ...(v as Record<string, string>) };
    else out[k] = v;
    if (k === 'serviceCluster') delete out.tracingServiceName;
    if (k === 'tracingServiceName') delete out.serviceCluster;
  }
  return out;
}

export interface ProxyConfigSources {
  /** The mesh config file's text (its `defaultConfig` is the first overlay). */
  readonly meshConfig?: string;
  /** PROXY_CONFIG (set by the injector). */
  readonly proxyConfigEnv?: string;
  /** The `proxy.istio.io/config` pod annotation. */
  readonly annotation?: string;
  /** --serviceCluster (used when the merged config leaves service_cluster empty). */
  readonly serviceCluster: string;
  /** --concurrency (0 = not given). */
  readonly concurrency: number;
  readonly sidecar: boolean;
  /** Other pod annotations pilot-agent applies last (sidecar.istio.io/discoveryAddress, status.sidecar.istio.io/port). */
  readonly podAnnotations?: Readonly<Record<string, string>>;
}

/** config.ConstructProxyConfig: the effective ProxyConfig of this proxy, validated. */
export function constructProxyConfig(src: ProxyConfigSources): Record<string, unknown> {
  let pc: Record<string, unknown> = defaultProxyConfig();
  // Gateways default to an unset concurrency (one worker per core).
  if (!src.sidecar) delete pc.concurrency;
  if (src.meshConfig) {
    let mesh: unknown;
    try { mesh = parseYaml(src.meshConfig); } catch (err) { throw new ConfigError('meshConfig', `cannot parse: ${(err as Error).message}`); }
    const dc = mesh && typeof mesh === 'object' ? (mesh as Record<string, unknown>).defaultConfig ?? (mesh as Record<string, unknown>).default_config : undefined;
    if (dc !== undefined && dc !== null) pc = overlayProxyConfig(pc, checkProxyConfig(dc, 'meshConfig.defaultConfig'));
  }
  if (src.proxyConfigEnv) pc = overlayProxyConfig(pc, parseProxyConfig(src.proxyConfigEnv, 'PROXY_CONFIG'));
  if (src.annotation) pc = overlayProxyConfig(pc, parseProxyConfig(src.annotation, 'proxy.istio.io/config'));
  if (src.concurrency > 0) pc.concurrency = src.concurrency;
  if (!pc.tracingServiceName && !pc.serviceCluster) pc.serviceCluster = src.serviceCluster;
  const annos = src.podAnnotations ?? {};
  if (annos['sidecar.istio.io/discoveryAddress'] !== undefined) pc.discoveryAddress = annos['sidecar.istio.io/discoveryAddress'];
  if (annos['status.sidecar.istio.io/port'] !== undefined) {
    const p = Number(annos['status.sidecar.istio.io/port']);
    if (!Number.isInteger(p)) throw new ConfigError('status.sidecar.istio.io/port', `not a port: ${annos['status.sidecar.istio.io/port']}`);
    pc.statusPort = p;
  }
  validateProxyConfig(pc);
  return pc;
}

/** The checks of ValidateMeshConfigProxyConfig that matter here. */
export function validateProxyConfig(pc: ProxyConfig): void {
  if (!pc.configPath) throw new ConfigError('configPath', 'config path must be set');
  splitHostPort(String(pc.discoveryAddress ?? ''), 'discoveryAddress');
  const port = (k: string): void => {
    const v = pc[k];
    if (typeof v !== 'number' || v < 1 || v > 65535) throw new ConfigError(k, `invalid port ${JSON.stringify(v)}`);
  };
  port('proxyAdminPort');
  port('statusPort');
  if (pc.statusPort === pc.proxyAdminPort) throw new ConfigError('statusPort', 'status port must differ from the proxy admin port');
  if (pc.controlPlaneAuthPolicy === 'INHERIT') throw new ConfigError('controlPlaneAuthPolicy', 'INHERIT is not allowed for a proxy');
  if (typeof pc.concurrency === 'number' && pc.concurrency < 0) throw new ConfigError('concurrency', 'must not be negative');
}

/** `host:port` (IPv6 hosts in brackets) → parts; a ConfigError naming `field` otherwise. */
export function splitHostPort(addr: string, field: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d+)$/.exec(addr);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) throw new ConfigError(field, `expected host:port, got ${JSON.stringify(addr)}`);
  return { host: m[1] ?? m[2], port };
}
