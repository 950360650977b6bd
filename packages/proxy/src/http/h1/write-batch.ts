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
 */
const corked: Socket[] = [];
let scheduled = false;
// Config work in time slices resumes with setImmediate too: the turn's responses go out first.
letRunFirst(() => scheduled);

function uncorkAll(): void {
  scheduled = false;
  // A socket uncorked here may be corked again by a callback: take the list first.
  const list = corked.splice(0, corked.length);
  for (let i = 0; i < list.length; i++) {
    const s = list[i];
    if (s.writableCorked) s.uncork();
  }
}

export function batchedWrite(socket: Socket, data: Buffer): boolean {
  if (socket.writableCorked === 0 && !socket.destroyed) {
    socket.cork();
    corked.push(socket);
    if (!scheduled) { scheduled = true; setImmediate(uncorkAll); }
  }
  return socket.write(data);
}
