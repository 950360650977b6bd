import { Client, credentials, Metadata, status as GrpcStatus, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import type { PeerCertificate } from 'node:tls';
import type { ClusterManager } from '../../../upstream/manager.ts';
import type { Cluster } from '../../../upstream/cluster.ts';
import type { Host } from '../../../upstream/host.ts';
import type { TlsState } from '../../../tls/context.ts';
import { sansMatch } from '../../../matchers/san.ts';
import { messageToJson } from '../../../xds/decode.ts';
import { logger } from '../../../core/log.ts';
import type { GrpcAuthzService } from './config.ts';
import { authProtos } from './protos.ts';
import { errorResult, newResult, type AuthzResult, type HeaderPair, type ResponseHeaderAction } from './result.ts';

const log = logger('ext_authz');

const CHECK_METHOD = '/envoy.service.auth.v3.Authorization/Check';

type Json = Record<string, unknown>;
/** protobufjs's decoded message: snake_case fields, unset ones read as their defaults. */
type Decoded = Record<string, unknown>;

/** A host's Check channel, made with the TLS state (SDS secrets) current when it was opened. */
class AuthzChannel {
  readonly client: Client;
  readonly tls: TlsState | undefined;
  constructor(client: Client, tls: TlsState | undefined) { this.client = client; this.tls = tls; }
  close(): void { this.client.close(); }
}

/**
 * One gRPC channel (HTTP/2 connection) per host and authority, kept in the host's pools and closed
 * with them; reopened when the cluster's TLS secrets rotate. Undefined while its SDS secrets are missing.
 */
function channelFor(cluster: Cluster, host: Host, authority: string): Client | undefined {
  const key = `ext_authz_grpc|${authority}`;
  const pools = (host.pools ??= new Map());
  const tls = cluster.config.tls;
  const state = tls?.current();
  if (tls && !state) return undefined;
  const existing = pools.get(key);
  if (existing instanceof AuthzChannel) {
    if (existing.tls === state) return existing.client;
    existing.close();
  }
  let creds: ChannelCredentials = credentials.createInsecure();
  const options: Record<string, string | number> = { 'grpc.default_authority': authority };
  if (tls && state) {
    // Verified as Envoy verifies upstreams: the chain against the cluster's CA and the SANs against its matchers, never the hostname.
    creds = credentials.createFromSecureContext(state.context, {
      rejectUnauthorized: state.verifyPeer,
      checkServerIdentity: (_host: string, cert: PeerCertificate) => (sansMatch(state.sanMatchers, cert) ? undefined
        : new Error('ext_authz server certificate SANs do not match match_subject_alt_names')),
    });
    if (tls.sni) options['grpc.ssl_target_name_override'] = tls.sni;
  }
  const channel = new AuthzChannel(new Client(host.hostPort, creds, options), state);
  pools.set(key, channel);
  return channel.client;
}

const identity = (b: Buffer): Buffer => b;

/**
 * One Authorization/Check call through the named cluster: a host picked by the cluster's load
 * balancer, the call bounded by the service timeout. `done` gets the answer (an error result for
 * any failure: no cluster, no host, timeout, a non-OK gRPC status). Returns a cancel function.
 */
export function grpcCheck(svc: GrpcAuthzService, clusters: ClusterManager | undefined, request: Json, done: (r: AuthzResult) => void): () => void {
  const cluster = clusters?.get(svc.cluster);
  const host = cluster?.pick(undefined);
  if (!cluster || !host) {
    log.debug(`ext_authz: ${cluster ? 'no healthy host in' : 'no'} cluster ${svc.cluster}`);
    if (cluster) cluster.stats.cxNone.inc();
    queueMicrotask(() => done(errorResult()));
    return noop;
  }
  const p = authProtos();
  let bytes: Buffer;
  try {
    bytes = Buffer.from(p.checkRequest.encode(request).finish());
  } catch (err) {
    log.error(`ext_authz: cannot encode CheckRequest: ${(err as Error).message}`);
    queueMicrotask(() => done(errorResult()));
    return noop;
  }
  const md = new Metadata();
  for (const [k, v] of svc.initialMetadata) md.add(k, v);
  const channel = channelFor(cluster, host, svc.authority);
  if (!channel) {
    log.debug(`ext_authz: cluster ${svc.cluster}: TLS secrets not supplied by SDS yet`);
    queueMicrotask(() => done(errorResult()));
    return noop;
  }
  cluster.stats.rqTotal.inc();
  const call = channel.makeUnaryRequest(CHECK_METHOD, identity, identity, bytes, md,
    { deadline: Date.now() + svc.timeoutMs },
    (err: ServiceError | null, reply?: Buffer) => {
      if (err || !reply) {
        if (err?.code === GrpcStatus.DEADLINE_EXCEEDED) cluster.stats.rqTimeout.inc();
        if (err?.code !== GrpcStatus.CANCELLED) log.debug(`ext_authz: Check to ${svc.cluster} failed: ${err?.message ?? 'no reply'}`);
        done(errorResult());
        return;
      }
      let result: AuthzResult;
      try {
        result = toResult(p.checkResponse.decode(reply) as unknown as Decoded);
      } catch (e) {
        log.warn(`ext_authz: bad CheckResponse from ${svc.cluster}: ${(e as Error).message}`);
        result = errorResult();
      }
      done(result);
    });
  return () => call.cancel();
}

function noop(): void { /* nothing to cancel */ }

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function list(v: unknown): Decoded[] {
  return Array.isArray(v) ? v as Decoded[] : [];
}

/** HeaderValueOption → name, value and whether `append` (BoolValue) was set true / explicitly false. */
function headerOption(o: Decoded): { name: string; value: string; append: boolean | undefined; action: number } {
  const h = (o.header ?? {}) as Decoded;
  const raw = h.raw_value as Uint8Array | undefined;
  const value = raw && raw.length ? Buffer.from(raw).toString('latin1') : str(h.value);
  const append = o.append ? Boolean((o.append as Decoded).value) : undefined;
  return { name: str(h.key).toLowerCase(), value, append, action: Number(o.append_action ?? 0) };
}

/** HeaderValueOption.HeaderAppendAction numbers. */
const APPEND_ACTIONS: readonly ResponseHeaderAction[] = ['add', 'add_if_absent', 'set', 'overwrite_if_exists'];

/** Ok/denied header lists: `append` true appends, anything else overwrites (the field's default is false here). */
function splitHeaders(opts: unknown, set: HeaderPair[], append: HeaderPair[]): void {
  for (const o of list(opts)) {
    const h = headerOption(o);
    if (!h.name) continue;
    (h.append ? append : set).push([h.name, h.value]);
  }
}

function structJson(v: unknown): Record<string, unknown> | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const json = messageToJson(authProtos().struct, v as Json, 'dynamic_metadata') as Record<string, unknown>;
  return Object.keys(json).length ? json : undefined;
}

/** CheckResponse → the filter's answer, with Envoy's reading of each field. */
export function toResult(res: Decoded): AuthzResult {
  const code = Number(((res.status ?? {}) as Decoded).code ?? 0);
  const ok = res.ok_response as Decoded | null | undefined;
  const denied = res.denied_response as Decoded | null | undefined;
  let r: AuthzResult;
  if (code === 0) {
    r = newResult('ok', 200);
    if (ok) {
      splitHeaders(ok.headers, r.headersToSet, r.headersToAppend);
      r.headersToRemove = list(ok.headers_to_remove).map((n) => String(n).toLowerCase());
      for (const o of list(ok.response_headers_to_add)) {
        const h = headerOption(o);
        if (!h.name) continue;
        const action = h.append !== undefined ? (h.append ? 'add' : 'set') : APPEND_ACTIONS[h.action] ?? 'add';
        r.responseHeaders.push({ name: h.name, value: h.value, action });
      }
      for (const q of list(ok.query_parameters_to_set)) r.queryToSet.push([str(q.key), str(q.value)]);
      r.queryToRemove = list(ok.query_parameters_to_remove).map((n) => String(n));
    }
  } else {
    r = newResult('denied', 403);
    if (denied) {
      splitHeaders(denied.headers, r.headersToSet, r.headersToAppend);
      const status = Number(((denied.status ?? {}) as Decoded).code ?? 0);
      if (status > 0) r.httpStatus = status;
      r.body = str(denied.body);
    }
  }
  // The deprecated OkHttpResponse.dynamic_metadata wins over the response's when set (Envoy).
  r.metadata = (ok && ok.dynamic_metadata ? structJson(ok.dynamic_metadata) : undefined) ?? structJson(res.dynamic_metadata);
  return r;
}
