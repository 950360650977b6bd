import { currentHealthEpoch, type Host } from './host.ts';
import { DEFAULT_LOCALITY_LB, PriorityPlan, type LocalityLbOptions } from './locality.ts';
import { HashLoadBalancer, type HashLbConfig } from './lb-hash.ts';

export type LbPolicy = 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'RANDOM';

/**
 * An immutable set of hosts with its load-balancing state. Built once per
 * membership change; `pick` is allocation-free. The priority plan (or hash ring) is made on the
 * first pick, as after a health change: of 20,000 EDS clusters pushed at once most see no request
 * for a while, and their plans were ~20 objects each (~6 KB allocated per cluster) made while the
 * event loop also served traffic.
 */
export class HostSet {
  readonly hosts: readonly Host[];
  private readonly options: LocalityLbOptions;
  private readonly hashConfig: HashLbConfig | undefined;
  /** Priority load, panic and locality choice (Envoy's), made on the first pick and rebuilt after a health change. */
  private plan!: PriorityPlan<Host>;
  private hash: HashLoadBalancer<Host> | undefined;
  /** One priority, every host healthy, no locality weighting: picks skip the plan. */
  private simple = false;
  /** The health epoch the plan was made in; -1: not made yet. */
  private epoch = -1;
  private readonly policy: LbPolicy;
  private readonly weighted: boolean;
  private rr = 0;

  constructor(hosts: readonly Host[], policy: LbPolicy, options: LocalityLbOptions = DEFAULT_LOCALITY_LB, hashConfig?: HashLbConfig) {
    this.hosts = hosts;
    this.policy = policy;
    this.options = options;
    this.hashConfig = hashConfig;
    this.weighted = hosts.some((h) => h.weight !== hosts[0].weight);
    for (const h of hosts) h.currentWeight = 0;
  }

  private refresh(): void {
    this.epoch = currentHealthEpoch();
    if (this.hashConfig) { this.hash = new HashLoadBalancer(this.hosts, this.hashConfig, this.options); return; }
    this.plan = new PriorityPlan(this.hosts, this.options);
    this.simple = this.plan.levels.length === 1 && !this.options.localityWeighted && this.plan.levels[0].healthy.length === this.hosts.length;
  }

  /** `hash`: for RING_HASH / MAGLEV (undefined picks at random); `attempt`: a retry's host-selection attempt. */
  pick(exclude?: Host, hash?: bigint, attempt = 0): Host | undefined {
    if (this.epoch !== currentHealthEpoch()) this.refresh();
    if (this.hash) return this.hash.pick(hash, attempt);
    const hosts = this.simple ? this.hosts : this.plan.hostsForRandom();
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
