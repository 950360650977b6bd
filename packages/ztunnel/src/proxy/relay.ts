/**
 * The core's byte relay (backpressure, half-close, abrupt closes torn down both ways) as a
 * promise of the connection's byte counts, for the one record each connection ends with.
 */
import type { Duplex } from 'node:stream';
import { relay as coreRelay } from '../core.ts';
import type { ConnectionResult } from '../telemetry/connection-result.ts';

export interface RelayResult {
  /** Bytes from the downstream (the side that connected to us) to the upstream. */
  readonly up: number;
  readonly down: number;
  readonly error: string | undefined;
}

export function relay(downstream: Duplex, upstream: Duplex): Promise<RelayResult> {
  return new Promise((resolve) => {
    coreRelay(downstream, upstream, (up, down, err) => resolve({ up, down, error: err?.message }));
  });
}

/**
 * Relays, then records the connection once: its byte counts and why it ended — the reason it was
 * closed for (`closeReason()`, a policy change counting as DENY) or the relay's own error.
 */
export async function relayAndRecord(result: ConnectionResult, downstream: Duplex, upstream: Duplex, closeReason: () => string | undefined): Promise<void> {
  const r = await relay(downstream, upstream);
  result.bytesIn = r.up;
  result.bytesOut = r.down;
  const reason = closeReason();
  result.record(reason ?? r.error, reason?.includes('policy') ? 'DENY' : undefined);
}
