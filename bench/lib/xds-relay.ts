/**
 * A TCP relay between a proxy and its xDS server that notes when the server's bytes arrive, so a
 * bench can time what happens at the proxy alone: from the push reaching the proxy's socket to the
 * proxy's traffic using it (the control plane's debounce and encoding are before that instant).
 */
import net from 'node:net';
import { HOST } from './net.ts';

export interface XdsRelay {
  readonly port: number;
  /** performance.now() of the first server→proxy chunk at or after `since`, or undefined. */
  firstPushAfter(since: number): number | undefined;
  /** Resolves once the server has sent nothing for `ms` (HTTP/2 window updates for the proxy's last ACK, a PING). */
  quiet(ms: number): Promise<void>;
  close(): void;
}

/** The last chunks' arrival times are kept, enough for one change's push (a few chunks). */
const KEPT = 256;

export function startXdsRelay(serverPort: number): Promise<XdsRelay> {
  const arrivals: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((proxySide) => {
    const serverSide = net.connect(serverPort, HOST);
    sockets.add(proxySide).add(serverSide);
    serverSide.on('data', (chunk: Buffer) => {
      arrivals.push(performance.now());
      if (arrivals.length > KEPT) arrivals.splice(0, arrivals.length - KEPT);
      if (!proxySide.write(chunk)) serverSide.pause();
    });
    proxySide.on('drain', () => serverSide.resume());
    proxySide.pipe(serverSide);
    const close = (): void => { proxySide.destroy(); serverSide.destroy(); sockets.delete(proxySide); sockets.delete(serverSide); };
    proxySide.on('close', close).on('error', close);
    serverSide.on('close', close).on('error', close);
  });
  return new Promise((resolve) => server.listen(0, HOST, () => resolve({
    port: (server.address() as net.AddressInfo).port,
    firstPushAfter: (since) => arrivals.find((t) => t >= since),
    quiet: async (ms) => {
      for (;;) {
        const idle = performance.now() - (arrivals.at(-1) ?? 0);
        if (idle >= ms) return;
        await new Promise((r) => setTimeout(r, ms - idle));
      }
    },
    close: () => { for (const s of sockets) s.destroy(); server.close(); },
  })));
}
