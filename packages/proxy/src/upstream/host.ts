import { formatHostPort } from '../config/address.ts';
import type { HostOutlier } from './outlier.ts';
import type { UpstreamTls } from '../tls/context.ts';
import type { InternalEndpoint } from './cluster-config.ts';

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
  readonly region: string;
  readonly subZone: string;
  /** LocalityLbEndpoints.load_balancing_weight of the host's locality (0 when unset, as Envoy reads it). */
  readonly localityWeight: number;
  /** EDS health_status DEGRADED: used only when healthy hosts run short. */
  readonly degraded: boolean;
  readonly hostPort: string;
  /** The transport socket chosen for this endpoint (transport_socket_matches, else the cluster's); undefined = plaintext. */
  readonly tls: UpstreamTls | undefined;
  /** An envoy_internal_address endpoint (address is then `envoy://listener/endpoint_id`, port 0). */
  readonly internal: InternalEndpoint | undefined;
  /** A pipe endpoint: the unix domain socket path to connect to (hostPort is the configured name). */
  readonly pipe: string | undefined;
  /** The endpoint's filter_metadata (internal_upstream passthrough_metadata reads it). */
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
  private isHealthy: boolean;
  private isEjected = false;
  /** Outlier detection state (only in clusters that configure it). */
  outlier: HostOutlier | undefined;
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

  constructor(address: string, port: number, opts: { hostname?: string; weight?: number; priority?: number; zone?: string; region?: string; subZone?: string;
    localityWeight?: number; degraded?: boolean; healthy?: boolean; tls?: UpstreamTls; internal?: InternalEndpoint; pipe?: string; metadata?: Readonly<Record<string, unknown>> } = {}) {
    this.address = address;
    this.port = port;
    this.hostname = opts.hostname ?? '';
    this.weight = opts.weight ?? 1;
    this.priority = opts.priority ?? 0;
    this.zone = opts.zone ?? '';
    this.region = opts.region ?? '';
    this.subZone = opts.subZone ?? '';
    this.localityWeight = opts.localityWeight ?? 0;
    this.degraded = opts.degraded ?? false;
    this.isHealthy = opts.healthy ?? true;
    this.internal = opts.internal;
    this.pipe = opts.pipe;
    this.metadata = opts.metadata;
    this.hostPort = opts.internal || opts.pipe !== undefined ? address : formatHostPort(address, port);
    this.tls = opts.tls;
  }

  /**
   * Whether load balancing may use the host: EDS-healthy and not ejected by outlier
   * detection (Envoy's coarse health). Assigning sets the EDS health.
   */
  get healthy(): boolean { return this.isHealthy && !this.isEjected; }

  /** Any health change bumps `healthEpoch`, so host sets recompute who is eligible on their next pick. */
  set healthy(v: boolean) { this.edsHealthy = v; }

  /** The health EDS (or the static config) gave the host. */
  get edsHealthy(): boolean { return this.isHealthy; }

  set edsHealthy(v: boolean) {
    if (v === this.isHealthy) return;
    this.isHealthy = v;
    healthEpoch++;
  }

  /** Ejected by outlier detection (health flag FAILED_OUTLIER_CHECK). */
  get ejected(): boolean { return this.isEjected; }

  set ejected(v: boolean) {
    if (v === this.isEjected) return;
    this.isEjected = v;
    healthEpoch++;
  }

  closePools(): void {
    if (!this.pools) return;
    for (const pool of this.pools.values()) void pool.close();
    this.pools = undefined;
  }
}
