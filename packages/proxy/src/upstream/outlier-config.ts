/**
 * Cluster.outlier_detection compiled, with Envoy's proto defaults; what the fields mean in outlier.ts.
 */
import type { Msg } from '../config/fields.ts';

/** One compiled OutlierDetection (defaults as in Envoy's proto). */
export interface OutlierConfig {
  readonly consecutive5xx: number;
  readonly consecutiveGatewayFailure: number;
  readonly consecutiveLocalOriginFailure: number;
  readonly enforcingConsecutive5xx: number;
  readonly enforcingConsecutiveGatewayFailure: number;
  readonly enforcingConsecutiveLocalOriginFailure: number;
  readonly enforcingSuccessRate: number;
  readonly enforcingLocalOriginSuccessRate: number;
  readonly successRateMinimumHosts: number;
  readonly successRateRequestVolume: number;
  /** success_rate_stdev_factor / 1000. */
  readonly successRateStdevFactor: number;
  readonly failurePercentageThreshold: number;
  readonly enforcingFailurePercentage: number;
  readonly enforcingFailurePercentageLocalOrigin: number;
  readonly failurePercentageMinimumHosts: number;
  readonly failurePercentageRequestVolume: number;
  readonly splitExternalLocalOriginErrors: boolean;
  readonly intervalMs: number;
  readonly baseEjectionTimeMs: number;
  readonly maxEjectionTimeMs: number;
  readonly maxEjectionTimeJitterMs: number;
  readonly maxEjectionPercent: number;
  readonly alwaysEjectOneHost: boolean;
}

const FIELDS = ['consecutive_5xx', 'interval', 'base_ejection_time', 'max_ejection_percent', 'enforcing_consecutive_5xx',
  'enforcing_success_rate', 'success_rate_minimum_hosts', 'success_rate_request_volume', 'success_rate_stdev_factor',
  'consecutive_gateway_failure', 'enforcing_consecutive_gateway_failure', 'split_external_local_origin_errors',
  'consecutive_local_origin_failure', 'enforcing_consecutive_local_origin_failure', 'enforcing_local_origin_success_rate',
  'failure_percentage_threshold', 'enforcing_failure_percentage', 'enforcing_failure_percentage_local_origin',
  'failure_percentage_minimum_hosts', 'failure_percentage_request_volume', 'max_ejection_time', 'max_ejection_time_jitter',
  'successful_active_health_check_uneject_host', 'always_eject_one_host'];

export function compileOutlierDetection(m: Msg): OutlierConfig {
  if (m.has('monitors')) throw m.error('monitors', 'outlier detection monitor extensions are not supported');
  if (m.has('detect_degraded_hosts')) throw m.error('detect_degraded_hosts', 'is not supported yet');
  m.onlyFields(FIELDS);
  const pct = (key: string, fallback: number): number => {
    const v = m.num(key, fallback);
    if (v < 0 || v > 100) throw m.error(key, 'must be a percentage between 0 and 100');
    return v;
  };
  const positiveMs = (key: string, fallback: number): number => {
    const v = m.durationMs(key, fallback);
    if (!(v > 0)) throw m.error(key, 'must be greater than 0s');
    return v;
  };
  const intervalMs = positiveMs('interval', 10_000);
  const baseEjectionTimeMs = positiveMs('base_ejection_time', 30_000);
  // Unset: 300 s or base_ejection_time, whichever is larger.
  const maxEjectionTimeMs = positiveMs('max_ejection_time', Math.max(300_000, baseEjectionTimeMs));
  if (maxEjectionTimeMs < baseEjectionTimeMs) throw m.error('max_ejection_time', "outlier detector's max_ejection_time cannot be smaller than base_ejection_time");
  return {
    consecutive5xx: m.num('consecutive_5xx', 5),
    consecutiveGatewayFailure: m.num('consecutive_gateway_failure', 5),
    consecutiveLocalOriginFailure: m.num('consecutive_local_origin_failure', 5),
    enforcingConsecutive5xx: pct('enforcing_consecutive_5xx', 100),
    enforcingConsecutiveGatewayFailure: pct('enforcing_consecutive_gateway_failure', 0),
    enforcingConsecutiveLocalOriginFailure: pct('enforcing_consecutive_local_origin_failure', 100),
    enforcingSuccessRate: pct('enforcing_success_rate', 100),
    enforcingLocalOriginSuccessRate: pct('enforcing_local_origin_success_rate', 100),
    successRateMinimumHosts: m.num('success_rate_minimum_hosts', 5),
    successRateRequestVolume: m.num('success_rate_request_volume', 100),
    successRateStdevFactor: m.num('success_rate_stdev_factor', 1900) / 1000,
    failurePercentageThreshold: pct('failure_percentage_threshold', 85),
    enforcingFailurePercentage: pct('enforcing_failure_percentage', 0),
    enforcingFailurePercentageLocalOrigin: pct('enforcing_failure_percentage_local_origin', 0),
    failurePercentageMinimumHosts: m.num('failure_percentage_minimum_hosts', 5),
    failurePercentageRequestVolume: m.num('failure_percentage_request_volume', 50),
    splitExternalLocalOriginErrors: m.bool('split_external_local_origin_errors'),
    intervalMs,
    baseEjectionTimeMs,
    maxEjectionTimeMs,
    maxEjectionTimeJitterMs: m.durationMs('max_ejection_time_jitter', 0),
    maxEjectionPercent: pct('max_ejection_percent', 10),
    alwaysEjectOneHost: m.bool('always_eject_one_host'),
  };
}
