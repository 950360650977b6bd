import type { OutgoingHttpHeaders, IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { HOP_BY_HOP, type Exchange, type Headers } from './exchange.ts';
import type { Route, VirtualHost } from './route-config.ts';
import { sendLocalReply } from './local-reply.ts';
import { Flag, LocalBody, type ResponseFlag } from './response-flags.ts';
import type { RequestRecord } from './request-record.ts';
import { isOverflow, UPSTREAM_OVERFLOW, UpstreamResult, type Cluster } from '../upstream/cluster.ts';
import type { Host } from '../upstream/host.ts';
import type { UpstreamConnectionInfo } from '../upstream/h1-pool.ts';
import { backoffMs, retriableResponse, RetryOn, type RetryPolicy } from './retry-policy.ts';
import type { ReplayableBody } from './replay-body.ts';
import { applySetCookies } from './hash-policy.ts';
import { complete, type RouterSettings } from './router.ts';
import { RetryStats } from './retry-stats.ts';
import { debugUpstreamFailure, routerLog } from './request-log.ts';
import { ALPN_OVERRIDE_STATE, type AlpnOverrides } from '../filters/http/alpn/config.ts';

const now = (): number => performance.now();

/** What the router hands over once a request is planned: where it goes and with what head. */
export interface CallPlan {
  readonly ex: Exchange;
  readonly s: RouterSettings;
  readonly rec: RequestRecord;
  readonly vhost: VirtualHost;
  readonly route: Route;
  readonly cluster: Cluster;
  readonly host: Host;
  readonly path: string;
  readonly headers: Headers;
  readonly timeoutMs: number;
  /** Route idle_timeout (0 = off): no progress for this long ends the stream (408 before headers, reset after). */
  readonly idleTimeoutMs: number;
  readonly weightedResponseOps: { apply(h: Headers, ctx?: RequestRecord): void } | undefined;
  readonly retry: RetryPolicy | undefined;
  /** retry_on bits after x-envoy-retry-on / -grpc-on; numRetries after x-envoy-max-retries. */
  readonly retryOn: number;
  readonly numRetries: number;
  readonly perTryTimeoutMs: number;
  readonly attemptCountHeader: boolean;
  readonly hashPick: ((exclude: readonly Host[]) => Host | undefined) | undefined;
  /** Cookies a hash policy generated: set on the response. */
  readonly setCookies: string[] | undefined;
  /** The request body kept for replay (retries, mirrors), when there is one. */
  readonly body: ReplayableBody | undefined;
}

type Failure = 'connect-failure' | 'reset' | 'refused-stream' | 'protocol' | 'timeout' | 'overflow';

/** Envoy sets this on replies to requests a circuit breaker dropped. */
const OVERLOADED = { 'x-envoy-overloaded': 'true' };

function classify(err: Error): Failure {
  if (isOverflow(err)) return 'overflow';
  const code = (err as { code?: string }).code ?? '';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ETIMEDOUT' || code === 'ERR_TLS_CERT_ALTNAME_INVALID' || code.startsWith('ERR_SSL') || code === 'DEPTH_ZERO_SELF_SIGNED_CERT' || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' || code === 'SELF_SIGNED_CERT_IN_CHAIN') return 'connect-failure';
  if (code === 'ERR_HTTP2_STREAM_ERROR' && /REFUSED_STREAM/.test(err.message)) return 'refused-stream';
  if (code.startsWith('HPE_') || code === 'UND_ERR_INFO') return 'protocol';
  return 'reset';
}

/**
 * One downstream request going upstream, possibly over several attempts
 * (retry_policy): the downstream response is committed to the first attempt
 * whose answer is not retried, then streamed with backpressure.
 */
export class UpstreamRequest {
  private readonly p: CallPlan;
  private retryStats: RetryStats | undefined;
  private readonly body: ReplayableBody | undefined;
  private readonly tried: Host[] = [];
  private attempt: Attempt | undefined;
  private attempts = 0;
  private retriesLeft: number;
  private retryHeld = false;
  private globalTimer: NodeJS.Timeout | undefined;
  private backoffTimer: NodeJS.Timeout | undefined;
  private committed = false;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Progress counter the idle check compares between ticks. */
  private activity = 0;
  private seenActivity = -1;
  done = false;

  constructor(p: CallPlan) {
    this.p = p;
    this.retriesLeft = p.retry ? p.numRetries : 0;
    this.body = p.body;
  }

  /** Looked up only when a retry is considered (most requests never need it). */
  private get stats(): RetryStats {
    return this.retryStats ??= RetryStats.of(this.p.cluster, this.p.s.store);
  }

  start(): void {
    const { p } = this;
    if (p.timeoutMs > 0) this.globalTimer = setTimeout(globalTimeout, p.timeoutMs, this);
    if (p.idleTimeoutMs > 0) this.idleTimer = setInterval(idleCheck, p.idleTimeoutMs, this);
    p.ex.watch(() => { p.rec.bodyEncoder?.drained(); this.attempt?.resume(); }, () => this.downstreamClosed());
    this.send(p.host);
  }

  private send(host: Host): void {
    const { p } = this;
    const body: Readable | null = !p.ex.hasBody ? null : this.body ? (this.body.reader() ?? null) : p.ex.body;
    this.attempts++;
    this.tried.push(host);
    p.rec.upstreamHost = host.hostPort;
    p.rec.upstreamHostInfo = host;
    if (p.attemptCountHeader) p.headers['x-envoy-attempt-count'] = String(this.attempts);
    const att = new Attempt(this, host, this.attempts);
    this.attempt = att;
    att.start(body);
  }

  // ---- decisions an attempt asks for ----

  /**
   * The attempt got its response head: retry it, or commit the downstream response to it.
   * `endStream`: the head ended the response (HTTP/2 HEADERS with END_STREAM), so it is sent
   * downstream the same way: a trailers-only gRPC reply stays trailers-only.
   */
  onHeaders(att: Attempt, status: number, headers: Headers, endStream: boolean): boolean {
    if (this.done || att !== this.attempt) return false;
    this.activity++;
    this.p.cluster.stats.codes.record(status);
    countStatus(att.host, status);
    const grpc = grpcStatusOf(headers);
    if (this.p.retry && retriableResponse(this.p.retry, this.p.retryOn, status, grpc, headers) && this.canRetry()) {
      att.abandon(status);
      this.scheduleRetry();
      return false;
    }
    this.commit(att, status, headers, endStream);
    return true;
  }

  onFailure(att: Attempt, err: Error, failure: Failure): void {
    if (this.done || att !== this.attempt) return;
    if (routerLog.debugOn) debugUpstreamFailure(this.p.rec, att.host.hostPort, failure, err);
    if (failure === 'overflow') { this.fail(att, err, failure); return; }
    const on = this.p.retryOn;
    const retriable = failure === 'connect-failure' ? (on & (RetryOn['connect-failure'] | RetryOn['5xx'] | RetryOn['gateway-error'] | RetryOn.reset)) !== 0
      : failure === 'refused-stream' ? (on & (RetryOn['refused-stream'] | RetryOn.reset | RetryOn['5xx'])) !== 0
      : failure === 'timeout' ? (on & (RetryOn['5xx'] | RetryOn['gateway-error'] | RetryOn.reset)) !== 0
      : (on & (RetryOn.reset | RetryOn['5xx'])) !== 0 || ((on & RetryOn['reset-before-request']) !== 0 && !att.sentBody);
    if (!this.p.ex.headersSent && retriable && this.canRetry()) { this.scheduleRetry(); return; }
    this.fail(att, err, failure);
  }

  private canRetry(): boolean {
    if (this.retriesLeft <= 0 || !this.p.retry) {
      if (this.p.retry && this.attempts > 1) this.stats.limitExceeded.inc();
      return false;
    }
    if (this.body && (!this.body.replayable || !this.body.complete)) return false;
    const view = this.p.ex;
    for (const h of this.p.retry.retriableRequestHeaders) if (!h(view)) return false;
    // Circuit breaker: max_retries outstanding across the cluster.
    if (!this.retryHeld) {
      if (!this.p.cluster.tryAcquireRetry()) return false;
      this.retryHeld = true;
    }
    return true;
  }

  private scheduleRetry(): void {
    this.retriesLeft--;
    this.retryHeld = true;
    this.stats.retry.inc();
    this.stats.backoff.inc();
    this.attempt = undefined;
    const delay = backoffMs(this.p.retry as RetryPolicy, this.attempts);
    this.backoffTimer = setTimeout(retryNow, delay, this);
  }

  retryNow(): void {
    this.backoffTimer = undefined;
    if (this.done) return;
    const host = this.pickRetryHost();
    if (!host) { this.localReply(503, LocalBody.noHealthyUpstream, Flag.NoHealthyUpstream, 'no_healthy_upstream'); return; }
    this.send(host);
  }

  /** previous_hosts: try up to host_selection_retry_max_attempts picks to avoid hosts already tried. */
  private pickRetryHost(): Host | undefined {
    const p = this.p;
    const last = this.tried[this.tried.length - 1];
    const tries = p.retry?.previousHosts ? Math.max(1, p.retry.hostSelectionMaxAttempts) : 1;
    let host: Host | undefined;
    for (let i = 0; i < tries; i++) {
      host = p.hashPick ? p.hashPick(this.tried) : p.cluster.pick({ originalDst: p.ex.conn.originalDst, exclude: last });
      if (!host || !p.retry?.previousHosts || !this.tried.includes(host)) break;
    }
    return host;
  }

  // ---- the committed response ----

  private commit(att: Attempt, status: number, h: Headers, endStream: boolean): void {
    this.committed = true;
    const { p } = this;
    const rec = p.rec;
    rec.status = status;
    rec.upstreamServiceTimeMs = Math.round(now() - rec.startMs);
    for (let i = 0; i < HOP_BY_HOP.length; i++) if (h[HOP_BY_HOP[i]] !== undefined) h[HOP_BY_HOP[i]] = undefined;
    if (p.s.serverName) h.server = p.s.serverName;
    if (!p.s.suppressEnvoyHeaders) h['x-envoy-upstream-service-time'] = String(rec.upstreamServiceTimeMs);
    if (p.attemptCountHeader) h['x-envoy-attempt-count'] = String(this.attempts);
    if (p.setCookies?.length) applySetCookies(h, p.setCookies);
    p.weightedResponseOps?.apply(h, rec);
    p.route.responseHeaders.apply(h, rec);
    p.vhost.responseHeaders.apply(h, rec);
    p.s.routes.responseHeaders.apply(h, rec);
    rec.filters?.encodeHeaders(status, h);
    rec.responseHeaders = h;
    p.ex.respond(status, h as OutgoingHttpHeaders, endStream);
    if (rec.bodyEncoder !== undefined) {
      if (endStream) rec.bodyEncoder = undefined;
      else rec.bodyEncoder.start(p.ex, rec, () => this.resume());
    }
    if (this.attempts > 1 && status < 500) this.stats.success.inc();
  }

  onData(chunk: Buffer): boolean {
    this.activity++;
    const rec = this.p.rec;
    rec.dataTap?.response(chunk);
    // An encoder (compressor) counts the bytes it sends.
    if (rec.bodyEncoder !== undefined) return rec.bodyEncoder.write(chunk);
    rec.bytesSent += chunk.length;
    return this.p.ex.write(chunk);
  }

  onEnd(trailers: Headers | undefined): void {
    if (this.done) return;
    this.p.rec.responseTrailers = trailers;
    const enc = this.p.rec.bodyEncoder;
    if (enc !== undefined) { enc.end(trailers, () => this.finish()); return; }
    this.p.ex.end(trailers);
    this.finish();
  }

  private fail(att: Attempt, err: Error, failure: Failure): void {
    const code = (err as { code?: string }).code ?? '';
    const cs = this.p.cluster.stats;
    if (this.p.ex.headersSent) {
      cs.rqReset.inc();
      this.p.rec.flags = Flag.UpstreamRemoteReset;
      this.p.ex.reset();
      this.finish();
      return;
    }
    let flag: ResponseFlag = Flag.UpstreamConnectionTermination;
    let body: string = LocalBody.connectionTermination;
    if (failure === 'connect-failure') {
      flag = Flag.UpstreamConnectionFailure; body = LocalBody.connectFailure;
      if (code === 'UND_ERR_CONNECT_TIMEOUT') cs.cxConnectTimeout.inc();
    } else if (failure === 'timeout') {
      this.perTryTimeoutReply();
      return;
    } else if (failure === 'overflow') {
      this.localReply(503, LocalBody.overflow, Flag.UpstreamOverflow, 'upstream_reset_before_response_started{overflow}', this.p.s.suppressEnvoyHeaders ? undefined : OVERLOADED);
      return;
    } else if (code === 'ECONNRESET' || code === 'ERR_HTTP2_STREAM_ERROR') {
      flag = Flag.UpstreamRemoteReset; body = LocalBody.remoteReset; cs.rqReset.inc();
    } else if (failure === 'protocol') {
      flag = Flag.UpstreamProtocolError; body = LocalBody.protocolError;
    }
    att.host.rqError++;
    this.localReply(503, body, flag, `upstream_reset_before_response_started{${code || err.message}}`);
  }

  private perTryTimeoutReply(): void {
    this.localReply(504, LocalBody.timeout, Flag.UpstreamRequestTimeout, 'upstream_per_try_timeout');
  }

  private localReply(status: number, body: string, flag: ResponseFlag, details: string, headers?: OutgoingHttpHeaders): void {
    const rec = this.p.rec;
    rec.status = status;
    rec.flags = flag;
    rec.details = details;
    rec.bytesSent = sendLocalReply(rec, status, body, this.p.s, headers);
    this.finish();
  }

  /** Called every idle_timeout: a tick without progress means the stream is idle. */
  idleTick(): void {
    if (this.done) return;
    if (this.activity !== this.seenActivity) { this.seenActivity = this.activity; return; }
    this.attempt?.abandon(0);
    if (this.p.ex.headersSent) { this.p.rec.flags = Flag.StreamIdleTimeout; this.p.ex.reset(); this.finish(); return; }
    this.localReply(408, LocalBody.streamIdle, Flag.StreamIdleTimeout, 'stream_idle_timeout');
  }

  timedOut(): void {
    if (this.done) return;
    const cs = this.p.cluster.stats;
    cs.rqTimeout.inc();
    if (this.attempt) {
      this.attempt.host.rqTimeout++;
      // Envoy reports the timeout to outlier detection only for an attempt still awaiting its head.
      if (!this.committed) this.p.cluster.recordResult(this.attempt.host, UpstreamResult.Timeout);
      this.attempt.abandon(0);
    }
    if (this.p.ex.headersSent) { this.p.rec.flags = Flag.UpstreamRequestTimeout; this.p.ex.reset(); this.finish(); return; }
    this.localReply(504, LocalBody.timeout, Flag.UpstreamRequestTimeout, 'upstream_response_timeout');
  }

  private downstreamClosed(): void {
    if (this.done) return;
    this.p.rec.flags = Flag.DownstreamConnectionTermination;
    this.attempt?.abandon(0);
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    if (this.globalTimer) clearTimeout(this.globalTimer);
    if (this.idleTimer) clearInterval(this.idleTimer);
    if (this.backoffTimer) clearTimeout(this.backoffTimer);
    if (this.retryHeld) { this.retryHeld = false; this.p.cluster.releaseRetry(); }
    if (this.body) this.p.rec.bytesReceived = this.body.received;
    this.attempt?.release();
    complete(this.p.rec, this.p.s);
  }

  resume(): void { this.attempt?.resume(); }

  get isCommitted(): boolean { return this.committed; }
  get plan(): CallPlan { return this.p; }
}

function globalTimeout(r: UpstreamRequest): void { r.timedOut(); }
function idleCheck(r: UpstreamRequest): void { r.idleTick(); }

/** Per-host rq_success / rq_error as /clusters shows them (5xx counts as an error). */
function countStatus(host: Host, status: number): void {
  if (status >= 500) host.rqError++; else host.rqSuccess++;
}
function retryNow(r: UpstreamRequest): void { r.retryNow(); }

function grpcStatusOf(h: Headers): number {
  const v = h['grpc-status'];
  return typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : -1;
}

/** One try against one host: the undici-style dispatch handler. */
class Attempt implements Dispatcher.DispatchHandler {
  readonly host: Host;
  private readonly parent: UpstreamRequest;
  private readonly n: number;
  private controller: Dispatcher.DispatchController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private state: 'pending' | 'streaming' | 'over' = 'pending';
  private released = false;
  sentBody = false;

  constructor(parent: UpstreamRequest, host: Host, n: number) {
    this.parent = parent;
    this.host = host;
    this.n = n;
  }

  private startMs = 0;

  start(body: Readable | null): void {
    const p = this.parent.plan;
    this.startMs = now();
    if (!p.cluster.tryAcquireRequest()) {
      // max_requests: nothing was taken, so nothing to release.
      this.state = 'over';
      this.released = true;
      this.parent.onFailure(this, Object.assign(new Error('max_requests circuit breaker open'), { code: UPSTREAM_OVERFLOW }), 'overflow');
      return;
    }
    const cs = p.cluster.stats;
    cs.rqTotal.value++;
    cs.rqActive.value++;
    this.host.activeRequests++;
    this.host.rqTotal++;
    if (p.perTryTimeoutMs > 0) this.timer = setTimeout(perTryTimeout, p.perTryTimeoutMs, this);
    const http2 = p.cluster.config.protocol === 'http2' || (p.cluster.config.protocol === 'downstream' && p.ex.protocol === 'HTTP/2');
    const alpn = p.rec.filterState?.get(ALPN_OVERRIDE_STATE) as AlpnOverrides | undefined;
    const override = alpn && this.host.tls ? alpn[http2 ? 'HTTP2' : p.ex.protocol === 'HTTP/1.0' && p.cluster.config.protocol === 'downstream' ? 'HTTP10' : 'HTTP11'] : undefined;
    p.cluster.httpPool(this.host, http2, override).dispatch({ path: p.path, method: p.ex.method, headers: p.headers, body }, this);
  }

  /** The connection carrying this attempt (%UPSTREAM_LOCAL_ADDRESS%). */
  onUpstreamConnection(c: UpstreamConnectionInfo): void {
    this.parent.plan.rec.upstreamLocalAddress = c.localAddress;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.state === 'over') controller.abort(new Error('attempt abandoned'));
  }

  onBodySent(chunk: Buffer): void {
    this.sentBody = true;
    // Without a replay buffer the first (only) attempt counts the bytes (BYTES_RECEIVED).
    if (this.n === 1) {
      const rec = this.parent.plan.rec;
      rec.bytesReceived += chunk.length;
      rec.dataTap?.request(chunk);
    }
  }

  onResponseStart(c: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    if (this.state !== 'pending') return;
    this.clearTimer();
    this.parent.plan.cluster.recordResult(this.host, status);
    const endStream = (c as { endStream?: boolean }).endStream === true;
    if (this.parent.onHeaders(this, status, headers as Headers, endStream)) this.state = 'streaming';
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.state !== 'streaming') return;
    if (!this.parent.onData(chunk)) controller.pause();
  }

  onResponseEnd(_c: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.state !== 'streaming') return;
    this.state = 'over';
    this.parent.plan.cluster.stats.rqTime.record(now() - this.startMs);
    this.release();
    this.parent.onEnd(trailers && Object.keys(trailers).length ? trailers as Headers : undefined);
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.state === 'over') return;
    this.state = 'over';
    this.clearTimer();
    this.release();
    const failure = classify(err);
    if (failure !== 'overflow') this.parent.plan.cluster.recordResult(this.host, failure === 'connect-failure' ? UpstreamResult.ConnectFailed : UpstreamResult.Reset);
    this.parent.onFailure(this, err, failure);
  }

  timedOut(): void {
    if (this.state !== 'pending') return;
    this.state = 'over';
    this.parent.plan.cluster.stats.rqTimeout.inc();
    this.host.rqTimeout++;
    this.parent.plan.cluster.recordResult(this.host, UpstreamResult.Timeout);
    this.controller?.abort(new Error('per try timeout'));
    this.release();
    this.parent.onFailure(this, Object.assign(new Error('upstream per try timeout'), { code: 'UPSTREAM_PER_TRY_TIMEOUT' }), 'timeout');
  }

  /** Drop this attempt (retried response, timeout, downstream gone). */
  abandon(status: number): void {
    if (this.state === 'over') return;
    this.state = 'over';
    this.clearTimer();
    this.controller?.abort(new Error('attempt abandoned'));
    this.release();
  }

  resume(): void { this.controller?.resume(); }

  /** Per-attempt accounting, exactly once. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.clearTimer();
    const cs = this.parent.plan.cluster.stats;
    this.host.activeRequests--;
    cs.rqActive.value--;
    cs.rqCompleted.value++;
    this.parent.plan.cluster.releaseRequest();
  }

  private clearTimer(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
  }
}

function perTryTimeout(a: Attempt): void { a.timedOut(); }
