import { connect as netConnect, type Socket } from 'node:net';
import { connectUpstreamTls } from '../tls/upstream-connect.ts';
import type { Host } from '../upstream/host.ts';
import type { Cluster } from '../upstream/cluster.ts';
import { connectInternalHost } from '../upstream/internal-upstream.ts';
import type { FilterState } from '../core/filter-state.ts';

/**
 * Opens a raw TCP (or TLS, per the cluster's transport socket) connection to a host, or an
 * in-process one to an internal listener; `filterState` (connection, then request) is what an
 * internal_upstream transport may pass along.
 */
export function connectHost(cluster: Cluster, host: Host, filterState?: FilterState, requestState?: FilterState): Socket {
  const cfg = cluster.config;
  cluster.stats.cxTotal.inc();
  cluster.stats.cxActive.inc();
  const socket = host.internal ? connectInternalHost(cluster, host, filterState, requestState)
    : host.pipe !== undefined ? netConnect({ path: host.pipe, allowHalfOpen: true })
    : host.tls
    ? connectUpstreamTls(host.tls, host.address, host.port, [], cluster.stats.ssl)
    : netConnect({ host: host.address, port: host.port, noDelay: true, allowHalfOpen: true, localAddress: cfg.sourceAddress });
  socket.once('close', () => cluster.stats.cxActive.dec());
  if (cfg.connectTimeoutMs > 0) {
    socket.setTimeout(cfg.connectTimeoutMs, () => { cluster.stats.cxConnectTimeout.inc(); socket.destroy(new Error('connect timeout')); });
    socket.once(host.tls ? 'secureConnect' : 'connect', () => socket.setTimeout(0));
  }
  return socket;
}
