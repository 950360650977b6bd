import { Client } from 'undici';
import type { ClusterManager } from './manager.ts';
import { undiciTlsConnector } from '../tls/upstream-connect.ts';

export interface FetchResult { readonly status: number; readonly body: string }

/**
 * One GET of `uri` through a named cluster (Envoy's AsyncClient for http_uri: remote JWKS and the
 * like). The cluster picks the host; the URI gives the path and the Host header. Rare calls, so a
 * short-lived client each time rather than a pool.
 */
export async function fetchViaCluster(clusters: ClusterManager | undefined, clusterName: string, uri: string, timeoutMs: number): Promise<FetchResult> {
  const cluster = clusters?.get(clusterName);
  if (!cluster) throw new Error(`cluster ${clusterName} not found`);
  await cluster.ready;
  const host = cluster.pick(undefined);
  if (!host) throw new Error(`no healthy host in cluster ${clusterName}`);
  const url = new URL(uri);
  const tls = host.tls;
  const client = new Client(`${tls ? 'https' : 'http'}://${host.hostPort}`, {
    connect: tls ? undiciTlsConnector(tls, ['http/1.1'], cluster.stats.ssl) : undefined,
    headersTimeout: timeoutMs, bodyTimeout: timeoutMs, connectTimeout: timeoutMs,
  });
  cluster.stats.rqTotal.inc();
  const timer = setTimeout(() => { void client.destroy(new Error('timeout')); }, timeoutMs);
  try {
    const res = await client.request({ method: 'GET', path: url.pathname + url.search, headers: { host: url.host } });
    return { status: res.statusCode, body: await res.body.text() };
  } finally {
    clearTimeout(timer);
    void client.close().catch(() => undefined);
  }
}
