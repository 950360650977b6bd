// The upstream for the HTTP/2 hardening tests: an h2c server that records what reached it, so a
// test can assert that hostile downstream traffic produced no unexpected upstream request.
//   /slow?ms=N    answers "ok" after N ms
//   /bytes?n=N    N bytes, written with backpressure (sent counts what the socket took)
//   anything else "ok"
import { createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';

export interface H2Backend {
  readonly port: number;
  /** :path of every request that arrived, in order. */
  readonly requests: string[];
  /** Streams that closed before their response was complete (reset or connection gone). */
  aborted: number;
  /** Bytes of /bytes bodies handed to node (stops growing when the proxy stops reading). */
  sent: number;
  close(): Promise<void>;
}

const CHUNK = Buffer.alloc(64 * 1024, 0x61);

export async function startH2Backend(): Promise<H2Backend> {
  const server: Http2Server = createServer({ settings: { initialWindowSize: 4 << 20 } });
  const sockets = new Set<Socket>();
  const b: H2Backend = { port: 0, requests: [], aborted: 0, sent: 0, close: async () => {} };
  server.unref();
  server.on('connection', (s: Socket) => { s.unref(); sockets.add(s); s.once('close', () => sockets.delete(s)); });
  server.on('stream', (stream: ServerHttp2Stream, h) => {
    const url = new URL(String(h[':path'] ?? '/'), 'http://x');
    b.requests.push(url.pathname + url.search);
    stream.on('error', () => { /* counted below */ });
    stream.on('close', () => { if (!stream.writableFinished || stream.rstCode) b.aborted++; });
    stream.resume();
    if (url.pathname === '/slow') {
      const t = setTimeout(() => { if (!stream.destroyed) { stream.respond({ ':status': 200 }); stream.end('ok'); } }, Number(url.searchParams.get('ms') ?? 1000));
      stream.on('close', () => clearTimeout(t));
      return;
    }
    if (url.pathname === '/bytes') {
      let left = Number(url.searchParams.get('n') ?? 0);
      stream.respond({ ':status': 200, 'content-length': String(left) });
      const pump = (): void => {
        while (left > 0 && !stream.destroyed) {
          const c = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
          left -= c.length;
          b.sent += c.length;
          if (!stream.write(c)) { stream.once('drain', pump); return; }
        }
        if (left === 0 && !stream.destroyed) stream.end();
      };
      pump();
      return;
    }
    stream.respond({ ':status': 200 });
    stream.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  Object.assign(b, {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()); }),
  });
  return b;
}
