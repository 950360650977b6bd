import type { Socket } from 'node:net';

/**
 * Reads of an accepted TCP or TLS socket into one shared buffer, as net.connect's
 * `onread` option does for client sockets (net.Server offers no such option):
 * no ArrayBuffer allocated per read and no Readable stream between the socket
 * and its parser (profiled at a few µs per proxied request). It sets the same
 * two things that option sets: the socket's kBuffer / kBufferCb slots, which
 * net.Socket's read path, pause() and resume() consult, and the handle's
 * useUserBuffer(). Where either is missing (another Node), nothing is changed
 * and the caller keeps 'data' events.
 */
interface Slots { buffer: symbol; callback: symbol }

let slots: Slots | null | undefined;

function slotsOf(socket: Socket): Slots | null {
  if (slots !== undefined) return slots;
  const own = Object.getOwnPropertySymbols(socket);
  const buffer = own.find((s) => s.description === 'kBuffer');
  const callback = own.find((s) => s.description === 'kBufferCb');
  slots = buffer && callback ? { buffer, callback } : null;
  return slots;
}

interface UserBufferHandle { useUserBuffer?(buf: Uint8Array): void }
type Slotted = Socket & Record<symbol, unknown> & { _handle?: UserBufferHandle | null };

/**
 * From now on `onRead(n)` gets each read as `buffer[0, n)`; the bytes are valid only
 * during the call. Returns the bytes the stream had already buffered (a peek put
 * them back), to be handled first, or undefined when the socket keeps 'data' events.
 */
export function readIntoShared(socket: Socket, buffer: Buffer, onRead: (n: number) => void): Buffer | undefined {
  const s = socket as Slotted;
  const handle = s._handle;
  // A TLSSocket's handle (TLSWrap) takes a user buffer too: its decrypted bytes land there.
  if (!handle || typeof handle.useUserBuffer !== 'function' || s.readableEncoding) return undefined;
  const k = slotsOf(socket);
  if (!k || s[k.buffer] !== null || s[k.callback] !== null) return undefined;
  const parts: Buffer[] = [];
  for (let b = socket.read() as Buffer | null; b !== null; b = socket.read() as Buffer | null) parts.push(b);
  s[k.buffer] = buffer;
  s[k.callback] = (n: number): boolean => { onRead(n); return true; };
  handle.useUserBuffer(buffer);
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

/**
 * Back to stream semantics (the socket leaves the HTTP/1.1 codec: upgrade, CONNECT):
 * each read is copied and pushed into the Readable, so 'data', pipe() and backpressure
 * (a full buffer stops reading, resume() restarts it) work as on any socket.
 */
export function readIntoStream(socket: Socket, buffer: Buffer): void {
  const s = socket as Slotted;
  const k = slots;
  if (!k || s[k.buffer] !== buffer) return;
  s[k.callback] = (n: number): boolean => socket.push(Buffer.from(buffer.subarray(0, n)));
}
