import { currentHealthEpoch, type Host } from './host.ts';

export type LbPolicy = 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'RANDOM';

/**
 * An immutable set of hosts with its load-balancing state. Built once per
 * membership change; `pick` is allocation-free.
 */
export class HostSet {
  readonly hosts: readonly Host[];
  /** The hosts picks come from, worked out again only after a health change. */
  private eligible: readonly Host[];
  private epoch: number;
  private readonly panicThreshold: number;
  private readonly policy: LbPolicy;
  private readonly weighted: boolean;
  private rr = 0;

  /** `panicThreshold`: healthy_panic_threshold in percent (Envoy's default 50; 0 disables panic routing). */
  constructor(hosts: readonly Host[], policy: LbPolicy, panicThreshold = 50) {
    this.hosts = hosts;
    this.policy = policy;
    this.weighted = hosts.some((h) => h.weight !== hosts[0].weight);
    for (const h of hosts) h.currentWeight = 0;
    this.panicThreshold = panicThreshold;
    this.epoch = currentHealthEpoch();
    this.eligible = eligibleHosts(hosts, panicThreshold);
  }

  pick(exclude?: Host): Host | undefined {
    if (this.epoch !== currentHealthEpoch()) {
      this.epoch = currentHealthEpoch();
      this.eligible = eligibleHosts(this.hosts, this.panicThreshold);
    }
    const hosts = this.eligible;
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

/**
 * The best priority level that has a healthy host; within it the healthy hosts,
 * or all of its hosts when the healthy share is below the panic threshold
 * (Envoy's panic mode). No healthy host anywhere: every host, unless panic is off.
 */
function eligibleHosts(hosts: readonly Host[], panicThreshold: number): readonly Host[] {
  let best = Infinity;
  for (const h of hosts) if (h.healthy && h.priority < best) best = h.priority;
  if (best === Infinity) return panicThreshold > 0 ? hosts : [];
  const level = hosts.filter((h) => h.priority === best);
  const healthy = level.filter((h) => h.healthy);
  if ((healthy.length / level.length) * 100 < panicThreshold) return level;
  return healthy.length === hosts.length ? hosts : healthy;
}
