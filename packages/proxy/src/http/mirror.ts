import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { Msg } from '../config/fields.ts';
import { probability } from '../config/percent.ts';
import type { Exchange, Headers } from './exchange.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { ReplayableBody } from './replay-body.ts';

/** RouteAction.request_mirror_policies entry, compiled. */
export interface MirrorPolicy {
  readonly cluster: string;
  readonly clusterHeader: string;
  /** Probability in [0, 1] (runtime_fraction.default_value; runtime keys are not consulted). */
  readonly fraction: number;
  readonly appendShadowSuffix: boolean;
}

export function compileMirrorPolicy(m: Msg): MirrorPolicy {
  const cluster = m.str('cluster');
  const clusterHeader = m.str('cluster_header').toLowerCase();
  if (!cluster === !clusterHeader) throw m.error('cluster', 'exactly one of cluster, cluster_header is required');
  const fraction = probability(m.msg('runtime_fraction')?.msg('default_value'), 1);
  return { cluster, clusterHeader, fraction, appendShadowSuffix: !m.bool('disable_shadow_host_suffix_append') };
}

/** Envoy's shadow authority: `host-shadow`, keeping any port after it. */
function shadowAuthority(host: string): string {
  const m = /^(.*?)(:\d+)?$/.exec(host);
  return m ? `${m[1]}-shadow${m[2] ?? ''}` : `${host}-shadow`;
}

/** A fire-and-forget copy of the request: its response is read and dropped, its failures change nothing. */
class ShadowHandler implements Dispatcher.DispatchHandler {
  onRequestStart(): void { /* nothing to keep */ }
  onResponseStart(): void { /* dropped */ }
  onResponseData(): void { /* dropped */ }
  onResponseEnd(): void { /* dropped */ }
  onResponseError(): void { /* a shadow never affects the real request */ }
}

/**
 * Sends mirrors for one request once its head (and body, if any) is known.
 * `headers` are the upstream request headers of the primary request; each
 * mirror gets its own copy.
 */
export function sendMirrors(policies: readonly MirrorPolicy[], clusters: ClusterManager, ex: Exchange, path: string,
  headers: Headers, body: ReplayableBody | undefined): void {
  for (const p of policies) {
    if (p.fraction < 1 && Math.random() >= p.fraction) continue;
    const name = p.cluster || (typeof ex.headers[p.clusterHeader] === 'string' ? ex.headers[p.clusterHeader] as string : '');
    const cluster = name ? clusters.get(name) : undefined;
    if (!cluster) continue;
    const host = cluster.pick({ originalDst: ex.conn.originalDst });
    if (!host) continue;
    const h: Headers = { ...headers };
    if (p.appendShadowSuffix && typeof h.host === 'string') h.host = shadowAuthority(h.host);
    const go = (b: Readable | null): void => {
      cluster.stats.rqTotal.inc();
      cluster.httpPool(host, cluster.config.protocol === 'http2').dispatch({ path, method: ex.method, headers: h, body: b }, new ShadowHandler());
    };
    if (!ex.hasBody) { go(null); continue; }
    // The shadow carries the whole body, so it leaves once the body is complete (and only if it was kept).
    if (!body) continue;
    body.whenComplete(() => { if (body.replayable) go(body.replay()); });
  }
}
