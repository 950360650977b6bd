/**
 * Everything `pilot-agent proxy` derives from its flags, environment and mounted files before
 * it writes Envoy's bootstrap: identity, ProxyConfig, node, ports, and how to reach and
 * authenticate to istiod. Paths are relative to the working directory, as in the
 * istio-proxy container (which runs from `/`).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism, type NetworkInterfaceInfo } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../core/errors.ts';
import { VERSION } from '../server.ts';
import { buildNode, type Env, type IstioNode } from './node-metadata.ts';
import { parseProxyType, proxyIdentity, type ProxyIdentity } from './identity.ts';
import { constructProxyConfig, durationSeconds, splitHostPort } from './proxy-config.ts';
import { POD_ANNOTATIONS_PATH, POD_LABELS_PATH, readDownwardApiFile } from './pod-info.ts';
import { envoyLogLevel, type PilotProxyArgs } from './pilot-cli.ts';
import { parseGoBool } from './metadata-fields.ts';
import { lifecycleSettings, type LifecycleSettings } from './lifecycle.ts';
import { istioStatsMatcher } from './stats-inclusion.ts';

/** How the single process reaches istiod: straight from the proxy, no agent UDS hop. */
export interface XdsTarget {
  readonly host: string;
  readonly port: number;
  /** undefined = plaintext (controlPlaneAuthPolicy NONE, or the 15010 port). */
  readonly tls: { readonly rootCert: string | undefined; readonly san: string } | undefined;
}

export interface AgentSettings {
  readonly identity: ProxyIdentity;
  readonly proxyConfig: Readonly<Record<string, unknown>>;
  readonly node: IstioNode;
  /** Where the bootstrap is written (or ProxyConfig.customConfigFile, used as given). */
  readonly bootstrapPath: string;
  readonly renderBootstrap: boolean;
  readonly xds: XdsTarget;
  readonly adminPort: number;
  readonly statusPort: number;
  readonly envoyStatusPort: number;
  readonly envoyPrometheusPort: number;
  readonly clusterId: string;
  /** The istiod audience JWT sent as `authorization: Bearer` (undefined: JWT_POLICY sends none). */
  readonly tokenPath: string | undefined;
  /** XDS_HEADER_<name>=<value> env vars: extra gRPC metadata on the xDS stream. */
  readonly extraXdsHeaders: Readonly<Record<string, string>>;
  readonly concurrency: number;
  readonly drainTimeS: number;
  /** SIGTERM: terminationDrainDuration, EXIT_ON_ZERO_ACTIVE_CONNECTIONS, MINIMUM_DRAIN_DURATION. */
  readonly lifecycle: LifecycleSettings;
  readonly logLevel: string;
  readonly outlierLogPath: string;
  /** stats_config.stats_matcher for the bootstrap: Istio's inclusion list (stats-inclusion.ts). */
  readonly statsMatcher: Readonly<Record<string, unknown>>;
}

/** Istio's env.Register semantics: an unparsable value falls back to the default. */
function envInt(env: Env, name: string, def: number): number {
  const v = env[name];
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : def;
}

function envBool(env: Env, name: string, def: boolean): boolean {
  const v = env[name];
  return v === undefined ? def : parseGoBool(v) ?? def;
}

function readIfExists(path: string, what: string): string | undefined {
  if (!existsSync(path)) return undefined;
  try { return readFileSync(path, 'utf8'); } catch (err) { throw new ConfigError(what, `cannot read ${path}: ${(err as Error).message}`); }
}

/** GetPilotSan: the discovery host (localhost → istiod.istio-system.svc, for local debugging). */
export function pilotSan(discoveryAddress: string): string {
  const host = discoveryAddress.split(':')[0];
  return host === 'localhost' ? 'istiod.istio-system.svc' : host;
}

const isFile = (p: string): boolean => { try { return statSync(p).isFile(); } catch { return false; } };

/** FindRootCAForXDS: which root certificate verifies istiod (undefined = the system roots). */
export function rootCertForXds(env: Env, proxyMetadata: Readonly<Record<string, string>>): string | undefined {
  const explicit = env.XDS_ROOT_CA ?? '';
  let path: string;
  if (explicit === 'SYSTEM') return undefined;
  if (explicit) path = explicit;
  else if (isFile('./etc/certs/root-cert.pem')) return './etc/certs/root-cert.pem';
  else if (env.PROV_CERT) return `${env.PROV_CERT}/root-cert.pem`;
  else if (envBool(env, 'FILE_MOUNTED_CERTS', false)) path = proxyMetadata.ISTIO_META_TLS_CLIENT_ROOT_CERT ?? '';
  else if ((env.PILOT_CERT_PROVIDER ?? 'istiod') === 'none') throw new ConfigError('PILOT_CERT_PROVIDER', 'root CA file for XDS required but configured provider as none');
  else path = './var/run/secrets/istio/root-cert.pem';
  if (!isFile(path)) throw new ConfigError('XDS_ROOT_CA', `root CA file for XDS does not exist ${path}`);
  return path;
}

/** JWT_POLICY → the token file sent to istiod. */
export function tokenPathFor(env: Env): string | undefined {
  const policy = env.JWT_POLICY ?? 'third-party-jwt';
  if (policy === 'third-party-jwt') return './var/run/secrets/tokens/istio-token';
  if (policy === 'first-party-jwt') return '/var/run/secrets/kubernetes.io/serviceaccount/token';
  return undefined;
}

export interface SettingsInputs {
  readonly args: PilotProxyArgs;
  readonly env: Env;
  /** Host interfaces (tests pass a fixed set). */
  readonly interfaces?: NodeJS.Dict<NetworkInterfaceInfo[]>;
}

export function agentSettings({ args, env, interfaces }: SettingsInputs): AgentSettings {
  const type = parseProxyType(args.type);
  const podLabels = readDownwardApiFile(POD_LABELS_PATH);
  const podAnnotations = readDownwardApiFile(POD_ANNOTATIONS_PATH);
  const exclude = podAnnotations?.['traffic.sidecar.istio.io/excludeInterfaces']?.split(',').filter(Boolean);
  const identity = proxyIdentity({ type, env, domain: args.domain, interfaces, excludeInterfaces: exclude });
  const pc = constructProxyConfig({
    meshConfig: readIfExists(args.meshConfigFile, '--meshConfig'), proxyConfigEnv: env.PROXY_CONFIG,
    annotation: podAnnotations?.['proxy.istio.io/config'], serviceCluster: args.serviceCluster,
    concurrency: args.concurrency, sidecar: type === 'sidecar', podAnnotations,
  });
  const discoveryAddress = String(pc.discoveryAddress);
  const { host, port } = splitHostPort(discoveryAddress, 'discoveryAddress');
  const mtls = pc.controlPlaneAuthPolicy === 'MUTUAL_TLS';
  const proxyMetadata = (pc.proxyMetadata ?? {}) as Record<string, string>;
  // istiod's 15010 port is plaintext gRPC (Istio's CA client makes the same exception).
  const tls = pc.controlPlaneAuthPolicy === 'NONE' || port === 15010 ? undefined
    : { rootCert: rootCertForXds(env, proxyMetadata), san: env.ISTIOD_SAN || pilotSan(discoveryAddress) };
  const envoyStatusPort = envInt(env, 'ENVOY_STATUS_PORT', 15021);
  const envoyPrometheusPort = envInt(env, 'ENVOY_PROMETHEUS_PORT', 15090);
  const peerDiscovery = env.PEER_METADATA_DISCOVERY;
  const node = buildNode({
    id: identity.id, env, proxyConfig: pc, instanceIps: identity.ipAddresses, version: VERSION,
    envoyStatusPort, envoyPrometheusPort, stsPort: args.stsPort, pilotSan: mtls ? [pilotSan(discoveryAddress)] : [],
    outlierLogPath: args.outlierLogPath, exitOnZeroActiveConnections: envBool(env, 'EXIT_ON_ZERO_ACTIVE_CONNECTIONS', false),
    metadataDiscovery: peerDiscovery === undefined ? undefined : parseGoBool(peerDiscovery) ?? false,
    envoySkipDeprecatedLogs: envBool(env, 'ENVOY_SKIP_DEPRECATED_LOGS', true),
    workloadIdentitySocketFile: env.WORKLOAD_IDENTITY_SOCKET_FILE ?? 'socket', podLabels, podAnnotations,
  });
  const extraXdsHeaders: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && k.startsWith('XDS_HEADER_')) extraXdsHeaders[k.slice(11)] = v;
  const statsMatcher = istioStatsMatcher({
    annotations: podAnnotations, proxyStatsMatcher: pc.proxyStatsMatcher, instanceIps: identity.ipAddresses,
    exitOnZeroActiveConnections: envBool(env, 'EXIT_ON_ZERO_ACTIVE_CONNECTIONS', false),
    // As the bootstrap's metadata_discovery extension (bootstrap-render.ts): waypoints, or METADATA_DISCOVERY.
    metadataDiscovery: type === 'waypoint' || node.metadata.METADATA_DISCOVERY === true || node.metadata.METADATA_DISCOVERY === 'true',
  });
  const custom = String(pc.customConfigFile ?? '');
  const concurrency = typeof pc.concurrency === 'number' && pc.concurrency > 0 ? pc.concurrency : availableParallelism();
  return {
    identity, proxyConfig: pc, node, statsMatcher,
    bootstrapPath: custom || join(String(pc.configPath), 'envoy-rev.json'), renderBootstrap: !custom,
    xds: { host, port, tls }, adminPort: Number(pc.proxyAdminPort), statusPort: Number(pc.statusPort),
    envoyStatusPort, envoyPrometheusPort, clusterId: env.ISTIO_META_CLUSTER_ID ?? '', tokenPath: tokenPathFor(env),
    extraXdsHeaders, concurrency, drainTimeS: durationSeconds(pc, 'drainDuration', 45),
    // The injector copies proxyMetadata into the container's environment; honour it either way.
    lifecycle: lifecycleSettings({ ...env, ...proxyMetadata }, {
      terminationDrainS: durationSeconds(pc, 'terminationDrainDuration', 5), sidecar: type === 'sidecar',
      ownListenerPorts: [envoyStatusPort, envoyPrometheusPort],
    }),
    logLevel: envoyLogLevel(args.proxyLogLevel), outlierLogPath: args.outlierLogPath,
  };
}
