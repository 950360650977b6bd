/**
 * The core's byte relay (backpressure, half-close, abrupt closes torn down both ways) as a
 * promise of the connection's byte counts, for the one record each connection ends with.
 */
import type { Duplex } from 'node:stream';
import { relay as coreRelay } from '../core.ts';

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
