// A recording HTTP/1.1 backend on raw sockets for the hardening suites: it keeps every byte it
// receives and every request it parses (pipelined ones too), so a test can prove that NO smuggled
// request reached it. It parses what a proxy forwards (well-formed CRLF framing), answers in order:
//   /ws...        with `Upgrade`: 101 (after ?delay=MS), then echoes raw bytes (the tunnel); bytes that
//                 arrive before the 101 went out are counted in `earlyBytes` and never parsed
//   /status/CODE  an empty response with that status (keep-alive)
//   /hold         reads the body as it comes and never answers (the test ends it)
//   anything else 200 JSON {method, target, headers, bodyBytes}
import { createServer, type AddressInfo, type Socket } from 'node:net';

export interface RecordedRequest {
  readonly method: string;
  readonly target: string;
  /** Header lines as received (name as sent, value trimmed), in order. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly bodyBytes: number;
}

export interface RecordingBackend {
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Connections accepted so far. */
  connections: number;
  /** Connections that ended with unread or partial request bytes (the proxy aborted a request). */
  aborted: number;
  /** Bytes received after an upgrade request head and before the backend answered it. */
  earlyBytes: number;
  /** Every request target this backend parsed whose path contains `needle`. */
  targets(needle: string): RecordedRequest[];
  /** All bytes received on all connections, as latin1 (capped at 4 MiB). */
  raw(): string;
  clear(): void;
  close(): Promise<void>;
}

const MAX_RAW = 4 << 20;

/** One parsed request head + how many bytes of the buffer it and its body use; undefined while incomplete. */
function parseOne(buf: Buffer): { req: RecordedRequest; used: number; upgrade: boolean; hold: boolean } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buf.toString('latin1', 0, end).split('\r\n');
  const [method = '', target = ''] = lines[0].split(' ');
  const headers: Array<[string, string]> = [];
  for (const l of lines.slice(1)) { const i = l.indexOf(':'); headers.push([l.slice(0, i), l.slice(i + 1).trim()]); }
  const get = (n: string): string | undefined => headers.find(([k]) => k.toLowerCase() === n)?.[1];
  const hold = target.startsWith('/hold');
  let off = end + 4, bodyBytes = 0;
  if (get('transfer-encoding')?.toLowerCase() === 'chunked') {
    for (;;) {
      const le = buf.indexOf('\r\n', off);
      if (le < 0) return hold ? { req: { method, target, headers, bodyBytes }, used: buf.length, upgrade: false, hold } : undefined;
      const size = parseInt(buf.toString('latin1', off, le), 16);
      if (size === 0) {
        const t = buf.indexOf('\r\n\r\n', le);
        if (t < 0) return undefined;
        off = t + 4;
        break;
      }
      if (buf.length < le + 2 + size + 2) return hold ? { req: { method, target, headers, bodyBytes }, used: buf.length, upgrade: false, hold } : undefined;
      bodyBytes += size;
      off = le + 2 + size + 2;
    }
  } else {
    const len = Number(get('content-length') ?? 0);
    if (buf.length < off + len && !hold) return undefined;
    bodyBytes = Math.min(len, buf.length - off);
    off += bodyBytes;
  }
  const upgrade = get('upgrade') !== undefined && /upgrade/i.test(get('connection') ?? '');
  return { req: { method, target, headers, bodyBytes }, used: off, upgrade, hold };
}

function reply(req: RecordedRequest): string {
  const status = /^\/status\/(\d{3})/.exec(req.target);
  if (status) return `HTTP/1.1 ${status[1]} X\r\ncontent-length: 0\r\n\r\n`;
  const body = JSON.stringify({ method: req.method, target: req.target, headers: req.headers, bodyBytes: req.bodyBytes });
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

export async function startRecordingBackend(): Promise<RecordingBackend> {
  const sockets = new Set<Socket>();
  const chunks: Buffer[] = [];
  let rawSize = 0;
  const b: RecordingBackend = {
    port: 0, requests: [], connections: 0, aborted: 0, earlyBytes: 0,
    targets: (needle) => b.requests.filter((r) => r.target.includes(needle)),
    raw: () => Buffer.concat(chunks).toString('latin1'),
    clear: () => { b.requests.length = 0; chunks.length = 0; rawSize = 0; b.aborted = 0; b.earlyBytes = 0; },
    close: async () => {},
  };
  const server = createServer({ allowHalfOpen: true }, (s) => {
    b.connections++;
    sockets.add(s);
    s.unref();
    let buf = Buffer.alloc(0);
    let tunnel = false, holding = false, switching = false;
    s.on('data', (d: Buffer) => {
      if (rawSize < MAX_RAW) { chunks.push(d); rawSize += d.length; }
      if (tunnel) { s.write(d); return; }
      if (switching) { b.earlyBytes += d.length; buf = Buffer.concat([buf, d]); return; }
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const got = parseOne(buf);
        if (!got) break;
        buf = buf.subarray(got.used);
        if (holding) continue;
        b.requests.push(got.req);
        if (got.hold) { holding = true; break; }
        if (got.upgrade && got.req.target.startsWith('/ws')) {
          switching = true;
          b.earlyBytes += buf.length;
          const value = got.req.headers.find(([k]) => k.toLowerCase() === 'upgrade')?.[1];
          setTimeout(() => {
            s.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${value}\r\nconnection: upgrade\r\n\r\n`);
            tunnel = true;
            if (buf.length) s.write(buf);
          }, Number(/[?&]delay=(\d+)/.exec(got.req.target)?.[1] ?? 0));
          return;
        }
        s.write(reply(got.req));
      }
    });
    s.on('end', () => { if (buf.length || holding) b.aborted++; if (tunnel) s.end(); else s.end(); });
    s.on('error', () => { b.aborted++; s.destroy(); });
    s.on('close', () => sockets.delete(s));
  });
  server.unref();
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(0, '127.0.0.1', () => resolve()); });
  Object.assign(b, {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()); }),
  });
  return b;
}
