import type { ClusterManager } from '../../../upstream/manager.ts';
import { fetchViaCluster } from '../../../upstream/http-fetch.ts';
import type { Counter } from '../../../stats/store.ts';
import { logger } from '../../../core/log.ts';
import type { RemoteJwks } from './config.ts';
import { parseJwks, type Jwks } from './jwks.ts';

const log = logger('jwt');

/**
 * One provider's remote JWKS: fetched through its cluster on first use (or at start with
 * async_fetch), kept for cache_duration; requests that arrive during a fetch wait for that
 * same fetch.
 */
export class RemoteJwksCache {
  private readonly r: RemoteJwks;
  private readonly clusters: ClusterManager | undefined;
  private readonly ok: Counter;
  private readonly failed: Counter;
  private jwks: Jwks | undefined;
  private expiresAt = 0;
  private inflight: Promise<Jwks | undefined> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(r: RemoteJwks, clusters: ClusterManager | undefined, ok: Counter, failed: Counter) {
    this.r = r;
    this.clusters = clusters;
    this.ok = ok;
    this.failed = failed;
    if (r.asyncFetch) setImmediate(() => { void this.refresh(); });
  }

  /** The keys now when cached, else the pending fetch (undefined when it failed). */
  get(): Jwks | Promise<Jwks | undefined> {
    if (this.jwks && (this.r.asyncFetch || performance.now() < this.expiresAt)) return this.jwks;
    return this.inflight ?? this.refresh();
  }

  private refresh(): Promise<Jwks | undefined> {
    const p = this.fetch().then((jwks) => {
      this.inflight = undefined;
      if (jwks) {
        this.jwks = jwks;
        this.expiresAt = performance.now() + this.r.cacheMs;
      }
      // async_fetch keeps the keys fresh in the background (and retries a failure sooner).
      if (this.r.asyncFetch) this.schedule(jwks ? this.r.cacheMs : this.r.failedRefetchMs);
      return jwks;
    });
    this.inflight = p;
    return p;
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => { void this.refresh(); }, ms);
    this.timer.unref();
  }

  private async fetch(): Promise<Jwks | undefined> {
    try {
      const res = await fetchViaCluster(this.clusters, this.r.cluster, this.r.uri, this.r.timeoutMs);
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      const jwks = parseJwks(res.body);
      this.ok.inc();
      return jwks;
    } catch (err) {
      this.failed.inc();
      log.warn(`jwt_authn: fetching JWKS ${this.r.uri} through ${this.r.cluster} failed: ${(err as Error).message}`);
      return undefined;
    }
  }
}
