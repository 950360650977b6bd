import type { Socket } from 'node:net';
import type { ConnInfo } from './conn-info.ts';

/** Filter state key: bytes a terminal relayed outside Node's socket counters (the kernel splice engine). */
const RELAYED_BYTES = 'skua.relayed_bytes';

type Relayed = () => readonly [received: number, sent: number];

/** The terminal hands over its relay's extra byte counts (called once, when the relay starts). */
export function setRelayedBytes(info: ConnInfo, relayed: Relayed): void {
  (info.filterState ??= new Map()).set(RELAYED_BYTES, relayed);
}

/**
 * Downstream bytes [received, sent] so far: Node's socket counters plus whatever the splice engine
 * moved in the kernel (which Node never sees). Cheap enough for periodic reporting.
 */
export function downstreamBytes(socket: Socket, info: ConnInfo): [number, number] {
  let rx = socket.bytesRead, tx = socket.bytesWritten;
  const relayed = info.filterState?.get(RELAYED_BYTES) as Relayed | undefined;
  if (relayed) { const [r, t] = relayed(); rx += r; tx += t; }
  return [rx, tx];
}
