import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';
import { compileHeaderOps, NO_HEADER_OPS, type HeaderOps } from './header-ops.ts';
import { compileRouteMatch, type CompiledMatch, type RequestView } from './route-match.ts';
import { compileRe2Global } from '../matchers/regex.ts';
import { compilePerFilterConfig, type PerFilterCompilers } from './per-filter-config.ts';
import { RetryPolicies, type RetryPolicy } from './retry-policy.ts';
import { compileMirrorPolicy, type MirrorPolicy } from './mirror.ts';
import { compileHashPolicies, type HashPolicies } from './hash-policy.ts';
import { EMPTY_LIST } from '../core/shared-values.ts';

export interface WeightedCluster { readonly name: string; readonly weight: number; readonly requestHeaders: HeaderOps; readonly responseHeaders: HeaderOps }

export interface ForwardAction {
  readonly kind: 'forward';
  readonly cluster: string;
  readonly clusterHeader: string;
  readonly weighted: readonly WeightedCluster[];
  readonly totalWeight: number;
  readonly prefixRewrite: string | undefined;
  readonly regexRewrite: { re: RegExp; substitution: string } | undefined;
  readonly hostRewrite: string;
  readonly autoHostRewrite: boolean;
  readonly timeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly upgrades: ReadonlyMap<string, { enabled: boolean; terminateConnect: boolean }>;
  readonly retryPolicy: RetryPolicy | undefined;
  readonly mirrors: readonly MirrorPolicy[];
  /** hash_policy, for RING_HASH / MAGLEV clusters. */
  readonly hashPolicies: HashPolicies | undefined;
  /** grpc-timeout handling: cap in ms (0 = no cap), offset subtracted; undefined = header ignored. */
  readonly grpcTimeout: { readonly maxMs: number; readonly offsetMs: number } | undefined;
}

export interface RedirectAction {
  readonly kind: 'redirect';
  readonly scheme: string; readonly host: string; readonly port: number; readonly path: string;
  readonly prefixRewrite: string | undefined; readonly status: number; readonly stripQuery: boolean;
}

export interface DirectAction { readonly kind: 'direct'; readonly status: number; readonly body: Buffer | undefined }

export interface Route {
  readonly name: string;
  readonly match: CompiledMatch;
  /** The prefix the match used (for prefix_rewrite). */
  readonly matchedPrefix: string;
  readonly action: ForwardAction | RedirectAction | DirectAction;
  readonly requestHeaders: HeaderOps;
  readonly responseHeaders: HeaderOps;
  /** typed_per_filter_config, compiled by each filter (undefined when none). */
  readonly perFilter: ReadonlyMap<string, unknown> | undefined;
}

export interface VirtualHost {
  readonly name: string;
  readonly routes: readonly Route[];
  readonly requestHeaders: HeaderOps;
  readonly responseHeaders: HeaderOps;
  readonly perFilter: ReadonlyMap<string, unknown> | undefined;
  readonly retryPolicy: RetryPolicy | undefined;
  /** include_request_attempt_count / include_attempt_count_in_response: x-envoy-attempt-count. */
  readonly includeAttemptCount: boolean;
}

const REDIRECT_CODES = ['MOVED_PERMANENTLY', 'FOUND', 'SEE_OTHER', 'TEMPORARY_REDIRECT', 'PERMANENT_REDIRECT'] as const;
const REDIRECT_STATUS = { MOVED_PERMANENTLY: 301, FOUND: 302, SEE_OTHER: 303, TEMPORARY_REDIRECT: 307, PERMANENT_REDIRECT: 308 } as const;

/**
 * A RouteConfiguration compiled for lookup: exact domains in a Map, wildcard
 * suffix/prefix domains longest first, then `*`. Routes are tried in order.
 */
export class RouteTable {
  readonly name: string;
  readonly requestHeaders: HeaderOps;
  readonly responseHeaders: HeaderOps;
  readonly perFilter: ReadonlyMap<string, unknown> | undefined;
  private readonly exact = new Map<string, VirtualHost>();
  private readonly suffixes: Array<[string, VirtualHost]> = [];
  private readonly prefixes: Array<[string, VirtualHost]> = [];
  private fallback: VirtualHost | undefined;
  /**
   * Whether any typed_per_filter_config was compiled: without any, the table is the same whatever
   * the connection manager's filters, and one table serves every manager using the route config.
   */
  readonly hasPerFilterConfig: boolean;

  /** `filters`: per-filter compilers for typed_per_filter_config, keyed by http_filters name. */
  constructor(m: Msg, filters?: PerFilterCompilers) {
    this.name = m.str('name');
    this.requestHeaders = compileHeaderOps(m, 'request');
    this.responseHeaders = compileHeaderOps(m, 'response');
    const shared: SharedParts = { retryPolicy: new RetryPolicies(), perFilterConfig: false };
    this.perFilter = perFilterConfig(m, filters, shared);
    // Wildcard domains, to find a repeated one (exact ones are found in `exact` itself).
    const wildcards = new Set<string>();
    for (const vm of m.list('virtual_hosts')) {
      const vh = compileVirtualHost(vm, filters, shared);
      const domains = vm.strList('domains');
      for (let i = 0; i < domains.length; i++) {
        const raw = domains[i];
        const d = raw.toLowerCase();
        const wildcard = d.charCodeAt(0) === 42 /* * */ || d.charCodeAt(d.length - 1) === 42;
        if (wildcard ? wildcards.has(d) : this.exact.has(d)) throw vm.error(`domains[${i}]`, `domain ${JSON.stringify(raw)} is used by more than one virtual host`);
        if (!wildcard) { this.exact.set(d, vh); continue; }
        wildcards.add(d);
        if (d === '*') this.fallback = vh;
        else if (d.startsWith('*')) this.suffixes.push([d.slice(1), vh]);
        else this.prefixes.push([d.slice(0, -1), vh]);
      }
    }
    this.hasPerFilterConfig = shared.perFilterConfig;
    // Longest wildcard wins (Envoy).
    this.suffixes.sort((a, b) => b[0].length - a[0].length);
    this.prefixes.sort((a, b) => b[0].length - a[0].length);
  }

  virtualHost(authority: string): VirtualHost | undefined {
    const host = hasUpper(authority) ? authority.toLowerCase() : authority;
    const exact = this.exact.get(host);
    if (exact) return exact;
    for (let i = 0; i < this.suffixes.length; i++) if (host.endsWith(this.suffixes[i][0]) && host.length > this.suffixes[i][0].length) return this.suffixes[i][1];
    for (let i = 0; i < this.prefixes.length; i++) if (host.startsWith(this.prefixes[i][0]) && host.length > this.prefixes[i][0].length) return this.prefixes[i][1];
    return this.fallback;
  }

  route(authority: string, req: RequestView, isConnect: boolean): { vhost: VirtualHost; route: Route } | undefined {
    const vhost = this.virtualHost(authority);
    if (!vhost) return undefined;
    const routes = vhost.routes;
    for (let i = 0; i < routes.length; i++) {
      const r = routes[i];
      if (r.match.connect !== isConnect) continue;
      if (!r.match.path(req.path)) continue;
      const hs = r.match.headers;
      let ok = true;
      for (let j = 0; j < hs.length && ok; j++) ok = hs[j](req);
      if (ok) return { vhost, route: r };
    }
    return undefined;
  }
}

function hasUpper(s: string): boolean {
  for (let i = 0; i < s.length; i++) { const c = s.charCodeAt(i); if (c >= 65 && c <= 90) return true; }
  return false;
}

/** What routes of one table share when they compile alike, and what the table notes while compiling. */
interface SharedParts { readonly retryPolicy: RetryPolicies; perFilterConfig: boolean }

function perFilterConfig(m: Msg, filters: PerFilterCompilers | undefined, shared: SharedParts): ReadonlyMap<string, unknown> | undefined {
  if (m.has('typed_per_filter_config')) shared.perFilterConfig = true;
  return compilePerFilterConfig(m, filters);
}

function compileVirtualHost(m: Msg, filters: PerFilterCompilers | undefined, shared: SharedParts): VirtualHost {
  for (const f of ['require_tls', 'virtual_clusters', 'rate_limits', 'cors', 'hedge_policy', 'request_mirror_policies', 'retry_policy_typed_config']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  if (m.strList('domains').length === 0) throw m.error('domains', 'at least one domain is required');
  return {
    name: m.requiredStr('name'),
    routes: m.list('routes').map((r) => compileRoute(r, filters, shared)),
    requestHeaders: compileHeaderOps(m, 'request'),
    responseHeaders: compileHeaderOps(m, 'response'),
    perFilter: perFilterConfig(m, filters, shared),
    retryPolicy: m.has('retry_policy') ? shared.retryPolicy.get(m.requiredMsg('retry_policy')) : undefined,
    includeAttemptCount: m.bool('include_request_attempt_count') || m.bool('include_attempt_count_in_response'),
  };
}

function compileRoute(m: Msg, filters: PerFilterCompilers | undefined, shared: SharedParts): Route {
  for (const f of ['tracing', 'filter_action', 'non_forwarding_action']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const mm = m.requiredMsg('match');
  const match = compileRouteMatch(mm);
  let action: Route['action'];
  if (m.has('route')) action = compileForward(m.requiredMsg('route'), shared);
  else if (m.has('redirect')) action = compileRedirect(m.requiredMsg('redirect'));
  else if (m.has('direct_response')) {
    const d = m.requiredMsg('direct_response');
    const status = d.num('status');
    if (status < 200 || status > 599) throw d.error('status', 'must be between 200 and 599');
    action = { kind: 'direct', status, body: d.has('body') ? readDataSource(d.requiredMsg('body')) : undefined };
  } else throw m.error('', 'one of route, redirect, direct_response is required');
  return {
    name: m.str('name'),
    match,
    matchedPrefix: mm.str('prefix', mm.str('path_separated_prefix')),
    action,
    requestHeaders: compileHeaderOps(m, 'request'),
    responseHeaders: compileHeaderOps(m, 'response'),
    perFilter: perFilterConfig(m, filters, shared),
  };
}

function compileForward(m: Msg, shared: SharedParts): ForwardAction {
  for (const f of ['rate_limits', 'cors', 'hedge_policy', 'retry_policy_typed_config',
    'metadata_match', 'cluster_specifier_plugin', 'inline_cluster_specifier_plugin', 'host_rewrite_header', 'host_rewrite_path_regex']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const weightedList = m.msg('weighted_clusters')?.list('clusters');
  const weighted = !weightedList?.length ? EMPTY_LIST : weightedList.map((c) => ({
    name: c.requiredStr('name'),
    weight: c.num('weight'),
    requestHeaders: c.has('request_headers_to_add') || c.has('request_headers_to_remove') ? compileHeaderOps(c, 'request') : NO_HEADER_OPS,
    responseHeaders: c.has('response_headers_to_add') || c.has('response_headers_to_remove') ? compileHeaderOps(c, 'response') : NO_HEADER_OPS,
  }));
  const cluster = m.str('cluster');
  const clusterHeader = m.str('cluster_header').toLowerCase();
  if (!cluster && !clusterHeader && weighted.length === 0) throw m.error('cluster', 'one of cluster, cluster_header, weighted_clusters is required');
  const rr = m.msg('regex_rewrite');
  const upgradeList = m.list('upgrade_configs');
  const upgrades = upgradeList.length === 0 ? NO_UPGRADES
    : new Map(upgradeList.map((u) => [u.requiredStr('upgrade_type').toLowerCase(), { enabled: u.bool('enabled', true), terminateConnect: u.has('connect_config') }]));
  return {
    kind: 'forward',
    cluster,
    clusterHeader,
    weighted,
    totalWeight: weighted.reduce((a, c) => a + c.weight, 0),
    prefixRewrite: m.has('prefix_rewrite') ? m.str('prefix_rewrite') : undefined,
    regexRewrite: rr ? { re: compileRe2Global(rr.requiredMsg('pattern')), substitution: rr.str('substitution').replace(/\\(\d)/g, '$$$1') } : undefined,
    hostRewrite: m.str('host_rewrite_literal'),
    autoHostRewrite: m.bool('auto_host_rewrite'),
    timeoutMs: m.durationMs('timeout', 15_000),
    idleTimeoutMs: m.durationMs('idle_timeout', 0),
    upgrades,
    retryPolicy: m.has('retry_policy') ? shared.retryPolicy.get(m.requiredMsg('retry_policy')) : undefined,
    mirrors: m.has('request_mirror_policies') ? m.list('request_mirror_policies').map(compileMirrorPolicy) : EMPTY_LIST,
    hashPolicies: compileHashPolicies(m.list('hash_policy')),
    grpcTimeout: readGrpcTimeout(m),
  };
}

/** max_stream_duration.grpc_timeout_header_max / _offset (or the older max_grpc_timeout / grpc_timeout_offset). */
function readGrpcTimeout(m: Msg): ForwardAction['grpcTimeout'] {
  const msd = m.msg('max_stream_duration');
  // 0 (what istiod sends) disables it; a real limit is not built.
  if (msd && msd.durationMs('max_stream_duration', 0) !== 0) throw msd.error('max_stream_duration', 'is not supported yet');
  if (msd?.has('grpc_timeout_header_max')) {
    return { maxMs: msd.durationMs('grpc_timeout_header_max', 0), offsetMs: msd.durationMs('grpc_timeout_header_offset', 0) };
  }
  if (m.has('max_grpc_timeout')) {
    const maxMs = m.durationMs('max_grpc_timeout', 0), offsetMs = m.durationMs('grpc_timeout_offset', 0);
    // istiod writes max_grpc_timeout 0s on every route: one shared object for it.
    return maxMs === 0 && offsetMs === 0 ? NO_GRPC_TIMEOUT_CAP : { maxMs, offsetMs };
  }
  return undefined;
}

/** Empty parts shared by every route that has none (routes are read, never changed). */
const NO_UPGRADES: ReadonlyMap<string, { enabled: boolean; terminateConnect: boolean }> = new Map();
const NO_GRPC_TIMEOUT_CAP = Object.freeze({ maxMs: 0, offsetMs: 0 });

function compileRedirect(m: Msg): RedirectAction {
  if (m.has('regex_rewrite')) throw m.error('regex_rewrite', 'is not supported yet');
  const code = m.enumOf('response_code', REDIRECT_CODES);
  return {
    kind: 'redirect',
    scheme: m.bool('https_redirect') ? 'https' : m.str('scheme_redirect'),
    host: m.str('host_redirect'),
    port: m.num('port_redirect'),
    path: m.str('path_redirect'),
    prefixRewrite: m.has('prefix_rewrite') ? m.str('prefix_rewrite') : undefined,
    status: REDIRECT_STATUS[code],
    stripQuery: m.bool('strip_query'),
  };
}
