import type { Host } from './host.ts';

export type LbPolicy = 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'RANDOM';

/**
 * An immutable set of hosts with its load-balancing state. Built once per
 * membership change; `pick` is allocation-free.
 */
export class HostSet {
  readonly hosts: readonly Host[];
  private readonly policy: LbPolicy;
  private readonly weighted: boolean;
  private rr = 0;

  constructor(hosts: readonly Host[], policy: LbPolicy) {
    this.hosts = hosts;
    this.policy = policy;
    this.weighted = hosts.some((h) => h.weight !== hosts[0].weight);
    for (const h of hosts) h.currentWeight = 0;
  }

  /** Hosts of the best priority level that has a healthy host; all hosts (panic) when none is healthy. */
  private candidates(): readonly Host[] {
    let best = Infinity;
    for (const h of this.hosts) if (h.healthy && h.priority < best) best = h.priority;
    if (best === Infinity) return this.hosts;
    if (best === 0 && this.allHealthyAtZero()) return this.hosts;
    return this.hosts.filter((h) => h.healthy && h.priority === best);
  }

  private allHealthyAtZero(): boolean {
    for (const h of this.hosts) if (!h.healthy || h.priority !== 0) return false;
    return true;
  }

  pick(exclude?: Host): Host | undefined {
    const hosts = this.candidates();
    const n = hosts.length;
    if (n === 0) return undefined;
    if (n === 1) return hosts[0];
    let host: Host;
    if (this.policy === 'RANDOM') host = hosts[(Math.random() * n) | 0];
    else if (this.policy === 'LEAST_REQUEST') host = leastRequest(hosts);
    else host = this.weighted ? this.smoothWeighted(hosts) : hosts[this.rr++ % n];
    if (host === exclude) host = hosts[(hosts.indexOf(host) + 1) % n];
    return host;
  }

  /** nginx's smooth weighted round robin over the candidates: even spread, exact proportions. */
  private smoothWeighted(hosts: readonly Host[]): Host {
    let total = 0;
    let best = hosts[0];
    for (let i = 0; i < hosts.length; i++) {
      const h = hosts[i];
      h.currentWeight += h.weight;
      total += h.weight;
      if (h.currentWeight > best.currentWeight) best = h;
    }
    best.currentWeight -= total;
    return best;
  }
}

/** Power of two choices on active requests (Envoy's LEAST_REQUEST default choice_count = 2). */
function leastRequest(hosts: readonly Host[]): Host {
  const n = hosts.length;
  const a = hosts[(Math.random() * n) | 0];
  let b = hosts[(Math.random() * n) | 0];
  if (b === a) b = hosts[(hosts.indexOf(a) + 1) % n];
  return b.activeRequests < a.activeRequests ? b : a;
}
