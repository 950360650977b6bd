import type { Duplex } from 'node:stream';
import { connect as netConnect } from 'node:net';
import { connectUpstreamTls } from '../tls/upstream-connect.ts';
import { HboneClientPool, type HboneKey } from '../hbone/client-pool.ts';
import type { Cluster } from './cluster.ts';
import type { Host } from './host.ts';
import { connectInternalHost } from './internal-upstream.ts';
import { workloadDiscovery } from '../telemetry/istio/workload-peers.ts';

/** Envoy's upstream HTTP idle_timeout default: a pooled tunnel connection without streams for an hour closes. */
const TUNNEL_IDLE_MS = 3600_000;

/**
 * tcp_proxy tunneling_config is a thin user of the HBONE client pool: one pool per cluster, keyed
 * by host (the cluster's TLS context is the source identity, its SAN matchers the destination's),
 * the host's own transport (TLS, plaintext h2c or an internal listener) as the dialer.
 */
const pools = new WeakMap<Cluster, HboneClientPool>();

function poolFor(cluster: Cluster): HboneClientPool {
  let pool = pools.get(cluster);
  if (!pool) {
    const stats = cluster.stats;
    pool = new HboneClientPool(() => { throw new Error('tunnels dial per host'); }, {
      // Envoy's cluster HTTP/2 default (max_concurrent_streams 2^31 - 1): the peer's SETTINGS decide.
      maxStreamsPerConnection: 2 ** 31 - 1,
      idleReleaseMs: TUNNEL_IDLE_MS,
      connectTimeoutMs: cluster.config.connectTimeoutMs,
      onConnection: (event) => { if (event === 'open') { stats.cxTotal.inc(); stats.cxActive.inc(); } else stats.cxActive.dec(); },
    });
    pools.set(cluster, pool);
  }
  return pool;
}

function dialHost(cluster: Cluster, host: Host, identity: string): Duplex {
  if (host.internal) return connectInternalHost(cluster, host, undefined);
  if (host.tls) return connectUpstreamTls(host.tls, host.address, host.port, ['h2'], cluster.stats.ssl, undefined, identity || undefined);
  return netConnect({ host: host.address, port: host.port, noDelay: true });
}

/** Opens `CONNECT authority` to the host; `onUp` gets the stream once a 2xx arrives. */
export function openConnectTunnel(cluster: Cluster, host: Host, authority: string, headers: Readonly<Record<string, string | string[] | undefined>>,
  onUp: (stream: Duplex, response: Readonly<Record<string, unknown>>) => void, onFail: (err: Error) => void): void {
  // A destination workload discovery knows must present its own SPIFFE id (ztunnel's rule; istiod's
  // connect_originate only asks for the trust domain): a waypoint never tunnels to an impostor.
  const identity = host.tls && !host.internal ? workloadDiscovery.identityOf(host.address) ?? '' : '';
  const key: HboneKey = { sourceIdentity: '', destinationIdentity: identity, destination: host.hostPort };
  poolFor(cluster).connect(key, authority, headers, () => dialHost(cluster, host, identity)).then((t) => onUp(t.stream, t.responseHeaders), onFail);
}
