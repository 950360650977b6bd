/**
 * The Envoy node pilot-agent puts in the bootstrap (bootstrap.GetNodeMetaData +
 * ConvertNodeToXDSNode), from the environment:
 *   1. ISTIO_META_* keys of ProxyConfig.proxyMetadata, then ISTIO_META_* env vars (strings),
 *      then ISTIO_METAJSON_* env vars (JSON objects whose keys merge in; the variable's name is ignored);
 *   2. that map is read into the typed metadata (metadata-fields.ts), which the agent then fills
 *      from its own options (INSTANCE_IPS, ports, PROXY_CONFIG, PILOT_SAN, ...), POD_NAME /
 *      POD_NAMESPACE / SERVICE_ACCOUNT, ISTIO_METAJSON_LABELS and the pod's labels/annotations files;
 *   3. the typed fields are written out, and every raw key they do not cover is added as given.
 */
import { ConfigError } from '../core/errors.ts';
import { log } from '../core/log.ts';
import { proxyConfigProtoJson, type ProxyConfig } from './proxy-config.ts';
import { METADATA_FIELDS, decodeField, encodeField, typedFieldFor } from './metadata-fields.ts';

export type Env = Readonly<Record<string, string | undefined>>;

export interface Locality { readonly region?: string; readonly zone?: string; readonly sub_zone?: string }

export interface IstioNode {
  readonly id: string;
  readonly cluster: string;
  readonly locality: Locality;
  readonly metadata: Readonly<Record<string, unknown>>;
}

/** bootstrap.MetadataOptions: what the agent knows besides the environment. */
export interface NodeMetadataOptions {
  readonly id: string;
  readonly env: Env;
  readonly proxyConfig: ProxyConfig;
  readonly instanceIps: readonly string[];
  /** ISTIO_VERSION when ISTIO_META_ISTIO_VERSION does not set one (pilot-agent's own version). */
  readonly version: string;
  readonly envoyStatusPort: number;
  readonly envoyPrometheusPort: number;
  readonly stsPort?: number;
  readonly pilotSan?: readonly string[];
  readonly outlierLogPath?: string;
  readonly exitOnZeroActiveConnections?: boolean;
  /** PEER_METADATA_DISCOVERY when set; otherwise METADATA_DISCOVERY follows ENABLE_HBONE. */
  readonly metadataDiscovery?: boolean;
  readonly envoySkipDeprecatedLogs?: boolean;
  readonly workloadIdentitySocketFile?: string;
  /** The downward-API labels / annotations files, when they exist. */
  readonly podLabels?: Readonly<Record<string, string>>;
  readonly podAnnotations?: Readonly<Record<string, string>>;
}

const META = 'ISTIO_META_';
const META_JSON = 'ISTIO_METAJSON_';
/** Pod labels that override the registry's locality (`region.zone.subzone`, dots since labels cannot hold `/`). */
const LOCALITY_LABELS = ['istio-locality', 'topology.istio.io/locality'];

/** Step 1: the untyped map, in pilot-agent's precedence order. */
export function rawMetadata(env: Env, proxyConfig: ProxyConfig): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  const pm = (proxyConfig.proxyMetadata ?? {}) as Record<string, string>;
  for (const [k, v] of Object.entries(pm)) if (k.startsWith(META)) raw[k.slice(META.length)] = v;
  for (const [k, v] of Object.entries(env)) if (v !== undefined && k.startsWith(META)) raw[k.slice(META.length)] = v;
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || !k.startsWith(META_JSON)) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(v);
    } catch (err) {
      log.warn(`env variable ${k} [${v}] failed json unmarshal: ${(err as Error).message}`);
      continue;
    }
    if (parsed === null) continue;
    if (typeof parsed !== 'object' || Array.isArray(parsed)) { log.warn(`env variable ${k} [${v}] is not a JSON object`); continue; }
    Object.assign(raw, parsed);
  }
  return raw;
}

/** Step 2: raw → typed (keys in sorted order, as Go re-encodes the map, so the last spelling of a key wins). */
function typedFrom(raw: Record<string, unknown>): Map<string, unknown> {
  const typed = new Map<string, unknown>();
  for (const key of Object.keys(raw).sort()) {
    const field = typedFieldFor(key);
    const v = raw[key];
    if (!field || v === null) continue;
    typed.set(field, decodeField(field, METADATA_FIELDS[field], v));
  }
  return typed;
}

/** ISTIO_METAJSON_LABELS as map[string]string: string entries are kept, others are warned about. */
function jsonLabels(text: string): Record<string, string> {
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch (err) {
    log.warn(`ISTIO_METAJSON_LABELS [${text}] failed json unmarshal: ${(err as Error).message}`);
    return {};
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (typeof v === 'string') out[k] = v;
    else log.warn(`ISTIO_METAJSON_LABELS: label ${k} is not a string`);
  }
  return out;
}

export function buildNode(o: NodeMetadataOptions): IstioNode {
  const raw = rawMetadata(o.env, o.proxyConfig);
  const t = typedFrom(raw);
  if (!t.get('ISTIO_VERSION')) t.set('ISTIO_VERSION', o.version);
  t.set('INSTANCE_IPS', [...new Set(o.instanceIps)]);
  if (o.stsPort) t.set('STS_PORT', String(o.stsPort));
  t.set('ENVOY_STATUS_PORT', o.envoyStatusPort);
  t.set('ENVOY_PROMETHEUS_PORT', o.envoyPrometheusPort);
  t.set('EXIT_ON_ZERO_ACTIVE_CONNECTIONS', o.exitOnZeroActiveConnections ?? false);
  t.set('METADATA_DISCOVERY', o.metadataDiscovery);
  t.set('ENVOY_SKIP_DEPRECATED_LOGS', o.envoySkipDeprecatedLogs ?? false);
  t.set('WORKLOAD_IDENTITY_SOCKET_FILE', o.workloadIdentitySocketFile ?? '');
  t.set('PROXY_CONFIG', proxyConfigProtoJson(o.proxyConfig));

  for (const [k, v] of Object.entries(o.env)) {
    if (v === undefined) continue;
    if (k === 'ISTIO_METAJSON_LABELS') {
      const m = jsonLabels(v);
      if (Object.keys(m).length) { t.set('LABELS', m); t.set('STATIC_LABELS', m); }
    } else if (k === 'POD_NAME') t.set('NAME', v);
    else if (k === 'POD_NAMESPACE') t.set('NAMESPACE', v);
    else if (k === 'SERVICE_ACCOUNT') t.set('SERVICE_ACCOUNT', v);
  }
  if (o.podLabels) {
    const labels: Record<string, string> = { ...(t.get('STATIC_LABELS') as Record<string, string> | undefined) };
    for (const [k, v] of Object.entries(o.podLabels)) if (k !== 'pod-template-hash') labels[k] = v;
    t.set('LABELS', labels);
  }
  if (o.podAnnotations) t.set('ANNOTATIONS', { ...(t.get('ANNOTATIONS') as Record<string, string> | undefined), ...o.podAnnotations });

  const locality = localityFromLabels(t);
  t.set('PILOT_SAN', [...(o.pilotSan ?? [])]);
  t.set('OUTLIER_LOG_PATH', o.outlierLogPath ?? '');
  if (t.get('METADATA_DISCOVERY') === undefined) t.set('METADATA_DISCOVERY', t.get('ENABLE_HBONE') === true);

  const metadata: Record<string, unknown> = {};
  for (const [k, v] of t) {
    const out = v === undefined ? undefined : encodeField(METADATA_FIELDS[k], v);
    if (out !== undefined) metadata[k] = out;
  }
  for (const [k, v] of Object.entries(raw)) if (!(k in metadata)) metadata[k] = v;
  return { id: o.id, cluster: serviceCluster(o.proxyConfig, t), locality, metadata: sortKeys(metadata) };
}

function localityFromLabels(t: Map<string, unknown>): Locality {
  const labels = t.get('LABELS') as Record<string, string> | undefined;
  if (!labels) return {};
  const key = LOCALITY_LABELS.find((k) => labels[k]);
  if (!key) return {};
  const value = labels[key].replaceAll('.', '/');
  t.set('LABELS', { ...labels, [key]: value });
  const [region, zone, subZone] = value.split('/');
  return { ...(region ? { region } : {}), ...(zone ? { zone } : {}), ...(subZone ? { sub_zone: subZone } : {}) };
}

/** getServiceCluster: the Envoy `--service-cluster` Istio derives (`<app>.<namespace>` by default). */
function serviceCluster(pc: ProxyConfig, t: Map<string, unknown>): string {
  const labels = (t.get('LABELS') ?? {}) as Record<string, string>;
  const ns = (t.get('NAMESPACE') ?? '') as string;
  const workload = (t.get('WORKLOAD_NAME') ?? '') as string;
  const orDefault = (name: string): string => {
    if (name !== '' && name !== 'istio-proxy') return name;
    if (labels.app !== undefined) return `${labels.app}.${ns}`;
    if (workload) return `${workload}.${ns}`;
    return ns ? `istio-proxy.${ns}` : 'istio-proxy';
  };
  const tracingName = pc.tracingServiceName as string | undefined;
  if (tracingName === undefined || pc.serviceCluster !== undefined) return orDefault((pc.serviceCluster ?? 'istio-proxy') as string);
  const canonical = labels['service.istio.io/canonical-name'] ?? labels['app.kubernetes.io/name'] ?? labels.app ?? (workload || 'istio-proxy');
  if (tracingName === 'CANONICAL_NAME_ONLY') return orDefault(canonical);
  if (tracingName === 'CANONICAL_NAME_AND_NAMESPACE') return ns ? `${canonical}.${ns}` : orDefault(canonical);
  return orDefault('istio-proxy');
}

function sortKeys(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(o).sort()) out[k] = o[k];
  return out;
}

/** Node id `<type>~<ip>~<pod>.<namespace>~<domain>` (model.Proxy.ServiceNode). */
export function serviceNode(type: string, ip: string, podName: string, podNamespace: string, domain: string): string {
  if (type.includes('~') || domain.includes('~')) throw new ConfigError('', 'node id parts must not contain "~"');
  return [type, ip, `${podName}.${podNamespace}`, domain].join('~');
}
