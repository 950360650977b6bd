import { Msg } from '../../../config/fields.ts';
import { probability } from '../../../config/percent.ts';
import { compileHeaderMatcher, type HeaderPredicate } from '../../../http/route-match.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { liveFault } from './filter.ts';

export const FAULT_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault';

export interface FaultPolicy {
  /** Fixed delay in ms, or -1 when the delay comes from `x-envoy-fault-delay-request`; undefined = no delay. */
  readonly delayMs: number | undefined;
  readonly delayFraction: number;
  /** HTTP status, or -1 from `x-envoy-fault-abort-request`; undefined = no abort. */
  readonly abortStatus: number | undefined;
  readonly abortGrpcStatus: number | undefined;
  readonly abortFraction: number;
  readonly upstreamCluster: string;
  readonly headers: readonly HeaderPredicate[];
  readonly downstreamNodes: readonly string[];
  readonly maxActiveFaults: number;
}

/** envoy.extensions.filters.http.fault.v3.HTTPFault, compiled once (filter level and per route). */
export function compileFaultPolicy(m: Msg): FaultPolicy {
  for (const f of ['response_rate_limit', 'filter_metadata']) if (m.has(f)) throw m.error(f, 'is not supported yet');
  const delay = m.msg('delay');
  const abort = m.msg('abort');
  let abortStatus: number | undefined, abortGrpcStatus: number | undefined;
  if (abort) {
    if (abort.has('http_status')) {
      abortStatus = abort.num('http_status');
      if (abortStatus < 200 || abortStatus >= 600) throw abort.error('http_status', 'must be in [200, 600)');
    } else if (abort.has('grpc_status')) abortGrpcStatus = abort.num('grpc_status');
    else if (abort.has('header_abort')) abortStatus = -1;
    else throw abort.error('', 'one of http_status, grpc_status, header_abort is required');
  }
  let delayMs: number | undefined;
  if (delay) {
    if (delay.has('fixed_delay')) delayMs = delay.durationMs('fixed_delay', 0);
    else if (delay.has('header_delay')) delayMs = -1;
    else throw delay.error('', 'one of fixed_delay, header_delay is required');
  }
  return {
    delayMs,
    delayFraction: probability(delay?.msg('percentage'), 1),
    abortStatus,
    abortGrpcStatus,
    abortFraction: probability(abort?.msg('percentage'), 1),
    upstreamCluster: m.str('upstream_cluster'),
    headers: m.list('headers').map(compileHeaderMatcher),
    downstreamNodes: m.strList('downstream_nodes'),
    maxActiveFaults: m.has('max_active_faults') ? m.num('max_active_faults') : Infinity,
  };
}

export interface FaultFilterConfig extends HttpFilterConfig {
  readonly policy: FaultPolicy;
}

export const FAULT_EXTENSION: HttpFilterExtension = {
  typeUrl: FAULT_TYPE,
  legacyName: 'envoy.filters.http.fault',
  compile(name: string, m: Msg | undefined): FaultFilterConfig {
    const policy = compileFaultPolicy(m ?? new Msg({}, name));
    return {
      name,
      policy,
      perRoute: (pm: Msg) => compileFaultPolicy(pm),
      live: (scope) => liveFault(name, policy, scope),
    };
  },
};
