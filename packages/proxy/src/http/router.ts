import { randomRequestId } from '../core/request-id.ts';
import { applyXfcc, type XfccConfig } from './xfcc.ts';
import { normalizeRequestPath, type PathNormalization } from './path-normalize.ts';
import type { OutgoingHttpHeaders } from 'node:http';
import { HOP_BY_HOP, type Exchange, type Headers } from './exchange.ts';
import type { ForwardAction, RedirectAction, Route, RouteTable, VirtualHost } from './route-config.ts';
import { sendLocalReply } from './local-reply.ts';
import { Flag, LocalBody, type ResponseFlag } from './response-flags.ts';
import { RequestRecord } from './request-record.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { Cluster } from '../upstream/cluster.ts';
import { UpstreamRequest } from './upstream-call.ts';
import { ReplayableBody } from './replay-body.ts';
import { sendMirrors } from './mirror.ts';
import { computeRequestHash } from './hash-policy.ts';
import { parseRetryOn, type RetryPolicy } from './retry-policy.ts';
import type { StatsStore } from '../stats/store.ts';
import type { Host } from '../upstream/host.ts';
import type { HcmStats } from './hcm-stats.ts';
import type { LocalReplyConfig } from './local-reply-config.ts';
import { FilterChainRun, type NamedFilter } from './filter-chain.ts';
import { ORIGINAL_DST_ADDRESS_KEY } from '../core/filter-state.ts';
import { overloadState } from '../core/overload.ts';
import { debugRequestDone, httpLog, traceRequestStart } from './request-log.ts';

/** The immutable per-HCM settings the router reads on every request. */
export interface RouterSettings {
  readonly routes: RouteTable;
  /** normalize_path / merge_slashes / path_with_escaped_slashes_action (undefined: all off). */
  readonly pathNormalization: PathNormalization | undefined;
  readonly xfcc: XfccConfig;
  readonly clusters: ClusterManager;
  readonly serverName: string;
  readonly useRemoteAddress: boolean;
  readonly skipXffAppend: boolean;
  readonly generateRequestId: boolean;
  readonly preserveExternalRequestId: boolean;
  readonly suppressEnvoyHeaders: boolean;
  readonly schemeOverwrite: string;
  readonly stats: HcmStats;
  readonly localReply: LocalReplyConfig | undefined;
  readonly onComplete: ((r: RequestRecord) => void) | undefined;
  /** Decoder/encoder filters before the router (empty for router-only chains). */
  readonly filters: readonly NamedFilter[];
  readonly store: StatsStore;
}

const now = (): number => performance.now();
const OVERLOADED: OutgoingHttpHeaders = { 'x-envoy-overloaded': 'true' };

/** Route one downstream request: local reply, redirect, or forward upstream. */
export function routeRequest(ex: Exchange, s: RouterSettings): void {
  const rec = new RequestRecord(ex, now());
  s.stats.rqTotal.value++;
  s.stats.rqActive.value++;
  if (httpLog.traceOn) traceRequestStart(ex);
  if (overloadState.stopAcceptingRequests) {
    // Envoy's stop_accepting_requests: answered before filters and routing.
    s.stats.rqOverloadClose.inc();
    return finishLocal(rec, s, 503, LocalBody.overloaded, Flag.OverloadManager, 'overload_manager', OVERLOADED);
  }
  if (s.pathNormalization !== undefined) {
    const n = normalizeRequestPath(ex.path, s.pathNormalization);
    if (n.kind === 'reject') return finishLocal(rec, s, 400, undefined, Flag.None, 'path_normalization_failed');
    if (n.kind === 'redirect') return finishLocal(rec, s, 307, undefined, Flag.None, 'path_normalization_redirect', { location: n.path });
    ex.path = n.path;
  }
  applyXfcc(ex.headers, ex.conn, s.xfcc);
  const matched = s.routes.route(ex.authority, ex, false);
  if (s.filters.length === 0) return dispatch(ex, s, rec, matched);
  const run = new FilterChainRun(ex, rec, matched?.route, matched?.vhost, s.filters, s.routes, () => dispatch(ex, s, rec, matched),
    (status, body, flag, details, headers) => finishLocal(rec, s, status, body, flag as ResponseFlag, details, headers as OutgoingHttpHeaders),
    () => { rec.flags = Flag.DownstreamConnectionTermination; complete(rec, s); });
  rec.filters = run;
  run.continueDecoding();
}

/** The router proper: after the filters, act on the matched route. */
function dispatch(ex: Exchange, s: RouterSettings, rec: RequestRecord, matched: { vhost: VirtualHost; route: Route } | undefined): void {
  if (!matched) return finishLocal(rec, s, 404, undefined, Flag.NoRouteFound, 'route_not_found');
  const { vhost, route } = matched;
  rec.routeName = route.name;
  const action = route.action;
  if (action.kind === 'direct') {
    rec.flags = Flag.DirectResponse;
    return finishLocal(rec, s, action.status, action.body, Flag.None, 'direct_response', responseOps(s, rec, vhost, route));
  }
  if (action.kind === 'redirect') {
    return finishLocal(rec, s, action.status, undefined, Flag.None, 'redirect', { ...responseOps(s, rec, vhost, route), location: redirectLocation(ex, action, route) });
  }
  forward(ex, s, rec, vhost, route, action);
}

function responseOps(s: RouterSettings, rec: RequestRecord, vhost: VirtualHost, route: Route): OutgoingHttpHeaders {
  const h: Headers = {};
  route.responseHeaders.apply(h, rec);
  vhost.responseHeaders.apply(h, rec);
  s.routes.responseHeaders.apply(h, rec);
  return h as OutgoingHttpHeaders;
}

/** A request the HTTP/1.1 codec answered itself (codec errors, 426, 408): counted, answered and logged like any local reply. */
export function codecReply(ex: Exchange, s: RouterSettings, status: number, body: string, flag: ResponseFlag, details: string): void {
  const rec = new RequestRecord(ex, now());
  s.stats.rqTotal.value++;
  s.stats.rqActive.value++;
  finishLocal(rec, s, status, body === '' ? undefined : body, flag, details);
}

export function finishLocal(rec: RequestRecord, s: RouterSettings, status: number, body: string | Buffer | undefined, flag: ResponseFlag, details: string, headers?: OutgoingHttpHeaders): void {
  rec.status = status;
  if (flag !== Flag.None) rec.flags = flag;
  rec.details = details;
  rec.bytesSent = sendLocalReply(rec, status, body, s, headers);
  complete(rec, s);
}

export function complete(rec: RequestRecord, s: RouterSettings): void {
  rec.durationMs = now() - rec.startMs;
  s.stats.rqActive.value--;
  if (rec.status) s.stats.codes.record(rec.status);
  s.stats.rqTime.record(rec.durationMs);
  const filters = s.filters;
  for (let i = 0; i < filters.length; i++) filters[i].filter.onComplete?.(rec);
  if (s.onComplete) s.onComplete(rec);
  if (httpLog.debugOn) debugRequestDone(rec);
}

function redirectLocation(ex: Exchange, a: RedirectAction, route: Route): string {
  const scheme = a.scheme || ex.scheme;
  let host = a.host || ex.authority.replace(/:\d+$/, '');
  if (a.port) host += `:${a.port}`;
  else if (!a.host && !a.scheme) host = ex.authority;
  let path = ex.path;
  const q = path.indexOf('?');
  const query = q < 0 ? '' : path.slice(q);
  if (a.path) path = a.path + (a.path.includes('?') ? '' : query);
  else if (a.prefixRewrite !== undefined) path = a.prefixRewrite + path.slice(route.matchedPrefix.length);
  if (a.stripQuery) path = path.replace(/\?.*$/, '');
  return `${scheme}://${host}${path}`;
}

function pickCluster(ex: Exchange, a: ForwardAction): { name: string; weightedIndex: number } {
  if (a.cluster) return { name: a.cluster, weightedIndex: -1 };
  if (a.clusterHeader) {
    const v = ex.headers[a.clusterHeader];
    return { name: typeof v === 'string' ? v : '', weightedIndex: -1 };
  }
  let r = Math.random() * a.totalWeight;
  for (let i = 0; i < a.weighted.length; i++) {
    r -= a.weighted[i].weight;
    if (r < 0) return { name: a.weighted[i].name, weightedIndex: i };
  }
  return { name: a.weighted[a.weighted.length - 1].name, weightedIndex: a.weighted.length - 1 };
}

/** A forward decision made before any I/O: where the request goes and with what head. */
export interface ForwardPlan {
  readonly cluster: Cluster;
  readonly host: Host;
  readonly headers: Headers;
  readonly path: string;
  readonly timeoutMs: number;
  readonly weightedIndex: number;
  /** The request's hash for RING_HASH / MAGLEV clusters, and cookies hash policies generated. */
  readonly hash: bigint | undefined;
  readonly setCookies: string[] | undefined;
}

/** Picks cluster and host and builds the upstream head; on failure sends the local reply and returns undefined. */
export function planForward(ex: Exchange, s: RouterSettings, rec: RequestRecord, vhost: VirtualHost, route: Route, a: ForwardAction): ForwardPlan | undefined {
  const picked = pickCluster(ex, a);
  const cluster = s.clusters.get(picked.name);
  if (!cluster) { finishLocal(rec, s, 503, undefined, Flag.NoClusterFound, 'cluster_not_found'); return undefined; }
  rec.upstreamCluster = cluster.config.name;
  const cstats = cluster.stats;
  // Envoy computes the hash only for clusters whose balancer uses it.
  let hash: bigint | undefined, setCookies: string[] | undefined;
  if (cluster.config.hashLb && a.hashPolicies) {
    if (a.hashPolicies.generatesCookies) setCookies = [];
    hash = computeRequestHash(a.hashPolicies, ex, ex.conn, setCookies);
  }
  // ORIGINAL_DST's filter-state override: the request's own object first, then the connection's.
  const filterState = rec.filterState?.has(ORIGINAL_DST_ADDRESS_KEY) ? rec.filterState : ex.conn.filterState;
  const host = cluster.pick({ originalDst: ex.conn.originalDst, originalDstHeader: ex.headers['x-envoy-original-dst-host'] as string | undefined, hash, filterState });
  if (!host) {
    cstats.cxNone.inc();
    finishLocal(rec, s, 503, LocalBody.noHealthyUpstream, Flag.NoHealthyUpstream, 'no_healthy_upstream');
    return undefined;
  }
  rec.upstreamHost = host.hostPort;
  rec.upstreamHostInfo = host;
  const headers = upstreamHeaders(ex, s, rec, vhost, route, a, host);
  let path = ex.path;
  if (a.prefixRewrite !== undefined && route.matchedPrefix) path = a.prefixRewrite + path.slice(route.matchedPrefix.length);
  else if (a.regexRewrite) {
    const q = path.indexOf('?');
    const p = q < 0 ? path : path.slice(0, q);
    path = p.replace(a.regexRewrite.re, a.regexRewrite.substitution) + (q < 0 ? '' : path.slice(q));
  }
  if (path !== ex.path && !s.suppressEnvoyHeaders) headers['x-envoy-original-path'] = ex.path;
  let timeoutMs = a.timeoutMs;
  const grpcTimeout = a.grpcTimeout ? parseGrpcTimeout(ex.headers['grpc-timeout']) : -1;
  if (grpcTimeout >= 0 && a.grpcTimeout) {
    timeoutMs = a.grpcTimeout.maxMs > 0 ? Math.min(grpcTimeout, a.grpcTimeout.maxMs) : grpcTimeout;
    if (a.grpcTimeout.offsetMs && timeoutMs > a.grpcTimeout.offsetMs) timeoutMs -= a.grpcTimeout.offsetMs;
  }
  const override = ex.headers['x-envoy-upstream-rq-timeout-ms'];
  if (typeof override === 'string' && /^\d+$/.test(override)) timeoutMs = Number(override);
  if (override !== undefined) headers['x-envoy-upstream-rq-timeout-ms'] = undefined;
  if (timeoutMs > 0 && !s.suppressEnvoyHeaders) headers['x-envoy-expected-rq-timeout-ms'] = String(timeoutMs);
  if (picked.weightedIndex >= 0) a.weighted[picked.weightedIndex].requestHeaders.apply(headers, rec);
  return { cluster, host, headers, path, timeoutMs, weightedIndex: picked.weightedIndex, hash, setCookies };
}

function forward(ex: Exchange, s: RouterSettings, rec: RequestRecord, vhost: VirtualHost, route: Route, a: ForwardAction): void {
  const plan = planForward(ex, s, rec, vhost, route, a);
  if (!plan) return;
  const retry = a.retryPolicy ?? vhost.retryPolicy;
  const h = plan.headers;
  // x-envoy-retry-on / -grpc-on add conditions, x-envoy-max-retries sets the count (Envoy honours them).
  let retryOn = retry?.on ?? 0;
  let numRetries = retry?.numRetries ?? 0;
  let perTry = retry?.perTryTimeoutMs ?? 0;
  const hdrOn = h['x-envoy-retry-on'], hdrGrpc = h['x-envoy-retry-grpc-on'], hdrMax = h['x-envoy-max-retries'], hdrPerTry = h['x-envoy-upstream-rq-per-try-timeout-ms'];
  if (typeof hdrOn === 'string' || typeof hdrGrpc === 'string' || typeof hdrMax === 'string' || typeof hdrPerTry === 'string') {
    if (typeof hdrOn === 'string') retryOn |= parseRetryOn(hdrOn);
    if (typeof hdrGrpc === 'string') retryOn |= parseRetryOn(hdrGrpc);
    if (typeof hdrMax === 'string' && /^\d+$/.test(hdrMax)) numRetries = Number(hdrMax);
    if (typeof hdrPerTry === 'string' && /^\d+$/.test(hdrPerTry)) perTry = Number(hdrPerTry);
    clearAll(h, RETRY_HEADERS);
  }
  const policy = retry ?? (retryOn ? DEFAULT_RETRY : undefined);
  if (policy && retryOn && typeof hdrMax !== 'string' && !retry) numRetries = 1;
  // The body is kept for replay only when a retry or a mirror could need it.
  const body = ex.hasBody && ((policy && numRetries > 0) || a.mirrors.length) ? new ReplayableBody(ex.body) : undefined;
  if (a.mirrors.length) sendMirrors(a.mirrors, s.clusters, ex, plan.path, h, body);
  new UpstreamRequest({
    ex, s, rec, vhost, route,
    cluster: plan.cluster, host: plan.host, path: plan.path, headers: h, timeoutMs: plan.timeoutMs, idleTimeoutMs: a.idleTimeoutMs,
    weightedResponseOps: plan.weightedIndex >= 0 ? a.weighted[plan.weightedIndex].responseHeaders : undefined,
    retry: policy, retryOn, numRetries, perTryTimeoutMs: perTry,
    attemptCountHeader: vhost.includeAttemptCount,
    hashPick: plan.cluster.config.hashLb ? (tried) => plan.cluster.pick({ hash: plan.hash, attempt: tried.length }) : undefined,
    setCookies: plan.setCookies,
    body,
  }).start();
}

const RETRY_HEADERS = ['x-envoy-retry-on', 'x-envoy-retry-grpc-on', 'x-envoy-max-retries', 'x-envoy-upstream-rq-per-try-timeout-ms'];

/** The policy a request gets from x-envoy-retry-on alone (Envoy's RetryPolicy defaults). */
const DEFAULT_RETRY: RetryPolicy = {
  on: 0, numRetries: 1, perTryTimeoutMs: 0, retriableStatusCodes: [], retriableHeaders: [], retriableRequestHeaders: [],
  previousHosts: false, hostSelectionMaxAttempts: 1, baseIntervalMs: 25, maxIntervalMs: 250,
};

function upstreamHeaders(ex: Exchange, s: RouterSettings, rec: RequestRecord, vhost: VirtualHost, route: Route, a: ForwardAction, host: Host): Headers {
  const h = ex.headers;
  const connection = h.connection;
  if (typeof connection === 'string' && connection !== 'keep-alive' && connection !== 'close') {
    for (const name of connection.split(',')) clear(h, name.trim().toLowerCase());
  }
  const te = h.te;
  clearAll(h, HOP_BY_HOP);
  if (typeof te === 'string' && te.toLowerCase() === 'trailers') h.te = 'trailers';
  clearAll(h, REQUEST_ONLY_HOP);
  h.host = a.hostRewrite || (a.autoHostRewrite && host.hostname ? host.hostname : ex.authority);
  if (s.useRemoteAddress && !s.skipXffAppend) {
    const xff = h['x-forwarded-for'];
    h['x-forwarded-for'] = xff ? `${xff}, ${ex.conn.remoteAddress}` : ex.conn.remoteAddress;
  }
  if (s.useRemoteAddress || h['x-forwarded-proto'] === undefined) h['x-forwarded-proto'] = s.schemeOverwrite || ex.scheme;
  let rid = h['x-request-id'] as string | undefined;
  if ((rid === undefined || (s.useRemoteAddress && !s.preserveExternalRequestId)) && s.generateRequestId) {
    rid = randomRequestId();
    h['x-request-id'] = rid;
  }
  rec.requestId = rid ?? '';
  route.requestHeaders.apply(h, rec);
  vhost.requestHeaders.apply(h, rec);
  s.routes.requestHeaders.apply(h, rec);
  return h;
}

/** Headers a proxy never forwards upstream besides the hop-by-hop ones. */
const REQUEST_ONLY_HOP = ['expect', 'http2-settings', 'x-envoy-original-dst-host'];

/**
 * Unset instead of `delete`: deleting turns a header object into a slow
 * dictionary; serialisers skip undefined values.
 */
function clear(h: Headers, name: string): void {
  if (h[name] !== undefined) h[name] = undefined;
}

function clearAll(h: Headers, names: readonly string[]): void {
  for (let i = 0; i < names.length; i++) if (h[names[i]] !== undefined) h[names[i]] = undefined;
}

const GRPC_UNITS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/** grpc-timeout (`<up to 8 digits><H|M|S|m|u|n>`) in ms, -1 when absent or malformed. */
export function parseGrpcTimeout(v: string | string[] | undefined): number {
  if (typeof v !== 'string') return -1;
  const m = /^(\d{1,8})([HMSmun])$/.exec(v);
  return m ? Math.ceil(Number(m[1]) * GRPC_UNITS[m[2]]) : -1;
}
