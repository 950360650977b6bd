/**
 * Circuit-breaker limits that thousands of istiod's clusters repeat, kept once: config objects are
 * read, never changed, so clusters can share them (lists, strings and JSON-able values:
 * core/shared-values.ts).
 */
import type { CircuitBreakerLimits } from './cluster-config.ts';

/**
 * One frozen object per distinct set of limits: istiod gives every cluster the same two, which were
 * 256 B of each of 5,000 clusters. Bounded: a proxy sees a handful of distinct ones (a short list, compared field by field).
 */
const limitsSeen: CircuitBreakerLimits[] = [];
export function sameLimits(l: CircuitBreakerLimits): CircuitBreakerLimits {
  for (const s of limitsSeen) {
    if (s.maxConnections === l.maxConnections && s.maxPendingRequests === l.maxPendingRequests && s.maxRequests === l.maxRequests
      && s.maxRetries === l.maxRetries && s.trackRemaining === l.trackRemaining) return s;
  }
  const same = Object.freeze(l);
  if (limitsSeen.length < 64) limitsSeen.push(same);
  return same;
}
