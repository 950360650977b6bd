import type { FaultPolicy } from './config.ts';
import type { FilterCallbacks, FilterStatus, LiveHttpFilter } from '../types.ts';
import type { Counter, Gauge, StatsStore } from '../../../stats/store.ts';

const ABORT_BODY = 'fault filter abort';

class FaultStats {
  readonly delays: Counter;
  readonly aborts: Counter;
  readonly active: Gauge;
  readonly overflow: Counter;
  /** Faults in progress, for max_active_faults: kept here too, as the gauge may be a null stat (stats_matcher). */
  activeCount = 0;
  constructor(store: StatsStore, statPrefix: string) {
    const p = store.scope('http', 'envoy_http_conn_manager_prefix', statPrefix);
    this.delays = p.counter('fault.delays_injected');
    this.aborts = p.counter('fault.aborts_injected');
    this.active = p.gauge('fault.active_faults');
    this.overflow = p.counter('fault.faults_overflow');
  }
}

/** A percentage header may lower the configured probability, never raise it (Envoy). */
function headerFraction(cb: FilterCallbacks, header: string, configured: number): number {
  const v = cb.ex.headers[header];
  if (typeof v !== 'string' || !/^\d+$/.test(v)) return configured;
  return Math.min(configured, Number(v) / 100);
}

function headerNumber(cb: FilterCallbacks, header: string): number | undefined {
  const v = cb.ex.headers[header];
  return typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined;
}

function applies(p: FaultPolicy, cb: FilterCallbacks): boolean {
  if (p.upstreamCluster) {
    const a = cb.route?.action;
    if (!a || a.kind !== 'forward' || a.cluster !== p.upstreamCluster) return false;
  }
  for (const h of p.headers) if (!h(cb.ex)) return false;
  if (p.downstreamNodes.length) {
    const node = cb.ex.headers['x-envoy-downstream-service-node'];
    if (typeof node !== 'string' || !p.downstreamNodes.includes(node)) return false;
  }
  return true;
}

/** The HTTP fault filter: delays and aborts by percentage, header-controlled when configured so. */
export function liveFault(name: string, base: FaultPolicy, scope: { store: StatsStore; statPrefix: string }): LiveHttpFilter {
  const stats = new FaultStats(scope.store, scope.statPrefix);

  const abortNow = (p: FaultPolicy, cb: FilterCallbacks): boolean => {
    if (p.abortStatus === undefined && p.abortGrpcStatus === undefined) return false;
    let status = p.abortStatus;
    let fraction = p.abortFraction;
    if (status === -1) {
      status = headerNumber(cb, 'x-envoy-fault-abort-request');
      const grpc = headerNumber(cb, 'x-envoy-fault-abort-grpc-request');
      if (status === undefined && grpc === undefined) return false;
      fraction = headerFraction(cb, 'x-envoy-fault-abort-request-percentage', fraction);
      if (Math.random() >= fraction) return false;
      stats.aborts.inc();
      if (grpc !== undefined && status === undefined) { grpcAbort(cb, grpc); return true; }
      if (status === undefined || status < 200 || status >= 600) return false;
    } else if (Math.random() >= fraction) return false;
    else stats.aborts.inc();
    if (p.abortGrpcStatus !== undefined && p.abortStatus === undefined) { grpcAbort(cb, p.abortGrpcStatus); return true; }
    cb.sendLocalReply(status as number, ABORT_BODY, 'FI', 'fault_filter_abort');
    return true;
  };

  const grpcAbort = (cb: FilterCallbacks, code: number): void => {
    cb.sendLocalReply(200, undefined, 'FI', 'fault_filter_abort', { 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': ABORT_BODY });
  };

  return {
    decodeHeaders(cb: FilterCallbacks): FilterStatus {
      const p = cb.perRoute<FaultPolicy>(name) ?? base;
      if (p.delayMs === undefined && p.abortStatus === undefined && p.abortGrpcStatus === undefined) return 'continue';
      if (!applies(p, cb)) return 'continue';
      if (stats.activeCount >= p.maxActiveFaults) { stats.overflow.inc(); return 'continue'; }
      let delay = p.delayMs;
      let fraction = p.delayFraction;
      if (delay === -1) {
        delay = headerNumber(cb, 'x-envoy-fault-delay-request');
        fraction = headerFraction(cb, 'x-envoy-fault-delay-request-percentage', fraction);
      }
      if (delay !== undefined && delay > 0 && Math.random() < fraction) {
        stats.delays.inc();
        stats.active.inc();
        stats.activeCount++;
        cb.rec.flags = 'DI';
        // After the delay the abort decision is made, as in Envoy.
        const done = (): void => { stats.active.dec(); stats.activeCount--; };
        cb.continueAfter(delay, () => { done(); return !abortNow(p, cb); }, done);
        return 'stop';
      }
      return abortNow(p, cb) ? 'stop' : 'continue';
    },
  };
}
