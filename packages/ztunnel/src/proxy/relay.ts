/**
 * Copies bytes both ways between the accepted connection and the upstream, with backpressure and
 * half-close (a FIN is passed on, the other direction keeps flowing), counting each direction for
 * the connection's record. Either side failing tears both down. Resolves once both are closed,
 * with the first error (undefined when both ends finished cleanly).
 * TODO(seam): switch to the core's relayConnectStream once @skua/proxy/hbone lands.
 */
import type { Duplex } from 'node:stream';

export interface RelayResult {
  /** Bytes from the downstream (the side that connected to us) to the upstream. */
  readonly up: number;
  readonly down: number;
  readonly error: string | undefined;
}

export function relay(downstream: Duplex, upstream: Duplex, onBytes?: (up: number, down: number) => void): Promise<RelayResult> {
  return new Promise((resolve) => {
    let up = 0, down = 0, error: string | undefined, closed = 0, settled = false;
    const finish = (): void => {
      if (settled || closed < 2) return;
      settled = true;
      resolve({ up, down, error });
    };
    const fail = (e: Error): void => {
      error ??= e.message;
      downstream.destroy();
      upstream.destroy();
    };
    const pipe = (from: Duplex, to: Duplex, count: (n: number) => void): void => {
      from.on('data', (chunk: Buffer) => {
        count(chunk.length);
        if (!to.write(chunk)) from.pause();
      });
      to.on('drain', () => from.resume());
      from.on('end', () => { if (!to.destroyed) to.end(); });
    };
    pipe(downstream, upstream, (n) => { up += n; onBytes?.(n, 0); });
    pipe(upstream, downstream, (n) => { down += n; onBytes?.(0, n); });
    for (const s of [downstream, upstream]) {
      s.on('error', fail);
      s.on('close', () => {
        closed++;
        // One side gone for good (not a half-close): nothing more can flow either way.
        const other = s === downstream ? upstream : downstream;
        if (!other.destroyed && !other.writableEnded) other.end();
        if (closed === 1) setTimeoutUnref(() => { if (closed < 2) other.destroy(); }, 5000);
        finish();
      });
    }
  });
}

function setTimeoutUnref(f: () => void, ms: number): void {
  setTimeout(f, ms).unref();
}
