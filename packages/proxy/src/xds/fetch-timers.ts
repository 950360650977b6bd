/**
 * Envoy's initial_fetch_timeout, one timer per subscription: CDS from the start of ADS, LDS from
 * when it is asked for (after CDS init), each RDS / EDS name from when a listener / cluster first
 * waits for it. On expiry the waiter stops waiting: init goes on, a listener serves 404 NR, a
 * cluster has no endpoints. 0 waits forever (Istio's setting).
 */
import { log } from '../core/log.ts';

export class InitialFetchTimers {
  private readonly running = new Map<string, NodeJS.Timeout>();
  private readonly expired = new Set<string>();
  /** Off on --concurrency workers: the main thread times subscriptions and forwards expiries. */
  enabled = true;
  /** Called when a timer runs out (set by the config layer). */
  onExpire: ((key: string) => void) | undefined;

  /** Starts `key`'s timer unless it runs already, ran out, or `ms` is 0. */
  start(key: string, ms: number): void {
    if (!this.enabled || ms <= 0 || this.running.has(key) || this.expired.has(key)) return;
    const t = setTimeout(() => {
      this.running.delete(key);
      log.warn(`xDS: initial fetch of ${key} timed out after ${ms} ms; going on without it`);
      this.onExpire?.(key);
    }, ms);
    t.unref();
    this.running.set(key, t);
  }

  /** The subscription got its response. */
  done(key: string): void {
    clearTimeout(this.running.get(key));
    this.running.delete(key);
  }

  /** Marks `key` as timed out (its timer ran out here, or on the main thread). */
  expire(key: string): void {
    this.done(key);
    this.expired.add(key);
  }

  hasExpired(key: string): boolean {
    return this.expired.has(key);
  }

  stop(): void {
    for (const t of this.running.values()) clearTimeout(t);
    this.running.clear();
  }
}
