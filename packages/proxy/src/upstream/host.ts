import { formatHostPort } from '../config/address.ts';

let healthEpoch = 0;

export function currentHealthEpoch(): number {
  return healthEpoch;
}

/** One upstream endpoint. Pools hang off it lazily; counters are plain numbers for the LB. */
export class Host {
  readonly address: string;
  readonly port: number;
  readonly hostname: string;
  readonly weight: number;
  readonly priority: number;
  readonly zone: string;
  readonly hostPort: string;
  private isHealthy: boolean;
  activeRequests = 0;
  /** Per-host counters, as Envoy's /clusters reports them. */
  rqTotal = 0;
  rqSuccess = 0;
  rqError = 0;
  rqTimeout = 0;
  cxTotal = 0;
  cxActive = 0;
  cxConnectFail = 0;
  /** Smooth weighted round robin state (owned by the cluster's current HostSet). */
  currentWeight = 0;
  /** Milliseconds timestamp of the last pick; ORIGINAL_DST cleanup uses it. */
  lastUsed = 0;
  /** Opaque per-protocol connection pools, owned by the cluster. */
  pools: Map<string, { close(): Promise<void> | void }> | undefined;

  constructor(address: string, port: number, opts: { hostname?: string; weight?: number; priority?: number; zone?: string; healthy?: boolean } = {}) {
    this.address = address;
    this.port = port;
    this.hostname = opts.hostname ?? '';
    this.weight = opts.weight ?? 1;
    this.priority = opts.priority ?? 0;
    this.zone = opts.zone ?? '';
    this.isHealthy = opts.healthy ?? true;
    this.hostPort = formatHostPort(address, port);
  }

  get healthy(): boolean { return this.isHealthy; }

  /** Any health change bumps `healthEpoch`, so host sets recompute who is eligible on their next pick. */
  set healthy(v: boolean) {
    if (v === this.isHealthy) return;
    this.isHealthy = v;
    healthEpoch++;
  }

  closePools(): void {
    if (!this.pools) return;
    for (const pool of this.pools.values()) void pool.close();
    this.pools = undefined;
  }
}
