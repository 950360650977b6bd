// Linux socket options Node lacks (SO_ORIGINAL_DST, SO_MARK, IP_TRANSPARENT), from the N-API addon in
// packages/proxy/native (built by scripts/build-native.sh). Native errors carry `code` = errno name.
import { closeSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { canonicalIp } from '../core/canonical-ip.ts';

export interface OriginalDst {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

interface Addon {
  getOriginalDst(fd: number): OriginalDst | null;
  setMark(fd: number, mark: number): void;
  setTransparent(fd: number, on: number): void;
  createSocket(family: number): number;
  mallocTrim(): boolean;
}

export const ADDON_PATH = fileURLToPath(new URL('../../native/build/Release/sockopt.node', import.meta.url));

let addon: Addon | undefined;
let loadError: unknown;
try {
  addon = createRequire(import.meta.url)(ADDON_PATH) as Addon;
} catch (err) {
  loadError = err;
}

/** Whether the native addon loaded; when false every function below throws ERR_SOCKOPT_UNAVAILABLE. */
export const available: boolean = addon !== undefined;

function native(): Addon {
  if (addon !== undefined) return addon;
  const err = new Error(
    `socket-option addon not loaded from ${ADDON_PATH} (run scripts/build-native.sh): ${String(loadError)}`,
    { cause: loadError },
  ) as Error & { code: string };
  err.code = 'ERR_SOCKOPT_UNAVAILABLE';
  throw err;
}

/** The OS file descriptor behind a socket or listening server (the one unsafe cast lives here). */
function fdOf(target: net.Socket | net.Server): number {
  const fd = (target as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    const err = new Error('socket has no file descriptor (not connected/listening yet, or closed)') as Error & {
      code: string;
    };
    err.code = 'EBADF';
    throw err;
  }
  return fd;
}

/**
 * glibc's malloc_trim(0): the native heap's free pages back to the kernel. A burst's buffers are
 * freed in the middle of the heap, where free() cannot shrink it, so RSS stays at the burst's peak.
 * Takes ~5 ms on a quiet heap, up to ~100 ms when it has hundreds of MB to give back: call it when
 * the process is idle. False when nothing was released, or without the addon.
 */
export function trimNativeHeap(): boolean {
  return addon !== undefined && addon.mallocTrim();
}

/** The pre-NAT destination of an accepted connection (iptables REDIRECT/DNAT), or null when not NAT'd. */
export function getOriginalDst(socket: net.Socket): OriginalDst | null {
  return native().getOriginalDst(fdOf(socket));
}

/** SO_MARK (needs CAP_NET_ADMIN). Routing uses the mark at connect(): set it on a socket from createSocket(). */
export function setMark(socket: net.Socket, mark: number): void {
  native().setMark(fdOf(socket), mark | 0);
}

/** IP_TRANSPARENT / IPV6_TRANSPARENT (needs CAP_NET_ADMIN), e.g. on a TPROXY listener. */
export function setTransparent(target: net.Socket | net.Server, on: boolean): void {
  native().setTransparent(fdOf(target), on ? 1 : 0);
}

export interface CreateSocketOptions {
  /** SO_MARK applied before connect(). */
  mark?: number;
  /** IP_TRANSPARENT applied before connect(), so the socket may use a non-local source address. */
  transparent?: boolean;
}

/**
 * An unconnected TCP socket with options that must precede connect(); call `.connect()` on it.
 * (Node creates a socket's fd inside connect(), too late for SO_MARK.)
 */
export function createSocket(family: 4 | 6, options: CreateSocketOptions = {}): net.Socket {
  const a = native();
  const fd = a.createSocket(family);
  try {
    if (options.mark !== undefined) a.setMark(fd, options.mark | 0);
    if (options.transparent) a.setTransparent(fd, 1);
    // manualStart: do not start reading before connect() (it is not in @types/node).
    return new net.Socket({ fd, manualStart: true } as net.SocketConstructorOpts);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Where the client meant to connect: the NAT'd original destination when present, else the socket's
 * local address and port (what Envoy's original_dst listener filter yields without NAT).
 */
export function originalDestination(socket: net.Socket): OriginalDst {
  const nat = getOriginalDst(socket);
  if (nat !== null) return nat;
  const local = socket.localAddress ?? '';
  const address = canonicalIp(local);
  const family: 'IPv4' | 'IPv6' = socket.localFamily === 'IPv6' && address === local ? 'IPv6' : 'IPv4';
  return { address, port: socket.localPort ?? 0, family };
}
