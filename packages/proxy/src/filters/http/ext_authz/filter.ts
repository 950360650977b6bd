import type { Readable } from 'node:stream';
import type { Counter } from '../../../stats/store.ts';
import type { Exchange } from '../../../http/exchange.ts';
import { followBody, readBodyPrefix, type BodyPrefix } from '../../../http/buffered-body.ts';
import { Flag } from '../../../http/response-flags.ts';
import { logger } from '../../../core/log.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterScope, LiveHttpFilter } from '../types.ts';
import type { BodySettings, ExtAuthzConfig, ExtAuthzPerRoute } from './config.ts';
import { buildCheckRequest, checkBody, checkHeaders, type CheckInput } from './check-request.ts';
import { grpcCheck } from './grpc-client.ts';
import { httpCheck } from './http-client.ts';
import { applyToRequest, applyToResponse, denialHeaders, errorResult, type AuthzResult } from './result.ts';

const log = logger('ext_authz');

/** The dynamic metadata namespace Envoy's ext_authz writes, whatever the filter's own name. */
export const EXT_AUTHZ_METADATA = 'envoy.filters.http.ext_authz';
export const FAILURE_MODE_ALLOWED_HEADER = 'x-envoy-auth-failure-mode-allowed';
/** Envoy's RESPONSE_CODE_DETAILS for ext_authz local replies. */
export const DETAILS_DENIED = 'ext_authz_denied';
export const DETAILS_ERROR = 'ext_authz_error';

interface AuthzCounters {
  readonly ok: Counter;
  readonly denied: Counter;
  readonly error: Counter;
  readonly disabled: Counter;
  readonly failureModeAllowed: Counter;
}

/** Envoy's HTTP stream id stands in for CheckRequest.attributes.request.http.id: unique per request. */
let nextStreamId = Math.floor(Math.random() * 0x7fffffff);

const NO_EXTENSIONS: Readonly<Record<string, string>> = Object.freeze({});

/** Upgrades and CONNECT are never buffered (Envoy checks them on headers alone). */
function isUpgrade(ex: Exchange): boolean {
  return ex.method === 'CONNECT' || ex.headers.upgrade !== undefined;
}

/**
 * Envoy's external authorization filter: per request (unless the route turns it off, or
 * filter_enabled / filter_enabled_metadata say no), optionally buffer the body, ask the
 * authorization service (gRPC Authorization/Check or a plain HTTP call), then continue with the
 * answer's header edits, or answer locally with its denial (UAEX), or — when the call fails —
 * with status_on_error unless failure_mode_allow. Stats: `http.<hcm prefix>.ext_authz.[<stat_prefix>.]ok`
 * / denied / error / disabled / failure_mode_allowed, and ok / denied / error /
 * failure_mode_allowed under the route's `cluster.<name>.ext_authz.`.
 */
export function liveExtAuthz(name: string, c: ExtAuthzConfig, scope: HttpFilterScope): LiveHttpFilter {
  const pre = `ext_authz.${c.statPrefix ? `${c.statPrefix}.` : ''}`;
  const counters = (s: ReturnType<typeof scope.store.scope>): AuthzCounters => ({
    ok: s.counter(`${pre}ok`), denied: s.counter(`${pre}denied`), error: s.counter(`${pre}error`),
    disabled: s.counter(`${pre}disabled`), failureModeAllowed: s.counter(`${pre}failure_mode_allowed`),
  });
  const stats = counters(scope.store.scope('http', 'envoy_http_conn_manager_prefix', scope.statPrefix));
  const byCluster = new Map<string, AuthzCounters>();
  const stateKey = `ext_authz:${name}`;

  /** The route's cluster (Envoy's clusterInfo()): ext_authz counters and, on a denial, its response-code stats. */
  const routeCluster = (cb: FilterCallbacks): string => {
    const a = cb.route?.action;
    return a?.kind === 'forward' ? a.cluster : '';
  };
  const clusterCounters = (cluster: string): AuthzCounters | undefined => {
    if (!cluster || !scope.clusters?.get(cluster)) return undefined;
    let s = byCluster.get(cluster);
    if (!s) { s = counters(scope.store.scope('cluster', 'envoy_cluster_name', cluster)); byCluster.set(cluster, s); }
    return s;
  };

  const enabled = (cb: FilterCallbacks): boolean => {
    if (c.enabledFraction < 1 && Math.random() >= c.enabledFraction) return false;
    return !c.enabledMetadata || c.enabledMetadata(cb.rec.metadata);
  };

  const onResult = (cb: FilterCallbacks, r: AuthzResult, startMs: number, source: Readable | undefined): void => {
    if (r.metadata && c.ingestMetadata) {
      if (r.status === 'ok') r.metadata.ext_authz_duration = Math.round(performance.now() - startMs);
      cb.rec.setMetadata(EXT_AUTHZ_METADATA, r.metadata);
    }
    const cluster = routeCluster(cb);
    const cs = clusterCounters(cluster);
    if (r.status === 'ok') {
      applyToRequest(r, cb.ex);
      if (r.responseHeaders.length) (cb.rec.filterState ??= new Map()).set(stateKey, r);
      cs?.ok.inc();
      stats.ok.inc();
      cb.continueDecoding();
      return;
    }
    if (r.status === 'error') {
      cs?.error.inc();
      stats.error.inc();
      if (c.failureModeAllow) {
        stats.failureModeAllowed.inc();
        cs?.failureModeAllowed.inc();
        if (c.failureModeAllowHeaderAdd) cb.ex.headers[FAILURE_MODE_ALLOWED_HEADER] = 'true';
        cb.continueDecoding();
        return;
      }
      discardRest(source);
      cb.sendLocalReply(c.statusOnError, undefined, Flag.UnauthorizedExternalService, DETAILS_ERROR);
      return;
    }
    stats.denied.inc();
    if (cs) {
      cs.denied.inc();
      if (c.chargeClusterStats) {
        const cl = scope.clusters?.get(cluster);
        cl?.stats.codes.record(r.httpStatus);
        cl?.stats.rqCompleted.inc();
      }
    }
    discardRest(source);
    cb.sendLocalReply(r.httpStatus, r.body === '' ? undefined : r.body, Flag.UnauthorizedExternalService, DETAILS_DENIED, denialHeaders(r));
  };

  const check = (cb: FilterCallbacks, ext: Readonly<Record<string, string>>, body: BodyPrefix | undefined, settings: BodySettings | undefined,
    source: Readable | undefined): void => {
    const startMs = performance.now();
    const input: CheckInput = { ex: cb.ex, rec: cb.rec, streamId: String(nextStreamId++), body, bodySettings: settings, contextExtensions: ext };
    let cancelled = false;
    const done = (r: AuthzResult): void => { if (!cancelled) onResult(cb, r, startMs, source); };
    let cancelCall: () => void;
    try {
      if (c.service.kind === 'grpc') {
        cancelCall = grpcCheck(c.service, scope.clusters, buildCheckRequest(c, input), done);
      } else {
        const b = checkBody(input);
        cancelCall = httpCheck(c.service, scope.clusters, cb.rec, checkHeaders(c, cb.ex, b?.partial), b?.data, done);
      }
    } catch (err) {
      // Fail closed: a check that cannot be made is an error (status_on_error unless failure_mode_allow).
      log.error(`ext_authz: cannot make the check: ${(err as Error).message}`);
      queueMicrotask(() => done(errorResult()));
      return;
    }
    cb.onCancel(() => { cancelled = true; cancelCall(); });
  };

  return {
    decodeHeaders(cb: FilterCallbacks): FilterStatus {
      // Envoy skips the check when no route matched (the router answers 404).
      if (!cb.route) return 'continue';
      const levels = cb.perRouteAll<ExtAuthzPerRoute>(name);
      const specific = levels.length ? levels[levels.length - 1] : undefined;
      if (specific?.disabled) return 'continue';
      if (!enabled(cb)) {
        stats.disabled.inc();
        if (!c.denyAtDisable) return 'continue';
        cb.sendLocalReply(c.statusOnError, undefined, Flag.UnauthorizedExternalService, DETAILS_ERROR);
        return 'stop';
      }
      // context_extensions merge from the least to the most specific level; the flags come from the most specific.
      let ext = NO_EXTENSIONS;
      for (const l of levels) if (!l.disabled && Object.keys(l.contextExtensions).length) ext = { ...ext, ...l.contextExtensions };
      const settings = (specific && !specific.disabled ? specific.body : undefined) ?? c.body;
      const skipBuffer = specific !== undefined && !specific.disabled && specific.disableBodyBuffering;
      const ex = cb.ex;
      if (settings && !skipBuffer && ex.hasBody && !isUpgrade(ex)) {
        const source = ex.body;
        cb.onCancel(noop);
        readBodyPrefix(source, settings.maxBytes, settings.allowPartial, (prefix) => {
          if (prefix.overflow) {
            discardRest(source);
            cb.sendLocalReply(413, 'Payload Too Large', '-', 'request_payload_too_large');
            return;
          }
          ex.body = followBody(prefix, source);
          check(cb, ext, prefix, settings, source);
        }, noop /* the downstream left: onCancel ends the request */);
        return 'stop';
      }
      check(cb, ext, undefined, settings, undefined);
      return 'stop';
    },

    encodeHeaders(cb: FilterCallbacks, _status: number, headers): void {
      const r = cb.rec.filterState?.get(stateKey) as AuthzResult | undefined;
      if (r) applyToResponse(r, headers);
    },
  };
}

function noop(): void { /* nothing to do */ }

/** A refused request's unread body is drained and dropped, so the connection can carry the reply. */
function discardRest(source: Readable | undefined): void {
  if (source && !source.readableEnded && !source.destroyed) {
    source.removeAllListeners('data');
    source.resume();
  }
}
