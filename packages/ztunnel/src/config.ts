/**
 * ztunnel's configuration from the environment, with ztunnel's names and defaults: XDS_ADDRESS,
 * CA_ADDRESS, CLUSTER_ID (ISTIO_META_CLUSTER_ID wins), NETWORK, NODE_NAME, POD_NAME /
 * POD_NAMESPACE / INSTANCE_IP / SERVICE_ACCOUNT (node identity), LOCAL_XDS_PATH / LOCAL_XDS,
 * AUTH_TOKEN, XDS_ROOT_CA / CA_ROOT_CA, XDS_HEADER_* / CA_HEADER_*, SECRET_TTL, PROXY_MODE and
 * PROXY_WORKLOAD_INFO, INPOD_UDS, PACKET_MARK, POOL_*, HTTP2_*, ENABLE_ORIG_SRC,
 * CONNECTION_TERMINATION_DEADLINE / TERMINATION_GRACE_PERIOD_SECONDS, and the ProxyConfig from the
 * mesh config file (./etc/istio/config/mesh) merged with PROXY_CONFIG (proxyAdminPort, statsPort,
 * discoveryAddress, proxyMetadata). A bad value is an error naming the variable.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parseGoDuration } from './core.ts';

export class ConfigEnvError extends Error {}

export interface ProxyConfig {
  readonly discoveryAddress?: string;
  readonly proxyAdminPort?: number;
  readonly statsPort?: number;
  readonly concurrency?: number;
  readonly proxyMetadata: Readonly<Record<string, string>>;
}

export interface ZtunnelConfig {
  readonly proxyMode: 'shared' | 'dedicated';
  /** PROXY_WORKLOAD_INFO (namespace/name/service-account) in dedicated mode. */
  readonly proxyWorkload: { readonly namespace: string; readonly name: string; readonly serviceAccount: string } | undefined;
  readonly network: string;
  readonly localNode: string | undefined;
  readonly clusterId: string;
  readonly clusterDomain: string;
  /** undefined: no control plane (LOCAL_XDS only). */
  readonly xdsAddress: string | undefined;
  readonly caAddress: string | undefined;
  readonly fakeCa: boolean;
  readonly xdsRootCert: RootCert;
  readonly caRootCert: RootCert;
  readonly altXdsHostname: string | undefined;
  readonly altCaHostname: string | undefined;
  readonly auth: { readonly kind: 'file'; readonly path: string } | { readonly kind: 'static'; readonly token: string } | { readonly kind: 'none' };
  readonly xdsHeaders: Readonly<Record<string, string>>;
  readonly caHeaders: Readonly<Record<string, string>>;
  readonly secretTtlSec: number;
  readonly localXds: { readonly kind: 'file'; readonly path: string } | { readonly kind: 'static'; readonly text: string } | undefined;
  readonly proxyMetadata: Readonly<Record<string, string>>;
  readonly node: { readonly podName: string; readonly podNamespace: string; readonly instanceIp: string; readonly nodeName: string };
  readonly adminPort: number;
  readonly statsPort: number;
  readonly readinessPort: number;
  readonly inboundPort: number;
  readonly inboundPlaintextPort: number;
  readonly outboundPort: number;
  readonly dnsPort: number;
  readonly dnsProxy: boolean;
  readonly illegalPorts: ReadonlySet<number>;
  readonly poolMaxStreamsPerConnection: number;
  readonly poolUnusedReleaseTimeoutMs: number;
  readonly streamWindow: number;
  readonly connectionWindow: number;
  readonly terminationDeadlineMs: number;
  readonly requireOriginalSource: boolean | undefined;
  readonly inpodUds: string;
  readonly packetMark: number | undefined;
  readonly enableResponseBaggage: boolean;
}

export type RootCert = { readonly kind: 'file'; readonly path: string } | { readonly kind: 'system' } | { readonly kind: 'pem'; readonly pem: string };

type Env = Readonly<Record<string, string | undefined>>;

const DEFAULT_ROOT_CERT = './var/run/secrets/istio/root-cert.pem';
const DEFAULT_TOKEN = './var/run/secrets/tokens/istio-token';
const MESH_CONFIG = './etc/istio/config/mesh';

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new ConfigEnvError(`${name}: expected true or false, got ${JSON.stringify(v)}`);
}

function int(env: Env, name: string, fallback: number, max = 0xffffffff): number {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) > max) throw new ConfigEnvError(`${name}: expected an integer in [0, ${max}], got ${JSON.stringify(v)}`);
  return Number(v);
}

function durationMs(env: Env, name: string): number | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  try {
    return Math.round(parseGoDuration(v, name) * 1000);
  } catch (e) {
    throw new ConfigEnvError((e as Error).message);
  }
}

function rootCert(env: Env, name: string, cwd: string): RootCert {
  const v = str(env, name) ?? DEFAULT_ROOT_CERT;
  const path = v.startsWith('/') ? v : `${cwd}/${v}`;
  if (existsSync(path)) return { kind: 'file', path };
  if (v === 'SYSTEM') return { kind: 'system' };
  return { kind: 'pem', pem: v };
}

function headers(env: Env, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (k.startsWith(prefix) && v !== undefined) out[k.slice(prefix.length).toLowerCase()] = v;
  return out;
}

function proxyConfigFrom(text: string, where: string): Partial<ProxyConfig> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new ConfigEnvError(`${where}: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigEnvError(`${where}: must be an object`);
  const o = doc as Record<string, unknown>;
  const port = (k: string): number | undefined => {
    const v = o[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535) throw new ConfigEnvError(`${where}.${k}: must be a port number`);
    return v;
  };
  const md = o.proxyMetadata;
  if (md !== undefined && (typeof md !== 'object' || md === null || Array.isArray(md))) throw new ConfigEnvError(`${where}.proxyMetadata: must be a map`);
  return {
    discoveryAddress: typeof o.discoveryAddress === 'string' ? o.discoveryAddress : undefined,
    proxyAdminPort: port('proxyAdminPort'), statsPort: port('statsPort'),
    concurrency: typeof o.concurrency === 'number' ? o.concurrency : undefined,
    proxyMetadata: md ? Object.fromEntries(Object.entries(md).map(([k, v]) => [k, String(v)])) : {},
  };
}

/** The mesh config file's defaultConfig, then PROXY_CONFIG over it; ISTIO_META_* (minus the prefix) into proxyMetadata. */
export function proxyConfig(env: Env, meshConfigPath: string): ProxyConfig {
  let merged: Partial<ProxyConfig> = { proxyMetadata: {} };
  const layers: Array<Partial<ProxyConfig>> = [];
  if (existsSync(meshConfigPath)) {
    const mesh = parseYaml(readFileSync(meshConfigPath, 'utf8')) as Record<string, unknown> | null;
    if (mesh?.defaultConfig !== undefined) layers.push(proxyConfigFrom(JSON.stringify(mesh.defaultConfig), `${meshConfigPath} defaultConfig`));
  }
  const pc = str(env, 'PROXY_CONFIG');
  if (pc !== undefined) layers.push(proxyConfigFrom(pc, 'PROXY_CONFIG'));
  for (const l of layers) {
    merged = {
      discoveryAddress: l.discoveryAddress ?? merged.discoveryAddress, proxyAdminPort: l.proxyAdminPort ?? merged.proxyAdminPort,
      statsPort: l.statsPort ?? merged.statsPort, concurrency: l.concurrency ?? merged.concurrency,
      proxyMetadata: { ...merged.proxyMetadata, ...l.proxyMetadata },
    };
  }
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(merged.proxyMetadata ?? {})) metadata[k.startsWith('ISTIO_META_') ? k.slice(11) : k] = v;
  for (const [k, v] of Object.entries(env)) if (k.startsWith('ISTIO_META_') && v !== undefined) metadata[k.slice(11)] = v;
  return { ...merged, proxyMetadata: metadata };
}

function uri(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (!/^(https?):\/\/[^/]+/.test(value) && !/^[^/:]+:\d+$/.test(value)) throw new ConfigEnvError(`${name}: expected a URI like https://istiod.istio-system.svc:15012, got ${JSON.stringify(value)}`);
  return value;
}

export function loadConfig(env: Env = process.env, cwd = process.cwd()): ZtunnelConfig {
  const pc = proxyConfig(env, `${cwd}/${MESH_CONFIG}`);
  const defaultIstiod = env.KUBERNETES_SERVICE_HOST ? 'https://istiod.istio-system.svc:15012' : 'https://localhost:15012';
  // An explicitly empty XDS_ADDRESS / CA_ADDRESS turns the control plane off (ztunnel's empty_to_none).
  const xdsAddress = env.XDS_ADDRESS === '' ? undefined : uri(str(env, 'XDS_ADDRESS') ?? pc.discoveryAddress ?? defaultIstiod, 'XDS_ADDRESS');
  const fakeCa = bool(env, 'FAKE_CA', false);
  const caAddress = fakeCa || env.CA_ADDRESS === '' ? undefined : uri(str(env, 'CA_ADDRESS') ?? defaultIstiod, 'CA_ADDRESS');
  const clusterId = str(env, 'ISTIO_META_CLUSTER_ID') ?? str(env, 'CLUSTER_ID') ?? 'Kubernetes';
  const token = str(env, 'AUTH_TOKEN');
  const defaultToken = `${cwd}/${DEFAULT_TOKEN}`;
  const auth: ZtunnelConfig['auth'] = token === undefined
    ? existsSync(defaultToken) ? { kind: 'file', path: defaultToken } : { kind: 'none' }
    : existsSync(token) ? { kind: 'file', path: token } : { kind: 'static', token };

  const mode = str(env, 'PROXY_MODE') ?? 'shared';
  if (mode !== 'shared' && mode !== 'dedicated') throw new ConfigEnvError(`PROXY_MODE must be one of dedicated, shared (got ${JSON.stringify(mode)})`);
  let proxyWorkload: ZtunnelConfig['proxyWorkload'];
  if (mode === 'dedicated') {
    const raw = str(env, 'PROXY_WORKLOAD_INFO');
    if (raw === undefined) throw new ConfigEnvError('PROXY_MODE=dedicated requires PROXY_WORKLOAD_INFO to be set');
    const parts = raw.split('/');
    if (parts.length !== 3) throw new ConfigEnvError(`PROXY_WORKLOAD_INFO must match the format 'namespace/name/service-account' (got ${JSON.stringify(raw)})`);
    proxyWorkload = { namespace: parts[0], name: parts[1], serviceAccount: parts[2] };
  }

  const localPath = str(env, 'LOCAL_XDS_PATH');
  const localText = str(env, 'LOCAL_XDS');
  if (localPath !== undefined && localText !== undefined) throw new ConfigEnvError('only one of LOCAL_XDS_PATH or LOCAL_XDS may be set');
  if (bool(env, 'XDS_ON_DEMAND', false)) throw new ConfigEnvError('XDS_ON_DEMAND=true: on-demand WDS is not supported');

  const inbound = 15008, plaintext = 15006, outbound = 15001;
  const grace = str(env, 'TERMINATION_GRACE_PERIOD_SECONDS') === undefined ? undefined : int(env, 'TERMINATION_GRACE_PERIOD_SECONDS', 0);
  const deadlineMs = durationMs(env, 'CONNECTION_TERMINATION_DEADLINE')
    // Leave the last seconds of Kubernetes' grace period to close what remains before SIGKILL.
    ?? (grace !== undefined ? Math.max(grace > 10 ? grace - 5 : grace - 1, 1) * 1000 : 5000);
  const dnsAddr = pc.proxyMetadata.DNS_PROXY_ADDR;
  const dnsPort = dnsAddr ? Number(dnsAddr.slice(dnsAddr.lastIndexOf(':') + 1)) : 15053;
  if (!Number.isInteger(dnsPort) || dnsPort <= 0 || dnsPort > 65535) throw new ConfigEnvError(`DNS_PROXY_ADDR: expected host:port, got ${JSON.stringify(dnsAddr)}`);
  const streams = int(env, 'POOL_MAX_STREAMS_PER_CONNECTION', 100, 65535);
  if (streams === 0) throw new ConfigEnvError('POOL_MAX_STREAMS_PER_CONNECTION: must be at least 1');

  return {
    proxyMode: mode, proxyWorkload,
    network: env.NETWORK ?? '', localNode: str(env, 'NODE_NAME'), clusterId, clusterDomain: str(env, 'CLUSTER_DOMAIN') ?? 'cluster.local',
    xdsAddress, caAddress, fakeCa,
    xdsRootCert: rootCert(env, 'XDS_ROOT_CA', cwd), caRootCert: rootCert(env, 'CA_ROOT_CA', cwd),
    altXdsHostname: str(env, 'ALT_XDS_HOSTNAME'), altCaHostname: str(env, 'ALT_CA_HOSTNAME'),
    auth, xdsHeaders: headers(env, 'XDS_HEADER_'), caHeaders: headers(env, 'CA_HEADER_'),
    secretTtlSec: (durationMs(env, 'SECRET_TTL') ?? 24 * 3600_000) / 1000,
    localXds: localPath !== undefined ? { kind: 'file', path: localPath } : localText !== undefined ? { kind: 'static', text: localText } : undefined,
    proxyMetadata: pc.proxyMetadata,
    node: {
      podName: env.POD_NAME ?? '', podNamespace: env.POD_NAMESPACE ?? '', instanceIp: env.INSTANCE_IP ?? '1.1.1.1', nodeName: env.NODE_NAME ?? '',
    },
    adminPort: pc.proxyAdminPort ?? 15000, statsPort: pc.statsPort ?? 15020, readinessPort: 15021,
    inboundPort: inbound, inboundPlaintextPort: plaintext, outboundPort: outbound, dnsPort,
    dnsProxy: (pc.proxyMetadata.DNS_CAPTURE ?? 'true').toLowerCase() === 'true',
    illegalPorts: new Set([inbound, plaintext, outbound]),
    poolMaxStreamsPerConnection: streams,
    poolUnusedReleaseTimeoutMs: durationMs(env, 'POOL_UNUSED_RELEASE_TIMEOUT') ?? 300_000,
    streamWindow: int(env, 'HTTP2_STREAM_WINDOW_SIZE', 4 * 1024 * 1024),
    connectionWindow: int(env, 'HTTP2_CONNECTION_WINDOW_SIZE', 16 * 1024 * 1024),
    terminationDeadlineMs: deadlineMs,
    requireOriginalSource: str(env, 'ENABLE_ORIG_SRC') === undefined ? undefined : bool(env, 'ENABLE_ORIG_SRC', false),
    inpodUds: str(env, 'INPOD_UDS') ?? '/var/run/ztunnel/ztunnel.sock',
    // In-pod (shared) mode marks ztunnel's own sockets so the pod's rules let them out (0x539).
    packetMark: str(env, 'PACKET_MARK') !== undefined ? int(env, 'PACKET_MARK', 0) : mode === 'shared' ? 1337 : undefined,
    enableResponseBaggage: bool(env, 'ENABLE_RESPONSE_BAGGAGE', true),
  };
}

/**
 * The node sent on the WDS stream, as ztunnel builds it: id `ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local`,
 * metadata NAME, NAMESPACE, INSTANCE_IPS, NODE_NAME, then proxyMetadata (ISTIO_META_* without the
 * prefix), then ISTIO_METAJSON_* values as JSON.
 */
export function xdsNode(cfg: ZtunnelConfig, env: Env = process.env): Record<string, unknown> {
  const { podName, podNamespace, instanceIp, nodeName } = cfg.node;
  const metadata: Record<string, unknown> = { NAME: podName, NAMESPACE: podNamespace, INSTANCE_IPS: instanceIp, NODE_NAME: nodeName, ...cfg.proxyMetadata };
  for (const [k, v] of Object.entries(env)) {
    if (!k.startsWith('ISTIO_METAJSON_') || v === undefined) continue;
    try {
      metadata[k.slice('ISTIO_METAJSON_'.length)] = JSON.parse(v);
    } catch {
      throw new ConfigEnvError(`${k}: not valid JSON`);
    }
  }
  return { id: `ztunnel~${instanceIp}~${podName}.${podNamespace}~${podNamespace}.svc.cluster.local`, metadata };
}

/** gRPC metadata on the WDS and CA streams: the bearer token and cluster id (read per connect), plus extras. */
export function authHeaders(cfg: ZtunnelConfig, extra: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = { ...extra };
  let token: string | undefined;
  if (cfg.auth.kind === 'static') token = cfg.auth.token;
  else if (cfg.auth.kind === 'file') {
    const t = readFileSync(cfg.auth.path, 'utf8').trim();
    if (t === '') throw new Error(`token file ${cfg.auth.path} exists, but was empty`);
    token = t;
  }
  if (token !== undefined) {
    out.authorization = `Bearer ${token}`;
    out.clusterid = cfg.clusterId;
  }
  return out;
}
