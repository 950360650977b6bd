/**
 * Envoy's drain manager: once draining starts, HTTP connections are asked to go away (HTTP/1
 * `connection: close` after the response in flight, HTTP/2 GOAWAY), all at once (`immediate`) or
 * with a probability that grows linearly over the drain time (`gradual`, Envoy's default), so
 * clients do not all reconnect in the same instant. A failed health check (/healthcheck/fail) and
 * the overload action disable_http_keepalive ask the same of every response.
 */
import { overloadState } from './overload.ts';

export type DrainStrategy = 'gradual' | 'immediate';

/** Process-wide signals every drain manager honours. */
export const drainSignals = {
  /** POST /healthcheck/fail: Envoy then answers drainClose() = true everywhere. */
  healthCheckFailed: false,
};

export class DrainManager {
  private startedAt = -1;
  private durationMs = 0;
  private strategy: DrainStrategy = 'gradual';

  /** Starts draining (later calls keep the first start). */
  start(strategy: DrainStrategy, durationMs: number): void {
    if (this.startedAt >= 0) return;
    this.strategy = strategy;
    this.durationMs = Math.max(0, durationMs);
    this.startedAt = performance.now();
  }

  get draining(): boolean {
    return this.startedAt >= 0;
  }

  /** Whether the connection answering now should close (HTTP/1) or be sent GOAWAY (HTTP/2). */
  drainClose(): boolean {
    if (drainSignals.healthCheckFailed || overloadState.disableKeepalive) return true;
    const started = this.startedAt;
    if (started < 0) return false;
    if (this.strategy === 'immediate' || this.durationMs === 0) return true;
    const elapsed = performance.now() - started;
    return elapsed >= this.durationMs || Math.random() * this.durationMs < elapsed;
  }
}

/** A drain manager that never starts: the default for terminals outside any listener. */
export const NEVER_DRAIN = new DrainManager();
