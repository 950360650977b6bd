// Sockets inside other network namespaces (ztunnel's in-pod listeners and upstream connections)
// and unix SEQPACKET sockets carrying file descriptors (the ZDS transport), from the N-API addon
// packages/proxy/native/netns.c. Native errors carry `code` = errno name.
import { closeSync } from 'node:fs';
import { createRequire } from 'node:module';
import dgram from 'node:dgram';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

interface Addon {
  bindInNetns(nsFd: number, kind: string, address: string, port: number, mark: number, transparent: number): number;
  socketInNetns(nsFd: number, family: number, mark: number, transparent: number): number;
  seqpacketListen(path: string): number;
  seqpacketConnect(path: string): number;
  seqpacketSend(fd: number, data: Buffer, fds: number[]): number;
  seqpacketWait(fd: number, accept: number, timeoutMs: number, cb: (err: Error | null, result: unknown) => void): void;
}

export const NETNS_ADDON_PATH = fileURLToPath(new URL('../../native/build/Release/netns.node', import.meta.url));

let addon: Addon | undefined;
let loadError: unknown;
try {
  addon = createRequire(import.meta.url)(NETNS_ADDON_PATH) as Addon;
} catch (err) {
  loadError = err;
}

export const netnsAvailable: boolean = addon !== undefined;

function native(): Addon {
  if (addon !== undefined) return addon;
  const err = new Error(`netns addon not loaded from ${NETNS_ADDON_PATH} (run scripts/build-native.sh): ${String(loadError)}`, { cause: loadError }) as Error & { code: string };
  err.code = 'ERR_NETNS_UNAVAILABLE';
  throw err;
}

export interface NetnsSocketOptions {
  /** SO_MARK, set before bind/connect (needs CAP_NET_ADMIN). */
  readonly mark?: number;
  /** IP_TRANSPARENT: bind/connect from addresses not on this host (needs CAP_NET_ADMIN). */
  readonly transparent?: boolean;
  /** Listeners only: accepted sockets start paused (for a listener core that peeks or hands them on). */
  readonly pauseOnConnect?: boolean;
}

/**
 * A TCP server listening on `address:port` inside the namespace `nsFd` (-1: this one). The address
 * must be an IP literal: nothing is resolved, so nothing runs after leaving the namespace.
 */
export function listenInNetns(nsFd: number, address: string, port: number, o: NetnsSocketOptions = {}): Promise<net.Server> {
  const fd = native().bindInNetns(nsFd, 'tcp', address, port, o.mark ?? 0, o.transparent ? 1 : 0);
  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: o.pauseOnConnect ?? false });
  return new Promise((resolve, reject) => {
    server.once('error', (e) => { closeSync(fd); reject(e); });
    server.listen({ fd }, () => resolve(server));
  });
}

/** A UDP socket bound to `address:port` inside the namespace `nsFd` (the in-pod DNS proxy). */
export function udpInNetns(nsFd: number, address: string, port: number, o: NetnsSocketOptions = {}): Promise<dgram.Socket> {
  const fd = native().bindInNetns(nsFd, 'udp', address, port, o.mark ?? 0, o.transparent ? 1 : 0);
  const sock = dgram.createSocket(net.isIPv6(address) ? 'udp6' : 'udp4');
  return new Promise((resolve, reject) => {
    sock.once('error', (e) => { closeSync(fd); reject(e); });
    sock.bind({ fd }, () => resolve(sock));
  });
}

/** An unconnected TCP socket created in `nsFd` with options applied; call `.connect()` on it. */
export function socketInNetns(nsFd: number, family: 4 | 6, o: NetnsSocketOptions = {}): net.Socket {
  const fd = native().socketInNetns(nsFd, family, o.mark ?? 0, o.transparent ? 1 : 0);
  // manualStart: do not read before connect() (not in @types/node).
  return new net.Socket({ fd, manualStart: true, allowHalfOpen: true } as net.SocketConstructorOpts);
}

export interface SeqpacketMessage {
  readonly data: Buffer;
  /** File descriptors received with it (SCM_RIGHTS); the receiver owns them. */
  readonly fds: readonly number[];
}

const POLL_MS = 200;

function wait(fd: number, accept: number): Promise<unknown> {
  return new Promise((resolve, reject) => native().seqpacketWait(fd, accept, POLL_MS, (err, result) => (err ? reject(err) : resolve(result))));
}

/** An fd waited on by the libuv pool (one wait at a time, 200 ms polls): close() lands once the wait returns. */
abstract class PolledFd {
  protected fd: number;
  private waiting = false;
  private closing = false;

  constructor(fd: number) {
    this.fd = fd;
  }

  get closed(): boolean {
    return this.fd < 0 || this.closing;
  }

  /** Waits until a result arrives (undefined after close()); `accept` waits for a connection, else a message. */
  protected async next<T>(accept: 0 | 1): Promise<T | undefined> {
    if (this.waiting) throw new Error('one wait at a time');
    this.waiting = true;
    try {
      for (;;) {
        if (this.closing) return undefined;
        const r = await wait(this.fd, accept) as T | null;
        if (r !== null) return r;
      }
    } finally {
      this.waiting = false;
      if (this.closing) this.release();
    }
  }

  /** Closes now, or as soon as a pending wait returns. */
  close(): void {
    this.closing = true;
    if (!this.waiting) this.release();
  }

  private release(): void {
    if (this.fd >= 0) { closeSync(this.fd); this.fd = -1; }
  }
}

/** One end of a unix SEQPACKET connection: whole messages, optionally with file descriptors. */
export class SeqpacketSocket extends PolledFd {
  static connect(path: string): SeqpacketSocket {
    return new SeqpacketSocket(native().seqpacketConnect(path));
  }

  send(data: Uint8Array, fds: readonly number[] = []): void {
    if (this.closed) throw Object.assign(new Error('seqpacket socket is closed'), { code: 'EBADF' });
    native().seqpacketSend(this.fd, Buffer.from(data.buffer, data.byteOffset, data.byteLength), [...fds]);
  }

  /** The next message; undefined at end of stream or after close(). */
  async receive(): Promise<SeqpacketMessage | undefined> {
    const m = await this.next<SeqpacketMessage>(0);
    if (!m || (m.data.length === 0 && m.fds.length === 0)) return undefined;
    return m;
  }
}

/** A listening unix SEQPACKET socket (the CNI side of ZDS). */
export class SeqpacketServer extends PolledFd {
  constructor(path: string) {
    super(native().seqpacketListen(path));
  }

  /** The next connection; undefined after close(). */
  async accept(): Promise<SeqpacketSocket | undefined> {
    const fd = await this.next<number>(1);
    return fd === undefined ? undefined : new SeqpacketSocket(fd);
  }
}
