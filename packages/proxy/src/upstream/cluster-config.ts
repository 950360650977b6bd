import type { Msg } from '../config/fields.ts';
import { readAddress, type SocketAddress } from '../config/address.ts';
import { compileUpstreamTls, UPSTREAM_TLS, type UpstreamTls } from '../tls/context.ts';
import { compileLocalityLbOptions, type LocalityLbOptions } from './locality.ts';
import { compileHashLbConfig, type HashLbConfig } from './lb-hash.ts';
import { compileOutlierDetection, type OutlierConfig } from './outlier-config.ts';
import { readUpstreamBind } from './bind-config.ts';
import { readUpstreamMetadataExchange } from './cluster-filters.ts';
import { sameLimits } from './config-sharing.ts';
import { EMPTY_LIST, sharedString } from '../core/shared-values.ts';

const HTTP_PROTOCOL_OPTIONS = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';
const HTTP_PROTOCOL_OPTIONS_URL = 'type.googleapis.com/' + HTTP_PROTOCOL_OPTIONS;
const RAW_BUFFER_URL = 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer';
export const INTERNAL_UPSTREAM_URL = 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport';

export const DISCOVERY_TYPES = ['STATIC', 'STRICT_DNS', 'LOGICAL_DNS', 'EDS', 'ORIGINAL_DST'] as const;
/** Indexed by the proto's enum numbers: 4 is reserved, so MAGLEV is 5. */
export const LB_POLICIES = ['ROUND_ROBIN', 'LEAST_REQUEST', 'RING_HASH', 'RANDOM', '(reserved 4)', 'MAGLEV', 'CLUSTER_PROVIDED', 'LOAD_BALANCING_POLICY_CONFIG'] as const;
const SUPPORTED_LB = new Set(['ROUND_ROBIN', 'LEAST_REQUEST', 'RANDOM', 'RING_HASH', 'MAGLEV', 'CLUSTER_PROVIDED']);
const DNS_FAMILIES = ['AUTO', 'V4_ONLY', 'V6_ONLY', 'V4_PREFERRED', 'ALL'] as const;
const HEALTH = ['UNKNOWN', 'HEALTHY', 'UNHEALTHY', 'DRAINING', 'TIMEOUT', 'DEGRADED'] as const;

/** Behaviour-changing cluster fields that are not built yet: refuse rather than silently ignore. */
const NOT_YET = ['health_checks', 'lb_subset_config',
  'cluster_type', 'load_balancing_policy', 'transport_socket_matcher'];

export type UpstreamProtocol = 'http1' | 'http2' | 'downstream';

export interface EndpointConfig {
  readonly address: SocketAddress;
  readonly hostname: string;
  readonly weight: number;
  readonly healthy: boolean;
  readonly priority: number;
  readonly localityWeight: number;
  readonly zone: string;
  readonly region: string;
  readonly subZone: string;
  readonly degraded: boolean;
  /** metadata.filter_metadata["envoy.transport_socket_match"]: what transport_socket_matches look at. */
  readonly socketMatch: Readonly<Record<string, unknown>> | undefined;
  /** envoy_internal_address: connect in-process to this internal listener. */
  readonly internal: InternalEndpoint | undefined;
  /** pipe: the unix domain socket path to connect to (Linux abstract names start with NUL). */
  readonly pipe?: string;
  /** LbEndpoint.metadata.filter_metadata (what internal_upstream passthrough_metadata can copy). */
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
}

export interface InternalEndpoint {
  readonly listener: string;
  readonly endpointId: string;
}

/** InternalUpstreamTransport: which metadata namespaces travel to the internal listener's connection. */
export interface InternalUpstreamConfig {
  readonly passthrough: ReadonlyArray<{ readonly kind: 'host' | 'cluster'; readonly name: string }>;
}

/** One transport_socket_matches entry: endpoints whose socket-match metadata has every `match` field use `tls`. */
export interface TransportSocketMatch {
  readonly name: string;
  readonly match: Readonly<Record<string, unknown>>;
  /** undefined = raw_buffer (plaintext). */
  readonly tls: UpstreamTls | undefined;
}

/** One priority's circuit_breakers.thresholds entry (Envoy's defaults: 1024 / 1024 / 1024 / 3). */
export interface CircuitBreakerLimits {
  readonly maxConnections: number;
  readonly maxPendingRequests: number;
  readonly maxRequests: number;
  readonly maxRetries: number;
  /** track_remaining: publish the remaining_* gauges. */
  readonly trackRemaining: boolean;
}

/** One immutable compiled Cluster. */
export interface ClusterConfig {
  readonly name: string;
  readonly type: (typeof DISCOVERY_TYPES)[number];
  readonly lbPolicy: (typeof LB_POLICIES)[number];
  readonly connectTimeoutMs: number;
  readonly endpoints: readonly EndpointConfig[];
  /** EDS: the ClusterLoadAssignment name to subscribe to (service_name, or the cluster name). */
  readonly edsServiceName: string;
  readonly dnsFamily: (typeof DNS_FAMILIES)[number];
  readonly dnsRefreshMs: number;
  readonly protocol: UpstreamProtocol;
  readonly idleTimeoutMs: number;
  readonly maxRequestsPerConnection: number;
  readonly maxConcurrentStreams: number;
  /** transport_socket: the default when no transport_socket_matches entry applies. */
  readonly tls: UpstreamTls | undefined;
  readonly socketMatches: readonly TransportSocketMatch[];
  /** Some transport socket (default or matched) is TLS: the cluster keeps ssl.* stats. */
  readonly anyTls: boolean;
  /** circuit_breakers DEFAULT priority (the one every route uses). */
  readonly limits: CircuitBreakerLimits;
  /** circuit_breakers HIGH priority: compiled and published as stats; no route selects it yet. */
  readonly limitsHigh: CircuitBreakerLimits;
  /** circuit_breakers.per_host_thresholds max_connections (unlimited when unset). */
  readonly perHostMaxConnections: number;
  readonly outlier: OutlierConfig | undefined;
  /** ORIGINAL_DST: take the destination from `x-envoy-original-dst-host`. */
  readonly useHttpHeader: boolean;
  /** common_lb_config.healthy_panic_threshold, percent. */
  readonly panicThreshold: number;
  /** Priority / locality / panic options (Envoy's overprovisioning factor and friends). */
  readonly localityLb: LocalityLbOptions;
  /** RING_HASH / MAGLEV settings; undefined for other policies. */
  readonly hashLb: HashLbConfig | undefined;
  readonly originalDstCleanupMs: number;
  /** original_dst_lb_config.upstream_port_override (0: keep the destination's port). */
  readonly upstreamPortOverride: number;
  /** transport_socket InternalUpstreamTransport; undefined for raw/TLS transports. */
  readonly internalUpstream: InternalUpstreamConfig | undefined;
  /** upstream_bind_config.source_address: connect from this address (Istio's inbound 127.0.0.6). */
  readonly sourceAddress: string | undefined;
  /** filters: Istio's TCP metadata exchange upstream (its ALPN protocol), the one upstream filter supported. */
  readonly upstreamMx: string | undefined;
  /** Cluster metadata.filter_metadata. */
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
  /**
   * The config as written, for /config_dump of static clusters. Not kept for CDS clusters (the
   * config layer remembers those as bytes): 20,000 of them held ~1.3 KB of JSON each.
   */
  readonly source: Record<string, unknown> | undefined;
}

export function compileCluster(m: Msg, keepSource = true): ClusterConfig {
  const name = m.requiredStr('name');
  for (const f of NOT_YET) if (m.has(f)) throw m.error(f, 'is not supported yet');
  const type = m.enumOf('type', DISCOVERY_TYPES);
  const edsServiceName = type === 'EDS' ? readEdsConfig(m, name) : '';
  if (type !== 'EDS' && m.has('eds_cluster_config')) throw m.error('eds_cluster_config', 'is only for EDS clusters');
  const lbPolicy = m.enumOf('lb_policy', LB_POLICIES);
  if (!SUPPORTED_LB.has(lbPolicy)) throw m.error('lb_policy', `${lbPolicy} is not supported yet`);
  if (type === 'ORIGINAL_DST' && m.has('load_assignment')) throw m.error('load_assignment', 'ORIGINAL_DST clusters take no endpoints');

  const protocol = readProtocol(m);
  const breakers = readCircuitBreakers(m);
  const od = m.msg('outlier_detection');
  const odc = m.msg('original_dst_lb_config');
  const localityLb = readLocalityLb(m);
  const internalUpstream = readInternalUpstream(m.msg('transport_socket'));
  const tls = internalUpstream ? undefined : readTransportSocket(m.msg('transport_socket'));
  const socketMatchList = m.list('transport_socket_matches');
  const socketMatches = socketMatchList.length === 0 ? EMPTY_LIST : socketMatchList.map((t) => ({
    name: t.requiredStr('name'),
    match: (t.msg('match')?.raw ?? {}) as Record<string, unknown>,
    tls: readTransportSocket(t.requiredMsg('transport_socket')),
  }));
  return {
    name,
    type,
    lbPolicy,
    connectTimeoutMs: m.durationMs('connect_timeout', 5000),
    endpoints: type === 'EDS' ? EMPTY_LIST : checkInternalEndpoints(m, readEndpoints(m, type), tls !== undefined || socketMatches.length > 0, protocol.protocol),
    edsServiceName,
    dnsFamily: m.enumOf('dns_lookup_family', DNS_FAMILIES),
    dnsRefreshMs: m.durationMs('dns_refresh_rate', 5000),
    protocol: protocol.protocol,
    idleTimeoutMs: protocol.idleTimeoutMs,
    maxRequestsPerConnection: protocol.maxRequestsPerConnection,
    maxConcurrentStreams: protocol.maxConcurrentStreams,
    tls,
    socketMatches,
    anyTls: tls !== undefined || socketMatches.some((t) => t.tls !== undefined),
    limits: breakers.normal,
    limitsHigh: breakers.high,
    perHostMaxConnections: breakers.perHostMaxConnections,
    outlier: od ? compileOutlierDetection(od) : undefined,
    useHttpHeader: odc?.bool('use_http_header') ?? false,
    panicThreshold: localityLb.panicThreshold,
    localityLb,
    hashLb: compileHashLbConfig(m),
    originalDstCleanupMs: m.durationMs('cleanup_interval', 5000),
    upstreamPortOverride: readPortOverride(odc),
    internalUpstream,
    sourceAddress: readUpstreamBind(m, tls !== undefined || socketMatches.some((t) => t.tls !== undefined)),
    upstreamMx: readUpstreamMetadataExchange(m),
    metadata: readFilterMetadata(m),
    source: keepSource ? m.raw : undefined,
  };
}

const PRIORITIES = ['DEFAULT', 'HIGH'] as const;
const THRESHOLD_FIELDS = ['priority', 'max_connections', 'max_pending_requests', 'max_requests', 'max_retries', 'track_remaining'];

function readLimits(t: Msg | undefined): CircuitBreakerLimits {
  if (t) {
    if (t.has('retry_budget')) throw t.error('retry_budget', 'retry budgets are not supported yet; use max_retries');
    if (t.has('max_connection_pools')) throw t.error('max_connection_pools', 'is not supported yet');
    t.onlyFields(THRESHOLD_FIELDS);
  }
  return sameLimits({
    maxConnections: t?.num('max_connections', 1024) ?? 1024,
    maxPendingRequests: t?.num('max_pending_requests', 1024) ?? 1024,
    maxRequests: t?.num('max_requests', 1024) ?? 1024,
    maxRetries: t?.num('max_retries', 3) ?? 3,
    trackRemaining: t?.bool('track_remaining') ?? false,
  });
}

/** circuit_breakers: one thresholds entry per priority (a repeated priority is an error, as in Envoy). */
function readCircuitBreakers(m: Msg): { normal: CircuitBreakerLimits; high: CircuitBreakerLimits; perHostMaxConnections: number } {
  const cb = m.msg('circuit_breakers');
  let normal: Msg | undefined, high: Msg | undefined;
  let perHostMaxConnections = Infinity;
  if (cb) {
    cb.onlyFields(['thresholds', 'per_host_thresholds']);
    for (const t of cb.list('thresholds')) {
      const p = t.enumOf('priority', PRIORITIES);
      if ((p === 'DEFAULT' ? normal : high) !== undefined) throw t.error('priority', `${p} is given twice`);
      if (p === 'DEFAULT') normal = t; else high = t;
    }
    const perHost = cb.list('per_host_thresholds');
    if (perHost.length > 1) throw cb.error('per_host_thresholds', 'only one (DEFAULT priority) entry is supported');
    for (const t of perHost) {
      // Envoy reads only max_connections from per-host thresholds.
      t.onlyFields(['priority', 'max_connections', 'track_remaining']);
      if (t.enumOf('priority', PRIORITIES) !== 'DEFAULT') throw t.error('priority', 'only DEFAULT per-host thresholds are supported');
      perHostMaxConnections = t.num('max_connections', Infinity);
    }
  }
  return { normal: readLimits(normal), high: readLimits(high), perHostMaxConnections };
}

/** eds_cluster_config: EDS over ADS (what istiod sends); returns the assignment name. */
function readEdsConfig(m: Msg, clusterName: string): string {
  const eds = m.msg('eds_cluster_config');
  const source = eds?.msg('eds_config');
  if (source && !source.has('ads')) throw source.error('', 'only `ads: {}` config sources are supported for EDS');
  if (!source && eds) throw eds.error('eds_config', 'is required');
  if (m.has('load_assignment')) throw m.error('load_assignment', 'EDS clusters take their endpoints from EDS');
  return eds?.str('service_name') || clusterName;
}

function readEndpoints(m: Msg, type: ClusterConfig['type']): EndpointConfig[] {
  const la = m.msg('load_assignment');
  if (!la) {
    // A STATIC cluster without endpoints is valid in Envoy (istiod's BlackHoleCluster is one).
    if (type !== 'ORIGINAL_DST' && type !== 'STATIC') throw m.error('load_assignment', 'is required for DNS clusters');
    return [];
  }
  return readLoadAssignment(la, type);
}

/** A ClusterLoadAssignment's endpoints (static load_assignment, or an EDS resource). */
export function readLoadAssignment(la: Msg, type: ClusterConfig['type']): EndpointConfig[] {
  const out: EndpointConfig[] = [];
  for (const locality of la.list('endpoints')) {
    const priority = locality.num('priority');
    // Envoy reads an unset locality weight as 0 (it only matters with locality_weighted_lb_config).
    const localityWeight = locality.num('load_balancing_weight', 0);
    const loc = locality.msg('locality');
    const zone = sharedString(loc?.str('zone') ?? '');
    const region = sharedString(loc?.str('region') ?? ''), subZone = sharedString(loc?.str('sub_zone') ?? '');
    for (const lbe of locality.list('lb_endpoints')) {
      if (lbe.has('endpoint_name')) throw lbe.error('endpoint_name', 'named endpoints are not supported');
      const ep = lbe.requiredMsg('endpoint');
      const am = ep.requiredMsg('address');
      const internal = readInternalEndpoint(am, type);
      const pipe = readPipeEndpoint(am, type);
      const address = internal ? { address: `envoy://${internal.listener}/${internal.endpointId}`, port: 0, isName: false }
        : pipe !== undefined ? { address: pipe.name, port: 0, isName: false } : readAddress(am, type === 'STRICT_DNS' || type === 'LOGICAL_DNS');
      const health = lbe.enumOf('health_status', HEALTH);
      const socketMatch = lbe.msg('metadata')?.msg('filter_metadata')?.msg(SOCKET_MATCH_KEY)?.raw;
      out.push({
        address,
        hostname: ep.str('hostname'),
        weight: lbe.num('load_balancing_weight', 1),
        healthy: health === 'UNKNOWN' || health === 'HEALTHY',
        degraded: health === 'DEGRADED',
        priority,
        localityWeight,
        zone,
        region,
        subZone,
        socketMatch,
        internal,
        pipe: pipe?.path,
        metadata: readFilterMetadata(lbe),
      });
    }
  }
  if (type === 'LOGICAL_DNS' && out.length !== 1) throw la.error('endpoints', 'LOGICAL_DNS clusters take exactly one endpoint');
  return out;
}

function readProtocol(m: Msg): { protocol: UpstreamProtocol; idleTimeoutMs: number; maxRequestsPerConnection: number; maxConcurrentStreams: number } {
  let protocol: UpstreamProtocol = m.has('http2_protocol_options') ? 'http2' : 'http1';
  let idleTimeoutMs = 3_600_000;
  let maxRequestsPerConnection = m.num('max_requests_per_connection', 0);
  let maxConcurrentStreams = m.msg('http2_protocol_options')?.num('max_concurrent_streams', 2147483647) ?? 2147483647;
  const opts = m.msg('typed_extension_protocol_options');
  if (opts) {
    for (const key of Object.keys(opts.raw)) {
      if (key !== HTTP_PROTOCOL_OPTIONS) throw opts.error(key, `unsupported protocol options extension ${key}`);
      const hpo = opts.requiredMsg(key);
      const url = hpo.str('@type');
      if (url && url !== HTTP_PROTOCOL_OPTIONS_URL) throw hpo.error('@type', `expected ${HTTP_PROTOCOL_OPTIONS_URL}, got ${url}`);
      const explicit = hpo.msg('explicit_http_config');
      if (explicit?.has('http2_protocol_options')) {
        protocol = 'http2';
        maxConcurrentStreams = explicit.requiredMsg('http2_protocol_options').num('max_concurrent_streams', maxConcurrentStreams);
      } else if (explicit?.has('http3_protocol_options')) {
        throw explicit.error('http3_protocol_options', 'HTTP/3 upstreams are not supported');
      } else if (explicit) protocol = 'http1';
      if (hpo.has('use_downstream_protocol_config')) protocol = 'downstream';
      if (hpo.has('auto_config')) throw hpo.error('auto_config', 'ALPN-negotiated upstream protocol is not supported yet');
      const common = hpo.msg('common_http_protocol_options');
      if (common) {
        idleTimeoutMs = common.durationMs('idle_timeout', idleTimeoutMs);
        maxRequestsPerConnection = common.num('max_requests_per_connection', maxRequestsPerConnection);
      }
    }
  }
  return { protocol, idleTimeoutMs, maxRequestsPerConnection, maxConcurrentStreams };
}

const SOCKET_MATCH_KEY = 'envoy.transport_socket_match';

/** The transport socket for an endpoint: the first transport_socket_matches entry its metadata satisfies, else the cluster's. */
export function socketMatchFor(cfg: ClusterConfig, metadata: Readonly<Record<string, unknown>> | undefined): { name: string; tls: UpstreamTls | undefined } {
  for (const t of cfg.socketMatches) {
    let ok = true;
    for (const [k, v] of Object.entries(t.match)) {
      if (!metadata || !sameValue(metadata[k], v)) { ok = false; break; }
    }
    if (ok) return t;
  }
  return { name: 'default', tls: cfg.tls };
}

function sameValue(a: unknown, b: unknown): boolean {
  return a === b || (typeof a === 'object' && typeof b === 'object' && JSON.stringify(a) === JSON.stringify(b));
}

/** TLS or HTTP/2 towards an internal listener is not built: refuse it where the endpoints are known. */
function checkInternalEndpoints(m: Msg, endpoints: EndpointConfig[], tls: boolean, protocol: UpstreamProtocol): EndpointConfig[] {
  if (endpoints.some((e) => e.internal)) {
    if (tls) throw m.error('transport_socket', 'TLS to internal listener endpoints is not supported');
    if (protocol === 'http2') throw m.error('http2_protocol_options', 'HTTP/2 to internal listener endpoints is not supported yet');
  }
  if (tls && endpoints.some((e) => e.pipe !== undefined)) throw m.error('transport_socket', 'TLS to unix domain socket (pipe) endpoints is not supported yet');
  return endpoints;
}

const PASSTHROUGH_KINDS = ['host', 'cluster'] as const;

/** InternalUpstreamTransport: passthrough_metadata plus the wrapped transport (raw_buffer only here). */
function readInternalUpstream(ts: Msg | undefined): InternalUpstreamConfig | undefined {
  const tc = ts?.msg('typed_config');
  if (!tc || tc.str('@type') !== INTERNAL_UPSTREAM_URL) return undefined;
  tc.onlyFields(['@type', 'passthrough_metadata', 'transport_socket']);
  const inner = tc.msg('transport_socket');
  if (inner && readTransportSocket(inner) !== undefined) throw inner.error('typed_config', 'only raw_buffer can be wrapped by internal_upstream');
  const passthrough = tc.list('passthrough_metadata').map((p) => {
    const kind = p.requiredMsg('kind');
    const k = PASSTHROUGH_KINDS.find((x) => kind.has(x));
    if (!k || Object.keys(kind.raw).length !== 1) throw kind.error('', `expected one of ${PASSTHROUGH_KINDS.join(', ')} (route and request metadata do not reach a connection)`);
    return { kind: k, name: p.requiredStr('name') };
  });
  return { passthrough };
}

/** envoy_internal_address endpoints: STATIC and EDS clusters only (Envoy resolves no names for them). */
function readInternalEndpoint(a: Msg, type: ClusterConfig['type']): InternalEndpoint | undefined {
  const ia = a.msg('envoy_internal_address');
  if (!ia) return undefined;
  if (type !== 'STATIC' && type !== 'EDS') throw a.error('envoy_internal_address', `internal addresses need a STATIC or EDS cluster, not ${type}`);
  return { listener: ia.requiredStr('server_listener_name'), endpointId: ia.str('endpoint_id') };
}

/**
 * pipe endpoints (Envoy's Pipe address): STATIC and EDS clusters. `@name` is a Linux abstract socket;
 * the host prints as the path, as Envoy prints a pipe address. `mode` is a listener's concern.
 */
function readPipeEndpoint(a: Msg, type: ClusterConfig['type']): { path: string; name: string } | undefined {
  const p = a.msg('pipe');
  if (!p) return undefined;
  if (type !== 'STATIC' && type !== 'EDS') throw a.error('pipe', `unix domain socket addresses need a STATIC or EDS cluster, not ${type}`);
  p.onlyFields(['path', 'mode']);
  const name = p.requiredStr('path');
  if (name === '@') throw p.error('path', 'an abstract socket needs a name after @');
  return { path: name.startsWith('@') ? `\0${name.slice(1)}` : name, name };
}

function readFilterMetadata(m: Msg): Readonly<Record<string, unknown>> | undefined {
  const fm = m.msg('metadata')?.msg('filter_metadata');
  return fm ? fm.raw : undefined;
}

function readPortOverride(odc: Msg | undefined): number {
  const p = odc?.num('upstream_port_override', 0) ?? 0;
  if (!Number.isInteger(p) || p < 0 || p > 65535) throw odc!.error('upstream_port_override', `invalid port ${p}`);
  return p;
}

function readTransportSocket(ts: Msg | undefined): UpstreamTls | undefined {
  if (!ts) return undefined;
  const tc = ts.msg('typed_config');
  const url = tc?.str('@type') ?? '';
  if (url === RAW_BUFFER_URL) return undefined;
  if (url === UPSTREAM_TLS && tc) return compileUpstreamTls(tc);
  if (!tc && ts.str('name') === 'envoy.transport_sockets.raw_buffer') return undefined;
  throw ts.error('typed_config', `unsupported transport socket ${url || ts.str('name')}`);
}

const COMMON_LB_FIELDS = ['healthy_panic_threshold', 'update_merge_window', 'locality_weighted_lb_config', 'zone_aware_lb_config', 'consistent_hashing_lb_config'];

/** common_lb_config: the fields we act on are read by compileLocalityLbOptions / compileHashLbConfig; others are refused. */
function readLocalityLb(m: Msg): LocalityLbOptions {
  const c = m.msg('common_lb_config');
  if (c) for (const f of Object.keys(c.raw)) if (!COMMON_LB_FIELDS.includes(f)) throw c.error(f, 'is not supported yet');
  return compileLocalityLbOptions(m);
}
