/**
 * Parts of cluster configs that thousands of istiod's clusters repeat, kept once: config objects
 * are read, never changed, so clusters can share them.
 */
import type { CircuitBreakerLimits } from './cluster-config.ts';

/** The empty lists most clusters have (EDS: no inline endpoints; no transport_socket_matches). */
export const NONE: readonly never[] = Object.freeze([]);

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

/**
 * One string per region / zone / sub-zone name: every assignment decodes its own copies, and each
 * host keeps them (a mesh has a handful of localities and thousands of hosts). Bounded.
 */
const localityNames = new Map<string, string>();
export function sameLocalityName(name: string): string {
  if (name === '') return name;
  const same = localityNames.get(name);
  if (same !== undefined) return same;
  if (localityNames.size < 4096) localityNames.set(name, name);
  return name;
}
