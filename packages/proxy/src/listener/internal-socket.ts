import { Duplex } from 'node:stream';

/**
 * One end of an in-process connection to an internal listener (Envoy's user space socket).
 * Bytes written on one end are pushed into the other end's readable side; a write completes
 * only once the peer's read buffer is below its high-water mark, so a slow reader holds the
 * writer back exactly as a full TCP window would. Half-close (end) and abortive close
 * (destroy → the peer is destroyed too) carry over. The Socket methods filters call on a
 * downstream or upstream connection (setTimeout, setNoDelay, addresses) are provided, so the
 * listener and pool code treats it like a net.Socket.
 */
export class InternalSocket extends Duplex {
  peer: InternalSocket | undefined;
  /** Envoy prints internal addresses as envoy://<listener>/<endpoint id>. */
  remoteAddress: string;
  readonly remotePort = 0;
  localAddress: string;
  readonly localPort = 0;
  readonly remoteFamily = 'envoy_internal';
  connecting = true;
  bytesRead = 0;
  bytesWritten = 0;
  /** A write the peer could not take yet: completed when the peer reads again. */
  private held: ((err?: Error | null) => void) | undefined;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(highWaterMark: number, localAddress: string, remoteAddress: string) {
    super({ allowHalfOpen: true, highWaterMark, writableHighWaterMark: highWaterMark, readableHighWaterMark: highWaterMark, decodeStrings: true });
    this.localAddress = localAddress;
    this.remoteAddress = remoteAddress;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    const peer = this.peer;
    if (!peer || peer.destroyed || peer.readableEnded) { cb(resetError('EPIPE')); return; }
    this.bytesWritten += chunk.length;
    peer.bytesRead += chunk.length;
    this.touch();
    peer.touch();
    if (peer.push(chunk)) cb();
    else this.held = cb;
  }

  override _read(): void {
    const peer = this.peer;
    const cb = peer?.held;
    if (cb) { peer!.held = undefined; cb(); }
  }

  override _final(cb: (err?: Error | null) => void): void {
    const peer = this.peer;
    if (peer && !peer.destroyed) peer.push(null);
    cb();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this.clearIdle();
    const held = this.held;
    this.held = undefined;
    if (held) held(resetError('ECONNRESET'));
    const peer = this.peer;
    // A clean close (both directions done) leaves the peer to drain what it still holds; an abortive
    // one reaches it as a reset.
    const clean = !err && this.writableFinished && this.readableEnded;
    if (peer && !peer.destroyed && !clean) process.nextTick(() => peer.destroy());
    cb(err);
  }

  /** socket.setTimeout: 'timeout' after `ms` without bytes either way (0 turns it off). */
  setTimeout(ms: number, onTimeout?: () => void): this {
    if (onTimeout) { if (ms > 0) this.once('timeout', onTimeout); else this.removeListener('timeout', onTimeout); }
    this.clearIdle();
    if (ms > 0) this.idleTimer = setTimeout(() => this.fireIdle(), ms).unref();
    return this;
  }

  private touch(): void {
    if (this.idleTimer) this.idleTimer.refresh();
  }

  private fireIdle(): void {
    this.idleTimer = undefined;
    if (!this.destroyed) this.emit('timeout');
  }

  private clearIdle(): void {
    if (this.idleTimer) { clearTimeout(this.idleTimer); this.idleTimer = undefined; }
  }

  setNoDelay(): this { return this; }
  setKeepAlive(): this { return this; }
  ref(): this { return this; }
  unref(): this { return this; }
  address(): Record<string, never> { return {}; }
  destroySoon(): void { this.end(); }

  /** The pair is wired; the client end reports 'connect' (as a TCP client would). */
  markConnected(): void {
    this.connecting = false;
    this.emit('connect');
  }
}

function resetError(code: string): Error {
  return Object.assign(new Error(`internal connection ${code === 'EPIPE' ? 'closed by peer' : 'reset'}`), { code });
}

/** Two connected ends: `client` for the upstream side, `server` for the internal listener. */
export function internalPair(highWaterMark: number, listenerAddress: string, clientAddress: string): { client: InternalSocket; server: InternalSocket } {
  const client = new InternalSocket(highWaterMark, clientAddress, listenerAddress);
  const server = new InternalSocket(highWaterMark, listenerAddress, clientAddress);
  client.peer = server;
  server.peer = client;
  server.connecting = false;
  return { client, server };
}
