/** Polls `cond` every 20 ms until it holds; fails naming `what` after `timeoutMs`. */
export async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

import net from 'node:net';

/** Connects to host:port, retrying every 50 ms while nothing listens yet (a peer starting up). */
export async function connectWhenUp(port: number, host = '127.0.0.1', timeoutMs = 5000): Promise<net.Socket> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(port, host);
        s.once('connect', () => { s.off('error', reject); resolve(s); });
        s.once('error', reject);
      });
    } catch (e) {
      if (Date.now() > end) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
