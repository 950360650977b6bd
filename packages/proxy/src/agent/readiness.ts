/**
 * pilot-agent's readiness probe (what 15021's /healthz/ready answers). Ready needs, in order:
 * the first CDS and LDS from istiod applied (cluster_manager.cds / listener_manager.lds
 * update_success, with istiod's own wording when one is missing or rejected), then the server
 * LIVE, which it becomes only once those listeners are warmed (their RDS arrived) and bound.
 * Both are remembered once true, as pilot-agent does: a later istiod outage keeps the pod ready
 * (the proxy serves its last good config). Draining always answers not ready.
 */
import type { StatsStore } from '../stats/store.ts';

export interface ReadinessSource {
  readonly state: string;
  /** The thread that talks to istiod: the xDS counters live in its store. */
  readonly stats: StatsStore;
  /** Whether config comes over xDS (a static bootstrap has nothing to wait for). */
  readonly xds: boolean;
}

export interface Readiness { readonly ready: boolean; readonly reason: string }

function counter(stats: StatsStore, name: string): number {
  return stats.find('counters', name)?.value ?? 0;
}

/** Istio's UpdateStatusStats wording. */
function updateStatus(stats: StatsStore): { cds: number; lds: number; text: string; rejected: boolean } {
  const cds = counter(stats, 'cluster_manager.cds.update_success'), cdsRejected = counter(stats, 'cluster_manager.cds.update_rejected');
  const lds = counter(stats, 'listener_manager.lds.update_success'), ldsRejected = counter(stats, 'listener_manager.lds.update_rejected');
  return {
    cds, lds, rejected: cdsRejected > 0 || ldsRejected > 0,
    text: `cds updates: ${cds} successful, ${cdsRejected} rejected; lds updates: ${lds} successful, ${ldsRejected} rejected`,
  };
}

export class ReadinessProbe {
  private receivedFirstUpdate = false;
  private atLeastOnceLive = false;

  check(server: ReadinessSource | undefined, draining: boolean): Readiness {
    if (!server) return { ready: false, reason: 'proxy not started' };
    if (draining || server.state === 'DRAINING') return { ready: false, reason: 'server is not live, current state is: DRAINING' };
    if (server.xds && !this.receivedFirstUpdate) {
      const s = updateStatus(server.stats);
      if (s.cds === 0 || s.lds === 0) {
        if (s.cds === 0 && s.lds === 0) return { ready: false, reason: `config not received from XDS server (is Istiod running?): ${s.text}` };
        if (s.rejected) return { ready: false, reason: `config received from XDS server, but was rejected: ${s.text}` };
        return { ready: false, reason: `config not fully received from XDS server: ${s.text}` };
      }
      this.receivedFirstUpdate = true;
    }
    if (!this.atLeastOnceLive) {
      if (server.state !== 'LIVE') return { ready: false, reason: `server is not live, current state is: ${server.state}` };
      this.atLeastOnceLive = true;
    }
    return { ready: true, reason: '' };
  }
}
