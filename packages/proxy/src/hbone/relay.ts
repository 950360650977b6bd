/**
 * The byte relay every tunnel uses (HBONE inbound and outbound, Envoy's CONNECT terminate,
 * tcp_proxy and its tunneling_config): both directions with backpressure and half-close, the
 * byte counts reported once, when both sides are closed.
 */
import type { Duplex } from 'node:stream';

/**
 * Pipes two streams both ways with backpressure and half-close: an end on one
 * side ends the other's writable side. Both sides need allowHalfOpen. An error
 * or an abrupt close tears down both. `onClose` runs once with the byte counts.
 */
export function relay(a: Duplex, b: Duplex, onClose: (aToB: number, bToA: number, error: Error | undefined) => void): void {
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
