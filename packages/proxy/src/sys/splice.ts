// Zero-copy TCP relay: hands two connected TCP sockets to the splice engine of the N-API addon in
// packages/proxy/native/splice.c (built by scripts/build-native.sh), which moves bytes between them
// with splice(2) on a background thread. Node keeps owning the sockets (the engine works on dup()s of
// their fds) but must neither read nor write them while they are spliced.
import { createRequire } from 'node:module';
import net from 'node:net';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

/** Called once when a pair ends: byte counts per direction and an errno name, or null after a clean end. */
export type SpliceDone = (aToB: number, bToA: number, err: string | null) => void;

export interface SplicedPair {
  /** Aborts the relay (bytes in flight are dropped); onDone still runs once, with 'ECANCELED'. */
  stop(): void;
  /** Bytes relayed so far [a→b, b→a]; cheap (one native call), for idle-timeout activity checks. */
  bytes(): [number, number];
}

interface Addon {
  spliceInit(cb: (id: number, aToB: number, bToA: number, err: string | null) => void): void;
  spliceStart(fdA: number, fdB: number, id: number): void;
  spliceStop(id: number): boolean;
  spliceStats(id: number): [number, number] | null;
}

/** The parts of a TCP socket's libuv handle (tcp_wrap) used here. */
interface TcpHandle {
  fd: number;
  reading: boolean;
  readStop(): number;
}

export const SPLICE_ADDON_PATH = fileURLToPath(new URL('../../native/build/Release/splice.node', import.meta.url));

let addon: Addon | undefined;
/** Why the addon is missing, for diagnostics. */
export let spliceLoadError: unknown;
try {
  addon = createRequire(import.meta.url)(SPLICE_ADDON_PATH) as Addon;
} catch (err) {
  spliceLoadError = err;
}

/** Whether the splice engine is usable; when false splicePair always returns null. */
export const spliceAvailable: boolean = addon !== undefined;

/** Live native pairs by id; the engine reports each id exactly once. */
const live = new Map<number, (aToB: number, bToA: number, err: string | null) => void>();
let nextId = 1;
let initialized = false;

function native(): Addon | undefined {
  if (addon !== undefined && !initialized) {
    addon.spliceInit((id, aToB, bToA, err) => {
      const done = live.get(id);
      live.delete(id);
      done?.(aToB, bToA, err);
    });
    initialized = true;
  }
  return addon;
}

/** The libuv TCP handle of a plain, connected TCP socket, or null (TLS, JS stream, pipe, no fd). */
function tcpHandle(s: net.Socket): TcpHandle | null {
  if (s instanceof tls.TLSSocket) return null;
  const h = (s as unknown as { _handle?: unknown })._handle as Partial<TcpHandle> | null | undefined;
  if (h == null || h.constructor?.name !== 'TCP') return null;
  if (typeof h.fd !== 'number' || h.fd < 0 || typeof h.readStop !== 'function') return null;
  return h as TcpHandle;
}

/** Whether Node's side of `s` is in a state the engine can take over. */
function relayable(s: net.Socket): boolean {
  const rs = (s as unknown as { _readableState?: { ended?: boolean } })._readableState;
  return (
    !s.destroyed &&
    !s.connecting &&
    s.readable &&
    s.writable &&
    !s.writableEnded &&
    rs?.ended !== true && // Node already saw EOF: reading on would emit 'end' (and maybe end() the socket)
    s.readableEncoding === null && // buffered bytes would be strings (and a decoder may hold partial ones)
    s.writableCorked === 0 &&
    s.listenerCount('data') === 0 && // they would receive the buffered bytes we hand over, or restart reads
    s.listenerCount('readable') === 0
  );
}

/** Stops libuv reading `s` for good: the engine owns its byte stream from now on. */
function freeze(s: net.Socket, h: TcpHandle): void {
  s.pause();
  h.readStop(); // unconditionally (idempotent in libuv): Node may still be reading after pause()
  h.reading = false;
  // Nothing (resume(), a late 'data' listener, read()) may restart reading: Readable calls _read
  // to ask for more, and net.Socket's _read would readStart the handle.
  (s as unknown as { _read: () => void })._read = () => {};
}

function errCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code !== '' ? code : 'EIO';
}

/**
 * Relays bytes between two connected plain TCP sockets in the kernel until both directions reached
 * EOF (each EOF is forwarded as a half-close, shutdown(SHUT_WR)), or until an error or stop().
 *
 * Returns null, leaving both sockets untouched, when the addon is missing or either socket is not a
 * plain connected TCP socket with an fd that Node can hand over: TLS or other JS-stream sockets,
 * still connecting, destroyed, ended, with an encoding set, corked, or with 'data'/'readable'
 * listeners (call this before piping or listening for data). The caller then uses its JS relay.
 *
 * Bytes Node had already read (readableLength) or not yet written (writableLength) are flushed to
 * the other side before the engine starts, and counted. While spliced, the caller must not read,
 * write, end() or pause/resume the sockets, and Node sees no activity on them: socket.setTimeout()
 * idle timers fire even while bytes flow (poll bytes() instead), bytesRead/bytesWritten stay put.
 *
 * onDone runs exactly once, never synchronously: err is null after a clean end, an errno name
 * otherwise ('ECONNRESET', 'EPIPE', ...), 'ECANCELED' after stop() or when either socket was
 * destroyed meanwhile. The sockets are left open (maybe half-closed): the caller destroys both.
 */
export function splicePair(a: net.Socket, b: net.Socket, onDone: SpliceDone): SplicedPair | null {
  if (a === b) return null;
  const ha = tcpHandle(a);
  const hb = tcpHandle(b);
  if (ha === null || hb === null || !relayable(a) || !relayable(b)) return null;
  const n = native();
  if (n === undefined) return null;

  const id = nextId++;
  const flushed: [number, number] = [0, 0];
  let counters: [number, number] = [0, 0];
  let state: 'flushing' | 'running' | 'done' = 'flushing';
  let stopRequested = false;
  let flushError: string | null = null;

  const onClose = (): void => pair.stop(); // destroyed under us: the engine must let go of the dups
  const complete = (aToB: number, bToA: number, err: string | null): void => {
    if (state === 'done') return;
    state = 'done';
    counters = [aToB + flushed[0], bToA + flushed[1]];
    a.off('close', onClose);
    b.off('close', onClose);
    onDone(counters[0], counters[1], err);
  };

  const begin = (): void => {
    if (state !== 'flushing') return;
    if (stopRequested || flushError !== null || a.destroyed || b.destroyed) {
      complete(0, 0, stopRequested ? 'ECANCELED' : (flushError ?? 'ECANCELED'));
      return;
    }
    state = 'running';
    counters = [flushed[0], flushed[1]];
    live.set(id, complete);
    try {
      n.spliceStart(ha.fd, hb.fd, id);
    } catch (err) {
      live.delete(id);
      state = 'flushing';
      const code = errCode(err);
      process.nextTick(() => complete(0, 0, code));
    }
  };

  // Hand over what Node already holds, in order, before the engine writes anything.
  let pending = 1;
  const settle = (err?: Error | null): void => {
    if (err && flushError === null) flushError = errCode(err);
    if (--pending === 0) begin();
  };
  const flush = (src: net.Socket, dst: net.Socket, d: 0 | 1): void => {
    const chunk = src.readableLength > 0 ? (src.read() as Buffer | null) : null;
    if (chunk === null && dst.writableLength === 0) return;
    if (chunk !== null) flushed[d] += chunk.length;
    pending++;
    // The callback of this write runs after every earlier write of dst completed.
    dst.write(chunk ?? Buffer.alloc(0), settle);
  };

  freeze(a, ha);
  freeze(b, hb);
  a.on('close', onClose);
  b.on('close', onClose);
  flush(a, b, 0);
  flush(b, a, 1);
  if (pending === 1) process.nextTick(settle); // keep onDone asynchronous in every case
  else settle();

  const pair: SplicedPair = {
    stop(): void {
      if (state === 'flushing') stopRequested = true;
      else if (state === 'running') n.spliceStop(id);
    },
    bytes(): [number, number] {
      if (state === 'running') {
        const s = n.spliceStats(id); // null between the engine's end and its report
        if (s !== null) counters = [s[0] + flushed[0], s[1] + flushed[1]];
      } else if (state === 'flushing') {
        return [flushed[0], flushed[1]];
      }
      return [counters[0], counters[1]];
    },
  };
  return pair;
}
