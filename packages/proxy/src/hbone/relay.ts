/**
 * The byte relay every tunnel uses (HBONE inbound and outbound, Envoy's CONNECT terminate,
 * tcp_proxy and its tunneling_config): both directions with backpressure and half-close, the
 * byte counts reported once, when both sides are closed.
 *
 * Writes to a socket are batched per event-loop turn: the first write corks it and one setImmediate
 * uncorks every socket written during the turn. An HTTP/2 stream delivers a TLS read as several
 * 16 KiB DATA chunks (node sends no larger frames), each its own 'data' event; written one by one
 * they cost a write(2) each, batched they leave in one writev(2) (the HBONE receiver of a ztunnel
 * pair: 68 → 20 syscalls per MB). Backpressure is ours, not the socket's 16 KiB high-water mark
 * (which would pause the source after the first chunk and defeat the batch): a source pauses once
 * its peer holds RELAY_BUFFER_BYTES unsent, and resumes on 'drain'. Writes into an HTTP/2 stream are
 * not corked: its session already sends once per turn, and a buffer held longer may outlive a
 * scavenge and then wait for a mark-compact.
 */
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** Bytes a side may hold unsent before the other side's reading pauses. */
export const RELAY_BUFFER_BYTES = 64 * 1024;

const corked: Duplex[] = [];
let scheduled = false;

function uncorkAll(): void {
  scheduled = false;
  // An uncork may run callbacks that cork again: take the list first.
  const list = corked.splice(0, corked.length);
  for (let i = 0; i < list.length; i++) {
    const s = list[i];
    if (s.writableCorked > 0 && !s.destroyed) s.uncork();
  }
}

/** Writes `chunk` to `dest` corked until the end of this turn; false when the source should pause. */
function batchedWrite(dest: Duplex, chunk: Buffer): boolean {
  if (!(dest instanceof Socket)) return dest.write(chunk);
  if (dest.writableCorked === 0 && !dest.destroyed) {
    dest.cork();
    corked.push(dest);
    if (!scheduled) { scheduled = true; setImmediate(uncorkAll); }
  }
  // write() says false past the stream's own high-water mark, and then emits 'drain' once emptied.
  return dest.write(chunk) || dest.writableLength < RELAY_BUFFER_BYTES;
}

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
  a.on('data', (chunk: Buffer) => { aToB += chunk.length; if (!batchedWrite(b, chunk)) a.pause(); });
  b.on('data', (chunk: Buffer) => { bToA += chunk.length; if (!batchedWrite(a, chunk)) b.pause(); });
  a.on('drain', () => b.resume());
  b.on('drain', () => a.resume());
  // end() writes what is corked first (a corked Writable flushes before it finishes).
  a.on('end', () => b.end());
  b.on('end', () => a.end());
  a.on('error', fail);
  b.on('error', fail);
  a.on('close', () => closed(a, b));
  b.on('close', () => closed(b, a));
  a.resume();
  b.resume();
}
