import { connect as netConnect, type Socket } from 'node:net';
import { connectUpstreamTls } from '../tls/upstream-connect.ts';
import type { Duplex } from 'node:stream';
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
  const socket = host.internal ? connectInternalHost(cluster, host, filterState, requestState) : host.tls
    ? connectUpstreamTls(host.tls, host.address, host.port, [], cluster.stats.ssl)
    : netConnect({ host: host.address, port: host.port, noDelay: true, allowHalfOpen: true, localAddress: cfg.sourceAddress });
  socket.once('close', () => cluster.stats.cxActive.dec());
  if (cfg.connectTimeoutMs > 0) {
    socket.setTimeout(cfg.connectTimeoutMs, () => { cluster.stats.cxConnectTimeout.inc(); socket.destroy(new Error('connect timeout')); });
    socket.once(host.tls ? 'secureConnect' : 'connect', () => socket.setTimeout(0));
  }
  return socket;
}

/**
 * Pipes two streams both ways with backpressure and half-close: an end on one
 * side ends the other's writable side. Both sides need allowHalfOpen. An error
 * or an abrupt close tears down both. `onClose` runs once with the byte counts.
 */
export function splice(a: Duplex, b: Duplex, onClose: (aToB: number, bToA: number, error: Error | undefined) => void): void {
  let aToB = 0, bToA = 0, open = 2;
  let err: Error | undefined;
  const fail = (e: Error): void => {
    if (!err) err = e;
    a.destroy();
    b.destroy();
  };
  const closed = (self: Duplex, other: Duplex): void => {
    // A clean close means both directions finished; anything else aborts the peer too.
    if (!other.destroyed && !(self.readableEnded && self.writableFinished)) other.destroy();
    if (--open === 0) onClose(aToB, bToA, err);
  };
  a.on('data', (chunk: Buffer) => { aToB += chunk.length; if (!b.write(chunk)) a.pause(); });
  b.on('data', (chunk: Buffer) => { bToA += chunk.length; if (!a.write(chunk)) b.pause(); });
  a.on('drain', () => b.resume());
  b.on('drain', () => a.resume());
  a.on('end', () => b.end());
  b.on('end', () => a.end());
  a.on('error', fail);
  b.on('error', fail);
  a.on('close', () => closed(a, b));
  b.on('close', () => closed(b, a));
  a.resume();
  b.resume();
}
