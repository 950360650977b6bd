import type { Msg } from '../config/fields.ts';
import { compileHeaderMatcher, type HeaderPredicate } from './route-match.ts';

/** retry_on conditions as bits (x-envoy-retry-on and x-envoy-retry-grpc-on use the same names). */
export const RetryOn = {
  '5xx': 1 << 0,
  'gateway-error': 1 << 1,
  'reset': 1 << 2,
  'reset-before-request': 1 << 3,
  'connect-failure': 1 << 4,
  'retriable-4xx': 1 << 5,
  'refused-stream': 1 << 6,
  'retriable-status-codes': 1 << 7,
  'retriable-headers': 1 << 8,
  'envoy-ratelimited': 1 << 9,
  'http3-post-connect-failure': 1 << 10,
  'cancelled': 1 << 11,
  'deadline-exceeded': 1 << 12,
  'internal': 1 << 13,
  'resource-exhausted': 1 << 14,
  'unavailable': 1 << 15,
} as const;

/** gRPC status codes each gRPC retry_on condition covers. */
export const GRPC_RETRY: ReadonlyArray<readonly [number, number]> = [
  [RetryOn.cancelled, 1], [RetryOn['deadline-exceeded'], 4], [RetryOn['resource-exhausted'], 8],
  [RetryOn.internal, 13], [RetryOn.unavailable, 14],
];

const PREVIOUS_HOSTS = 'envoy.retry_host_predicates.previous_hosts';
const PREVIOUS_HOSTS_TYPE = 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate';

export interface RetryPolicy {
  readonly on: number;
  readonly numRetries: number;
  readonly perTryTimeoutMs: number;
  readonly retriableStatusCodes: readonly number[];
  readonly retriableHeaders: readonly HeaderPredicate[];
  readonly retriableRequestHeaders: readonly HeaderPredicate[];
  readonly previousHosts: boolean;
  readonly hostSelectionMaxAttempts: number;
  readonly baseIntervalMs: number;
  readonly maxIntervalMs: number;
}

/** Parses a retry_on list; unknown names are an error at load, ignored when they come in a header (Envoy). */
export function parseRetryOn(list: string, onUnknown?: (name: string) => void): number {
  let bits = 0;
  for (const raw of list.split(',')) {
    const name = raw.trim();
    if (!name) continue;
    const bit = (RetryOn as Record<string, number>)[name];
    if (bit === undefined) onUnknown?.(name);
    else bits |= bit;
  }
  return bits;
}

/** envoy.config.route.v3.RetryPolicy, compiled once. */
export function compileRetryPolicy(m: Msg): RetryPolicy {
  for (const f of ['retry_priority', 'rate_limited_retry_back_off', 'retry_options_predicates', 'per_try_idle_timeout']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const on = parseRetryOn(m.str('retry_on'), (name) => { throw m.error('retry_on', `unknown retry condition '${name}'`); });
  let previousHosts = false;
  for (const p of m.list('retry_host_predicate')) {
    const url = p.msg('typed_config')?.str('@type');
    if (p.str('name') === PREVIOUS_HOSTS || url === PREVIOUS_HOSTS_TYPE) previousHosts = true;
    else throw p.error('', `unsupported retry host predicate ${url || p.str('name')}`);
  }
  const backOff = m.msg('retry_back_off');
  const base = backOff?.durationMs('base_interval', 25) ?? 25;
  if (base <= 0) throw m.error('retry_back_off.base_interval', 'must be greater than zero');
  const max = backOff?.durationMs('max_interval', base * 10) ?? base * 10;
  if (max < base) throw m.error('retry_back_off.max_interval', 'must be at least base_interval');
  return {
    on,
    numRetries: m.num('num_retries', 1),
    perTryTimeoutMs: m.durationMs('per_try_timeout', 0),
    retriableStatusCodes: m.rawList('retriable_status_codes').map(Number),
    retriableHeaders: m.list('retriable_headers').map(compileHeaderMatcher),
    retriableRequestHeaders: m.list('retriable_request_headers').map(compileHeaderMatcher),
    previousHosts,
    hostSelectionMaxAttempts: m.num('host_selection_retry_max_attempts', 1),
    baseIntervalMs: base,
    maxIntervalMs: max,
  };
}

/**
 * One compiled RetryPolicy per distinct retry_policy within a route table: istiod gives every route
 * the same one (5,000 routes held 5,000 copies, ~220 B each). Policies are never changed once compiled.
 */
export class RetryPolicies {
  private readonly byJson = new Map<string, RetryPolicy>();

  get(m: Msg): RetryPolicy {
    const key = JSON.stringify(m.raw);
    let p = this.byJson.get(key);
    if (!p) { p = compileRetryPolicy(m); this.byJson.set(key, p); }
    return p;
  }
}

/** Envoy's fully jittered exponential back-off: uniform in [0, min(base·2^(n-1), max)). */
export function backoffMs(p: RetryPolicy, retryNumber: number): number {
  const ceiling = Math.min(p.baseIntervalMs * 2 ** Math.max(0, retryNumber - 1), p.maxIntervalMs);
  return Math.random() * ceiling;
}

/** Does an upstream response (status + headers) call for a retry under `on`? */
export function retriableResponse(p: RetryPolicy, on: number, status: number, grpcStatus: number, headers: Record<string, string | string[] | undefined>): boolean {
  if ((on & RetryOn['5xx']) && status >= 500) return true;
  if ((on & RetryOn['gateway-error']) && (status === 502 || status === 503 || status === 504)) return true;
  if ((on & RetryOn['retriable-4xx']) && status === 409) return true;
  if ((on & RetryOn['retriable-status-codes']) && p.retriableStatusCodes.includes(status)) return true;
  if ((on & RetryOn['envoy-ratelimited']) && headers['x-envoy-ratelimited'] !== undefined) return true;
  if (grpcStatus >= 0) for (const [bit, code] of GRPC_RETRY) if ((on & bit) && grpcStatus === code) return true;
  if ((on & RetryOn['retriable-headers']) && p.retriableHeaders.length) {
    const view = { method: '', path: '', authority: '', scheme: '', headers };
    for (const h of p.retriableHeaders) if (h(view)) return true;
  }
  return false;
}
