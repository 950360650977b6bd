import type { Socket } from 'node:net';

/** Envoy's delayed_close_timeout default: after a closing response, how long the peer gets to close first. */
const DELAYED_CLOSE_MS = 1000;

/**
 * Ends our side of a downstream connection and keeps reading until the peer closes, for at most
 * DELAYED_CLOSE_MS once what we wrote is flushed: closing with unread input sends an RST that can
 * destroy the response before the client reads it, and a peer that never closes must not keep
 * the half-open socket forever. Whoever still listens for 'data' must ignore it.
 */
export function endAndLinger(socket: Socket): void {
  socket.end();
  if (socket.isPaused()) socket.resume();
  socket.once('finish', () => {
    const t = setTimeout(() => socket.destroy(), DELAYED_CLOSE_MS);
    t.unref();
    socket.once('close', () => clearTimeout(t));
  });
}
