import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import type { Headers } from '../../../http/exchange.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import type { ClusterManager } from '../../../upstream/manager.ts';
import type { Cluster } from '../../../upstream/cluster.ts';
import type { Host } from '../../../upstream/host.ts';
import { logger } from '../../../core/log.ts';
import type { HttpAuthzService } from './config.ts';
import { errorResult, newResult, type AuthzResult } from './result.ts';
import type { HeaderPair } from './result.ts';

const log = logger('ext_authz');

/** The authorization server names request headers to strip from the upstream request in this header (OK answers only). */
const HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove';
/** A denial body larger than this is cut (the check is a small exchange; this bounds memory per request). */
const MAX_REPLY_BYTES = 1 << 20;

/**
 * The check as a plain HTTP request through the cluster's own upstream pool (Envoy's raw HTTP
 * client): the original method, path_prefix + the original path, the original :authority, the
 * allowed request headers, content-length, and the buffered body when with_request_body.
 */
export function httpCheck(svc: HttpAuthzService, clusters: ClusterManager | undefined, rec: RequestRecord,
  checkHeaders: readonly HeaderPair[], body: Buffer | undefined, done: (r: AuthzResult) => void): () => void {
  const cluster = clusters?.get(svc.cluster);
  const host = cluster?.pick(undefined);
  if (!cluster || !host || !cluster.tryAcquireRequest()) {
    log.debug(`ext_authz: cannot call ${svc.cluster}: ${!cluster ? 'no such cluster' : !host ? 'no healthy host' : 'max_requests reached'}`);
    if (cluster && !host) cluster.stats.cxNone.inc();
    queueMicrotask(() => done(errorResult()));
    return noop;
  }
  let path = rec.ex.path, method = rec.ex.method;
  const headers: Headers = {};
  for (const [k, v] of checkHeaders) {
    if (k === 'content-length' || !svc.requestHeaders(k)) continue;
    if (k === ':path') path = v;
    else if (k === ':method') method = v;
    else if (k === ':authority') headers.host = v;
    else if (k.charCodeAt(0) !== 58) headers[k] = headers[k] === undefined ? v : `${headers[k] as string},${v}`;
  }
  headers['content-length'] = String(body?.length ?? 0);
  if (!svc.headersToAdd.empty) svc.headersToAdd.apply(headers, rec);
  const call = new HttpCheckCall(svc, cluster, host, done);
  const http2 = cluster.config.protocol === 'http2';
  cluster.httpPool(host, http2).dispatch({ path: svc.pathPrefix + path, method, headers, body: body?.length ? Readable.from([body]) : null }, call);
  return () => call.cancel();
}

function noop(): void { /* nothing to cancel */ }

class HttpCheckCall implements Dispatcher.DispatchHandler {
  private readonly svc: HttpAuthzService;
  private readonly cluster: Cluster;
  private readonly host: Host;
  private readonly done: (r: AuthzResult) => void;
  private controller: Dispatcher.DispatchController | undefined;
  private readonly timer: NodeJS.Timeout;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private over = false;

  constructor(svc: HttpAuthzService, cluster: Cluster, host: Host, done: (r: AuthzResult) => void) {
    this.svc = svc; this.cluster = cluster; this.host = host; this.done = done;
    cluster.stats.rqTotal.inc();
    cluster.stats.rqActive.inc();
    host.activeRequests++;
    host.rqTotal++;
    this.timer = setTimeout(() => {
      cluster.stats.rqTimeout.inc();
      host.rqTimeout++;
      this.finish(errorResult(), new Error('ext_authz check timed out'));
    }, svc.timeoutMs);
  }

  cancel(): void { this.finish(undefined, new Error('ext_authz check cancelled')); }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.over) controller.abort(new Error('ext_authz check abandoned'));
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    this.status = status;
    this.headers = headers;
    this.cluster.stats.codes.record(status);
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.size >= MAX_REPLY_BYTES) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  onResponseEnd(): void {
    const body = Buffer.concat(this.chunks, this.size).subarray(0, MAX_REPLY_BYTES).toString('utf8');
    this.finish(httpResult(this.svc, this.status, this.headers, body));
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    log.debug(`ext_authz: HTTP check to ${this.svc.cluster} failed: ${err.message}`);
    this.finish(errorResult());
  }

  /** Exactly once: stop the timer, release the request, report (nothing when cancelled). */
  private finish(r: AuthzResult | undefined, abort?: Error): void {
    if (this.over) return;
    this.over = true;
    clearTimeout(this.timer);
    if (abort) this.controller?.abort(abort);
    this.host.activeRequests--;
    this.cluster.stats.rqActive.dec();
    this.cluster.stats.rqCompleted.inc();
    this.cluster.releaseRequest();
    if (r) this.done(r);
  }
}

function each(headers: IncomingHttpHeaders, fn: (name: string, value: string) => void): void {
  for (const name in headers) {
    const v = headers[name];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) fn(name, x); else fn(name, String(v));
  }
}

/** An authorization server's HTTP answer read as Envoy reads it: 5xx is an error, 200 allows, anything else denies. */
export function httpResult(svc: HttpAuthzService, status: number, headers: IncomingHttpHeaders, body: string): AuthzResult {
  if (status >= 500 && status < 600) return errorResult();
  const metadata: Record<string, unknown> = {};
  let r: AuthzResult;
  if (status === 200) {
    r = newResult('ok', 200);
    const remove = headers[HEADERS_TO_REMOVE];
    for (const list of remove === undefined ? [] : Array.isArray(remove) ? remove : [remove]) {
      for (const n of list.split(',')) { const t = n.trim().toLowerCase(); if (t) r.headersToRemove.push(t); }
    }
    each(headers, (name, value) => {
      if (name === HEADERS_TO_REMOVE) return;
      if (svc.upstreamHeaders?.(name)) r.headersToSet.push([name, value]);
      if (svc.upstreamHeadersToAppend?.(name)) r.headersToAdd.push([name, value]);
      if (svc.clientHeadersOnSuccess?.(name)) r.responseHeaders.push({ name, value, action: 'add' });
      if (svc.metadataFromHeaders?.(name)) metadata[name] = value;
    });
  } else {
    r = newResult('denied', status);
    r.body = body;
    each(headers, (name, value) => {
      if (name === HEADERS_TO_REMOVE) return;
      if (svc.clientHeaders(name)) r.headersToSet.push([name, value]);
      if (svc.metadataFromHeaders?.(name)) metadata[name] = value;
    });
  }
  if (Object.keys(metadata).length) r.metadata = metadata;
  return r;
}
