import type { Socket } from 'node:net';
import { letRunFirst } from '../../core/time-slice.ts';

/**
 * Small HTTP/1.1 writes held until the end of the event loop's I/O phase: every
 * socket written during one turn is corked on its first write and uncorked in
 * one setImmediate. A peer (the upstream, the client) then gets the turn's
 * messages in one burst and is woken once for them instead of once per message:
 * waking a sleeping peer is the largest single kernel cost of a proxied request
 * on loopback. Ordering and backpressure stay the Writable's own (cork buffers,
 * write() still reports the buffered length against the high-water mark).
 *
 * Holding a write only pays when the turn has others: a sidecar at 1,000 req/s mostly sees one
 * request per turn, and there the cork, the buffered write and the setImmediate cost ~5% of its
 * CPU for nothing (bench/tools/pair-profile.ts). After LONE_TURNS_TO_DIRECT turns in a row that
 * flushed a single write, writes go out at once; every PROBE_EVERY-th write is held again, and a
 * turn it shows to be busy (two writes or more) turns holding back on.
 */
const LONE_TURNS_TO_DIRECT = 16;
const PROBE_EVERY = 32;

const corked: Socket[] = [];
let scheduled = false;
/** Writes held in the turn being batched. */
let heldWrites = 0;
/** Turns in a row whose flush had a single write. */
let loneTurns = 0;
let direct = false;
let directWrites = 0;
// Config work in time slices resumes with setImmediate too: the turn's responses go out first.
letRunFirst(() => scheduled);

function uncorkAll(): void {
  scheduled = false;
  if (heldWrites > 1) { loneTurns = 0; direct = false; }
  else if (++loneTurns >= LONE_TURNS_TO_DIRECT) direct = true;
  heldWrites = 0;
  // A socket uncorked here may be corked again by a callback: take the list first.
  const list = corked.splice(0, corked.length);
  for (let i = 0; i < list.length; i++) {
    const s = list[i];
    if (s.writableCorked) s.uncork();
  }
}

export function batchedWrite(socket: Socket, data: Buffer): boolean {
  // Nothing of ours is corked while no flush is scheduled: a direct write keeps the order.
  if (direct && !scheduled && socket.writableCorked === 0 && ++directWrites % PROBE_EVERY !== 0) return socket.write(data);
  heldWrites++;
  if (socket.writableCorked === 0 && !socket.destroyed) {
    socket.cork();
    corked.push(socket);
    if (!scheduled) { scheduled = true; setImmediate(uncorkAll); }
  }
  return socket.write(data);
}

/** Whether writes currently go out at once (quiet turns) rather than held to the turn's end; for tests. */
export function writesGoDirect(): boolean {
  return direct;
}
