import { randomUUID } from 'node:crypto';
import type { OutgoingHttpHeaders, IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { HOP_BY_HOP, type Exchange, type Headers } from './exchange.ts';
import type { ForwardAction, RedirectAction, Route, RouteTable, VirtualHost } from './route-config.ts';
import { sendLocalReply } from './local-reply.ts';
import { Flag, LocalBody, type ResponseFlag } from './response-flags.ts';
import { RequestRecord } from './request-record.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { Cluster, UpstreamDispatcher } from '../upstream/cluster.ts';
import type { Host } from '../upstream/host.ts';
import type { HcmStats } from './hcm-stats.ts';
import type { LocalReplyConfig } from './local-reply-config.ts';
import { FilterChainRun, type NamedFilter } from './filter-chain.ts';

/** The immutable per-HCM settings the router reads on every request. */
export interface RouterSettings {
  readonly routes: RouteTable;
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
}

const now = (): number => performance.now();

/** Route one downstream request: local reply, redirect, or forward upstream. */
export function routeRequest(ex: Exchange, s: RouterSettings): void {
  const rec = new RequestRecord(ex, now());
  s.stats.rqTotal.value++;
  s.stats.rqActive.value++;
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
    return finishLocal(rec, s, action.status, action.body, Flag.None, 'direct_response', responseOps(s, vhost, route));
  }
  if (action.kind === 'redirect') {
    return finishLocal(rec, s, action.status, undefined, Flag.None, 'redirect', { ...responseOps(s, vhost, route), location: redirectLocation(ex, action, route) });
  }
  forward(ex, s, rec, vhost, route, action);
}

function responseOps(s: RouterSettings, vhost: VirtualHost, route: Route): OutgoingHttpHeaders {
  const h: Headers = {};
  route.responseHeaders.apply(h);
  vhost.responseHeaders.apply(h);
  s.routes.responseHeaders.apply(h);
  return h as OutgoingHttpHeaders;
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
  if (s.onComplete) s.onComplete(rec);
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
}

/** Picks cluster and host and builds the upstream head; on failure sends the local reply and returns undefined. */
export function planForward(ex: Exchange, s: RouterSettings, rec: RequestRecord, vhost: VirtualHost, route: Route, a: ForwardAction): ForwardPlan | undefined {
  const picked = pickCluster(ex, a);
  const cluster = s.clusters.get(picked.name);
  if (!cluster) { finishLocal(rec, s, 503, undefined, Flag.NoClusterFound, 'cluster_not_found'); return undefined; }
  rec.upstreamCluster = cluster.config.name;
  const cstats = cluster.stats;
  if (cstats.rqActive.value >= cluster.config.limits.maxRequests) {
    cstats.rqPendingOverflow.inc();
    finishLocal(rec, s, 503, LocalBody.overflow, Flag.UpstreamOverflow, 'upstream_reset_before_response_started{overflow}');
    return undefined;
  }
  const host = cluster.pick({ originalDst: ex.conn.originalDst, originalDstHeader: ex.headers['x-envoy-original-dst-host'] as string | undefined });
  if (!host) {
    cstats.cxNone.inc();
    finishLocal(rec, s, 503, LocalBody.noHealthyUpstream, Flag.NoHealthyUpstream, 'no_healthy_upstream');
    return undefined;
  }
  rec.upstreamHost = host.hostPort;
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
  const override = ex.headers['x-envoy-upstream-rq-timeout-ms'];
  if (typeof override === 'string' && /^\d+$/.test(override)) timeoutMs = Number(override);
  if (override !== undefined) headers['x-envoy-upstream-rq-timeout-ms'] = undefined;
  if (timeoutMs > 0 && !s.suppressEnvoyHeaders) headers['x-envoy-expected-rq-timeout-ms'] = String(timeoutMs);
  if (picked.weightedIndex >= 0) a.weighted[picked.weightedIndex].requestHeaders.apply(headers);
  return { cluster, host, headers, path, timeoutMs, weightedIndex: picked.weightedIndex };
}

function forward(ex: Exchange, s: RouterSettings, rec: RequestRecord, vhost: VirtualHost, route: Route, a: ForwardAction): void {
  const plan = planForward(ex, s, rec, vhost, route, a);
  if (!plan) return;
  const { cluster, host } = plan;
  const http2 = cluster.config.protocol === 'http2' || (cluster.config.protocol === 'downstream' && ex.protocol === 'HTTP/2');
  const call = new UpstreamCall(ex, s, rec, cluster, host, vhost, route, plan.weightedIndex >= 0 ? a.weighted[plan.weightedIndex].responseHeaders : undefined);
  call.start(cluster.httpPool(host, http2), plan.path, plan.headers, plan.timeoutMs);
}

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
    rid = randomUUID();
    h['x-request-id'] = rid;
  }
  rec.requestId = rid ?? '';
  route.requestHeaders.apply(h);
  vhost.requestHeaders.apply(h);
  s.routes.requestHeaders.apply(h);
  return h;
}

/** The upstream half of one request: undici's dispatch handler, piping the response downstream with backpressure. */
class UpstreamCall implements Dispatcher.DispatchHandler {
  private readonly ex: Exchange;
  private readonly s: RouterSettings;
  private readonly rec: RequestRecord;
  private readonly cluster: Cluster;
  private readonly host: Host;
  private readonly vhost: VirtualHost;
  private readonly route: Route;
  private readonly weightedResponseOps: { apply(h: Headers): void } | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(ex: Exchange, s: RouterSettings, rec: RequestRecord, cluster: Cluster, host: Host, vhost: VirtualHost, route: Route, weightedResponseOps: { apply(h: Headers): void } | undefined) {
    this.ex = ex; this.s = s; this.rec = rec; this.cluster = cluster; this.host = host;
    this.vhost = vhost; this.route = route; this.weightedResponseOps = weightedResponseOps;
  }

  start(pool: UpstreamDispatcher, path: string, headers: Headers, timeoutMs: number): void {
    const cs = this.cluster.stats;
    cs.rqTotal.value++;
    cs.rqActive.value++;
    this.host.activeRequests++;
    this.host.rqTotal++;
    if (timeoutMs > 0) this.timer = setTimeout(onTimeout, timeoutMs, this);
    this.ex.watch(() => this.controller?.resume(), () => this.downstreamClosed());
    pool.dispatch({ path, method: this.ex.method, headers, body: this.ex.hasBody ? this.ex.body : null }, this);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.done) controller.abort(new Error('request already finished'));
  }

  /** Request body bytes as they go upstream (BYTES_RECEIVED). */
  onBodySent(chunk: Buffer): void {
    this.rec.bytesReceived += chunk.length;
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (this.done) return;
    const rec = this.rec;
    rec.status = status;
    rec.upstreamServiceTimeMs = Math.round(now() - rec.startMs);
    const h = headers as Headers;
    clearAll(h, HOP_BY_HOP);
    if (this.s.serverName) h.server = this.s.serverName;
    if (!this.s.suppressEnvoyHeaders) h['x-envoy-upstream-service-time'] = String(rec.upstreamServiceTimeMs);
    this.weightedResponseOps?.apply(h);
    this.route.responseHeaders.apply(h);
    this.vhost.responseHeaders.apply(h);
    this.s.routes.responseHeaders.apply(h);
    rec.filters?.encodeHeaders(status, h);
    rec.responseHeaders = h;
    this.cluster.stats.codes.record(status);
    this.ex.respond(status, h as OutgoingHttpHeaders, false);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.done) return;
    this.rec.bytesSent += chunk.length;
    if (!this.ex.write(chunk)) controller.pause();
  }

  onResponseEnd(_c: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.done) return;
    this.ex.end(trailers && Object.keys(trailers).length ? trailers as Headers : undefined);
    this.finish();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.done) return;
    const code = (err as { code?: string }).code ?? '';
    const cs = this.cluster.stats;
    if (this.ex.headersSent) {
      cs.rqReset.inc();
      this.rec.flags = Flag.UpstreamRemoteReset;
      this.ex.reset();
      this.finish();
      return;
    }
    let flag: ResponseFlag = Flag.UpstreamConnectionTermination;
    let body: string = LocalBody.connectionTermination;
    if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ETIMEDOUT') {
      flag = Flag.UpstreamConnectionFailure; body = LocalBody.connectFailure;
      if (code === 'UND_ERR_CONNECT_TIMEOUT') cs.cxConnectTimeout.inc();
    } else if (code === 'ECONNRESET' || code === 'ERR_HTTP2_STREAM_ERROR') {
      flag = Flag.UpstreamRemoteReset; body = LocalBody.remoteReset; cs.rqReset.inc();
    } else if (code === 'HPE_INVALID_CONSTANT' || code.startsWith('HPE_') || code === 'UND_ERR_INFO') {
      flag = Flag.UpstreamProtocolError; body = LocalBody.protocolError;
    }
    this.localReply(503, body, flag, `upstream_reset_before_response_started{${code || err.message}}`);
  }

  private localReply(status: number, body: string, flag: ResponseFlag, details: string): void {
    this.rec.status = status;
    this.rec.flags = flag;
    this.rec.details = details;
    this.rec.bytesSent = sendLocalReply(this.rec, status, body, this.s);
    this.finish();
  }

  timedOut(): void {
    if (this.done) return;
    this.cluster.stats.rqTimeout.inc();
    this.host.rqTimeout++;
    this.controller?.abort(new Error('upstream request timeout'));
    if (this.ex.headersSent) { this.rec.flags = Flag.UpstreamRequestTimeout; this.ex.reset(); this.finish(); return; }
    this.localReply(504, LocalBody.timeout, Flag.UpstreamRequestTimeout, 'upstream_response_timeout');
  }

  private downstreamClosed(): void {
    if (this.done) return;
    this.rec.flags = Flag.DownstreamConnectionTermination;
    this.controller?.abort(new Error('downstream connection closed'));
    this.finish();
  }

  private finish(): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    const host = this.host;
    host.activeRequests--;
    if (this.rec.status >= 500 || this.rec.status === 0 || this.rec.flags !== '-') host.rqError++; else host.rqSuccess++;
    const cs = this.cluster.stats;
    cs.rqActive.value--;
    cs.rqCompleted.value++;
    complete(this.rec, this.s);
  }
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

function onTimeout(call: UpstreamCall): void {
  call.timedOut();
}
