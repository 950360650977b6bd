import type { Socket } from 'node:net';

/**
 * Reads the first bytes of a connection without consuming them: `decide` sees the
 * bytes so far and returns true when it has enough. The bytes are put back
 * (unshift) before `done` runs, so the next consumer reads the stream from byte 0.
 * `timeoutMs` 0 waits without limit (Envoy's listener_filters_timeout: 0s, as istiod sets it).
 */
export function peek(socket: Socket, decide: (bytes: Buffer) => boolean, timeoutMs: number, done: (bytes: Buffer, timedOut: boolean) => void): void {
  let buf: Buffer = Buffer.alloc(0);
  let finished = false;
  const finish = (timedOut: boolean): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    socket.removeListener('data', onData);
    socket.removeListener('end', onEnd);
    socket.pause();
    if (buf.length) socket.unshift(buf);
    done(buf, timedOut);
  };
  const onData = (chunk: Buffer): void => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    if (decide(buf)) finish(false);
  };
  const onEnd = (): void => finish(false);
  const timer = timeoutMs > 0 ? setTimeout(() => finish(true), timeoutMs) : undefined;
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.resume();
}

/** The HTTP/2 connection preface (RFC 9113 §3.4). */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/** 'h2c' once the bytes are the preface, 'http/1.1' once they cannot be; '' while undecided. */
export function sniffHttp(bytes: Buffer): 'h2c' | 'http/1.1' | '' {
  const n = Math.min(bytes.length, H2_PREFACE.length);
  if (bytes.compare(H2_PREFACE, 0, n, 0, n) !== 0) return 'http/1.1';
  return n === H2_PREFACE.length ? 'h2c' : '';
}
