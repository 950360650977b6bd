/**
 * The stats_matcher pilot-agent writes into the bootstrap (Istio's envoy_bootstrap.json template and
 * its stats options): `reporter=` (Istio's standard metrics), `workload_discovery` with metadata
 * discovery, the inclusion prefixes / suffixes / regexps — from the sidecar.istio.io/statsInclusion*
 * annotations, else ProxyConfig.proxyStatsMatcher, then the ones Istio always needs — and `component`
 * and `istio`. `{pod_ip}` in a pattern becomes one pattern per instance IP. Everything else (per-cluster,
 * per-listener traffic stats) is never instantiated.
 */

/** Always kept: readiness and istioctl read these (pkg/bootstrap). */
const REQUIRED_PREFIXES = ['cluster_manager', 'listener_manager', 'server', 'cluster.xds-grpc', 'wasm'];
const RBAC_SUFFIXES = ['rbac.allowed', 'rbac.denied', 'shadow_allowed', 'shadow_denied'];
/** Draining with EXIT_ON_ZERO_ACTIVE_CONNECTIONS counts active downstream connections. */
const DRAIN_SUFFIX = 'downstream_cx_active';
/** VirtualService stat_prefix metrics. */
const REQUIRED_REGEXPS = ['vhost\\..*\\.route\\..*'];

export interface StatsInclusionInputs {
  /** The pod's annotations (downward API file), if any. */
  readonly annotations: Readonly<Record<string, string>> | undefined;
  /** ProxyConfig.proxyStatsMatcher: inclusionPrefixes, inclusionSuffixes, inclusionRegexps. */
  readonly proxyStatsMatcher: unknown;
  readonly instanceIps: readonly string[];
  readonly exitOnZeroActiveConnections: boolean;
  readonly metadataDiscovery: boolean;
}

type Pattern = { prefix: string } | { suffix: string } | { safe_regex: { regex: string } };

function strings(v: unknown): string[] | undefined {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
}

/** The annotation's comma list if set, else ProxyConfig's list, then the required ones; {pod_ip} expanded. */
function inclusion(annotation: string | undefined, fromProxyConfig: string[] | undefined, required: readonly string[], ips: readonly string[]): string[] {
  const given = annotation ? annotation.split(',') : fromProxyConfig ?? [];
  return [...given, ...required].flatMap((p) => (p.includes('{pod_ip}') ? ips.map((ip) => p.replaceAll('{pod_ip}', ip)) : [p]));
}

/** The bootstrap's stats_config.stats_matcher, as pilot-agent renders it. */
export function istioStatsMatcher(i: StatsInclusionInputs): { inclusion_list: { patterns: Pattern[] } } {
  const a = i.annotations ?? {};
  const m = (i.proxyStatsMatcher ?? {}) as Record<string, unknown>;
  const prefixes = inclusion(a['sidecar.istio.io/statsInclusionPrefixes'], strings(m.inclusionPrefixes ?? m.inclusion_prefixes), REQUIRED_PREFIXES, i.instanceIps);
  const suffixes = inclusion(a['sidecar.istio.io/statsInclusionSuffixes'], strings(m.inclusionSuffixes ?? m.inclusion_suffixes),
    i.exitOnZeroActiveConnections ? [...RBAC_SUFFIXES, DRAIN_SUFFIX] : RBAC_SUFFIXES, i.instanceIps);
  const regexps = inclusion(a['sidecar.istio.io/statsInclusionRegexps'], strings(m.inclusionRegexps ?? m.inclusion_regexps), REQUIRED_REGEXPS, i.instanceIps);
  return {
    inclusion_list: {
      patterns: [
        { prefix: 'reporter=' },
        ...(i.metadataDiscovery ? [{ prefix: 'workload_discovery' }] : []),
        ...prefixes.map((prefix) => ({ prefix })),
        ...suffixes.map((suffix) => ({ suffix })),
        ...regexps.map((regex) => ({ safe_regex: { regex } })),
        { prefix: 'component' },
        { prefix: 'istio' },
      ],
    },
  };
}
