/**
 * Open connections, per local workload: for the admin's connections dump and for live policy.
 * Inbound connections keep the facts they were authorized with; when policies (or workloads)
 * change, each is decided again and closed if now denied ("connection closed due to policy
 * change"); a removed workload's connections are closed.
 */
import { decideIstio, type AuthzFacts } from './core.ts';
import type { ProxyState } from './state/store.ts';
import type { Workload } from './state/model.ts';

export interface TrackedConnection {
  readonly direction: 'inbound' | 'outbound';
  /** The proxy it belongs to: the pod's uid from the CNI (the dump's key) in in-pod mode. */
  readonly proxyUid: string;
  /** The local workload's WDS uid (its policies decide inbound; its removal closes the connection). */
  readonly localUid: string;
  readonly src: string;
  /** outbound: what the app dialled; inbound: the service host the caller named (Forwarded host=), else null. */
  readonly originalDst: string | null;
  readonly actualDst: string;
  readonly protocol: 'HBONE' | 'TCP';
  /** Inbound only: what the authorization was decided on, and the destination workload's uid. */
  readonly facts?: AuthzFacts;
  /** Closes the connection (both sides) with this reason in its access log. */
  close(reason: string): void;
}

export class ConnectionManager {
  private readonly open = new Set<TrackedConnection>();
  /** Closed by us but not yet recorded (its access log line not written): a drain waits for these. */
  private readonly closing = new Set<TrackedConnection>();
  private readonly state: ProxyState;
  /** Connections closed by a policy re-check (for tests and stats). */
  closedByPolicy = 0;

  constructor(state: ProxyState) {
    this.state = state;
    state.subscribe({
      policiesChanged: () => this.recheck(),
      workloadRemoved: (w) => this.closeMatching((c) => c.localUid === w.uid, 'connection closed due to workload removal'),
    });
  }

  track(c: TrackedConnection): () => void {
    this.open.add(c);
    return () => { this.open.delete(c); this.closing.delete(c); };
  }

  /** Connections of one proxy still open or closing (not yet recorded). */
  unsettled(proxyUid: string): number {
    let n = 0;
    for (const c of this.open) if (c.proxyUid === proxyUid) n++;
    for (const c of this.closing) if (c.proxyUid === proxyUid) n++;
    return n;
  }

  get size(): number {
    return this.open.size;
  }

  /** Decides every inbound connection again against the current policies. */
  recheck(): void {
    for (const c of [...this.open]) {
      if (c.direction !== 'inbound' || !c.facts) continue;
      const w = this.state.workloadsByUid.get(c.localUid);
      if (!w) continue;
      const d = decideIstio(this.state.policiesFor(w), c.facts);
      if (!d.allowed) {
        this.open.delete(c);
        this.closing.add(c);
        this.closedByPolicy++;
        c.close('connection closed due to policy change');
      }
    }
  }

  /** Closes every connection of one proxy (a pod drained). */
  closeProxy(proxyUid: string, reason: string): number {
    return this.closeMatching((c) => c.proxyUid === proxyUid, reason);
  }

  private closeMatching(match: (c: TrackedConnection) => boolean, reason: string): number {
    let n = 0;
    for (const c of [...this.open]) {
      if (!match(c)) continue;
      this.open.delete(c);
      this.closing.add(c);
      c.close(reason);
      n++;
    }
    return n;
  }

  /** ztunnel's connections dump for one workload. */
  connectionsOf(proxyUid: string): { inbound: ConnectionDumpEntry[]; outbound: ConnectionDumpEntry[] } {
    const inbound: ConnectionDumpEntry[] = [], outbound: ConnectionDumpEntry[] = [];
    for (const c of this.open) {
      if (c.proxyUid !== proxyUid) continue;
      (c.direction === 'inbound' ? inbound : outbound).push({ src: c.src, originalDst: c.originalDst, actualDst: c.actualDst, protocol: c.protocol });
    }
    return { inbound, outbound };
  }
}

export interface ConnectionDumpEntry {
  readonly src: string;
  readonly originalDst: string | null;
  readonly actualDst: string;
  readonly protocol: 'HBONE' | 'TCP';
}

/** The workload info block of ztunnel's dumps. */
export function workloadInfo(w: Pick<Workload, 'name' | 'namespace' | 'trustDomain' | 'serviceAccount'>): Record<string, string> {
  return { name: w.name, namespace: w.namespace, trustDomain: w.trustDomain, serviceAccount: w.serviceAccount };
}
