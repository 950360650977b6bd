// Real backends on loopback (port 0, so no races): an HTTP/1.1 echo server, an h2c echo server,
// HTTPS, a WebSocket echo (RFC 6455 frames written here), a TCP echo. Each returns close(),
// which destroys every open connection.
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createH2Server, constants as h2c, type Http2ServerRequest, type Http2ServerResponse, type Http2Server } from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';

// ---------------------------------------------------------------- deterministic payloads

const CHUNK = 64 * 1024;
const BASE = (() => {
  const b = Buffer.allocUnsafe(CHUNK);
  let x = 0x9e3779b9;
  for (let i = 0; i < CHUNK; i += 4) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; b.writeUInt32LE(x >>> 0, i); }
  return b;
})();

/** Chunk `i` of the pattern: the base block stamped with its index (so reordering shows in the hash). */
function patternChunk(i: number, len: number): Buffer {
  const c = Buffer.allocUnsafe(len);
  BASE.copy(c, 0, 0, len);
  if (len >= 8) { c.writeUInt32LE(i, 0); c.writeUInt32LE(~i >>> 0, len - 4); }
  return c;
}

/** A readable of `total` pattern bytes, generated on demand (backpressure-aware). */
export function patternStream(total: number, onProgress?: (sent: number) => void): Readable {
  let sent = 0, i = 0;
  return new Readable({
    highWaterMark: CHUNK,
    read() {
      for (;;) {
        if (sent >= total) { this.push(null); return; }
        const len = Math.min(CHUNK, total - sent);
        sent += len;
        onProgress?.(sent);
        if (!this.push(patternChunk(i++, len))) return;
      }
    },
  });
}

const digests = new Map<number, string>();
/** sha256 (hex) of `patternStream(total)`. */
export function patternDigest(total: number): string {
  const known = digests.get(total);
  if (known) return known;
  const h = createHash('sha256');
  for (let sent = 0, i = 0; sent < total; i++) { const len = Math.min(CHUNK, total - sent); h.update(patternChunk(i, len)); sent += len; }
  const d = h.digest('hex');
  digests.set(total, d);
  return d;
}

// ---------------------------------------------------------------- HTTP echo

export interface EchoReply {
  readonly method: string;
  readonly url: string;
  readonly httpVersion: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly bodyBytes: number;
  readonly bodySha256: string;
  readonly remotePort: number;
  readonly servername: string | undefined;
  readonly alpn: string | undefined;
  readonly backend: string;
}

export interface Backend {
  readonly port: number;
  readonly name: string;
  /** Every request seen, in arrival order. */
  readonly requests: EchoReply[];
  /** Distinct upstream connections accepted. */
  connections: number;
  /** Bytes handed to the socket by the current/last /stream response. */
  streamSent: number;
  close(): Promise<void>;
}

type AnyReq = IncomingMessage | Http2ServerRequest;
type AnyRes = ServerResponse | Http2ServerResponse;

function resetStream(req: AnyReq): void {
  if ('stream' in req) req.stream.close(h2c.NGHTTP2_INTERNAL_ERROR);
  else req.socket.destroy();
}

/**
 * The echo behaviour, shared by the HTTP/1.1, HTTPS and h2c servers:
 *   ?delay=MS                 wait before answering
 *   /stream?bytes=N           N pattern bytes (content-length), written with backpressure
 *   /reset?when=headers       destroy the connection / reset the stream before any response
 *   /reset?when=body&bytes=N  headers announcing 2N bytes, N bytes, then the reset
 *   /status/CODE              an empty response with that status
 *   anything else             read the body, answer JSON (EchoReply)
 */
function echoHandler(b: Backend): (req: AnyReq, res: AnyRes) => void {
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const delay = Number(url.searchParams.get('delay') ?? 0);
    const h = createHash('sha256');
    let bytes = 0;
    const sock = req.socket as Socket & Partial<TLSSocket>;
    req.on('data', (d: Buffer) => { bytes += d.length; h.update(d); });
    req.on('end', () => {
      const reply: EchoReply = {
        method: req.method ?? '', url: req.url ?? '', httpVersion: req.httpVersion, headers: { ...req.headers },
        bodyBytes: bytes, bodySha256: h.digest('hex'), remotePort: sock.remotePort ?? 0,
        servername: typeof sock.servername === 'string' ? sock.servername : undefined,
        alpn: typeof sock.alpnProtocol === 'string' ? sock.alpnProtocol : undefined,
        backend: b.name,
      };
      b.requests.push(reply);
      setTimeout(() => answer(b, url, reply, req, res), delay);
    });
  };
}

function answer(b: Backend, url: URL, reply: EchoReply, req: AnyReq, res: AnyRes): void {
  const r = res as ServerResponse; // both response kinds share this surface
  if (url.pathname === '/stream') {
    const total = Number(url.searchParams.get('bytes') ?? 0);
    b.streamSent = 0;
    r.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
    patternStream(total, (n) => { b.streamSent = n; }).pipe(r);
    return;
  }
  if (url.pathname === '/reset') {
    if (url.searchParams.get('when') !== 'body') { resetStream(req); return; }
    const n = Number(url.searchParams.get('bytes') ?? 65536);
    r.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(2 * n) });
    r.write(patternChunk(0, n), () => setTimeout(() => resetStream(req), 50));
    return;
  }
  const status = /^\/status\/(\d{3})$/.exec(url.pathname);
  if (status) { r.writeHead(Number(status[1]), { 'content-length': '0' }); r.end(); return; }
  const body = JSON.stringify(reply);
  r.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'x-backend': b.name });
  r.end(body);
}

function listen(server: HttpServer | Http2Server | NetServer): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

function tracked(server: HttpServer | Http2Server | NetServer, b: { connections: number }): Set<Socket> {
  const sockets = new Set<Socket>();
  // Never keep the test process alive for a backend a failed test forgot to close.
  server.unref();
  server.on('connection', (s: Socket) => {
    s.unref();
    b.connections++;
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  return sockets;
}

async function finish(name: string, server: HttpServer | Http2Server): Promise<Backend> {
  const b: Backend = { port: 0, name, requests: [], connections: 0, streamSent: 0, close: async () => {} };
  const sockets = tracked(server, b);
  server.on('request', echoHandler(b));
  const port = await listen(server);
  Object.assign(b, {
    port,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  });
  return b;
}

/** node:http echo server (HTTP/1.1). */
export function startHttpBackend(name = 'http1'): Promise<Backend> {
  return finish(name, createHttpServer({ keepAliveTimeout: 60_000 }));
}

/** node:http2 cleartext (h2c, prior knowledge) echo server. */
export function startH2cBackend(name = 'h2c'): Promise<Backend> {
  return finish(name, createH2Server({ settings: { initialWindowSize: 4 << 20 } }));
}

/** node:https echo server (HTTP/1.1 over TLS) with the given certificate. */
export function startHttpsBackend(cert: TestCert, name = 'https'): Promise<Backend> {
  return finish(name, createHttpsServer({ cert: cert.cert, key: cert.key, ALPNProtocols: ['http/1.1'] }));
}

// ---------------------------------------------------------------- TCP echo

/** Echoes every byte; ends its side after the client ends (half-close aware). */
export async function startTcpEcho(): Promise<Backend> {
  const server = createNetServer({ allowHalfOpen: true }, (s) => { s.pipe(s); s.on('error', () => s.destroy()); });
  const b: Backend = { port: 0, name: 'tcp-echo', requests: [], connections: 0, streamSent: 0, close: async () => {} };
  const sockets = tracked(server, b);
  const port = await listen(server);
  Object.assign(b, { port, close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }) });
  return b;
}

// ---------------------------------------------------------------- WebSocket echo (RFC 6455)

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export function wsAccept(key: string): string {
  return createHash('sha1').update(key + WS_GUID).digest('base64');
}

/** One frame, server side (never masked) or client side (`mask` given). */
export function encodeWsFrame(opcode: number, payload: Buffer, mask?: Buffer): Buffer {
  const len = payload.length;
  const ext = len < 126 ? 0 : len < 65536 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + (mask ? 4 : 0));
  head[0] = 0x80 | opcode;
  head[1] = (mask ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  if (!mask) return Buffer.concat([head, payload]);
  mask.copy(head, 2 + ext);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i] ^= mask[i & 3];
  return Buffer.concat([head, body]);
}

export interface WsFrame { readonly fin: boolean; readonly opcode: number; readonly payload: Buffer }

/** Parses as many complete frames as `buf` holds; returns them and the unparsed rest. */
export function decodeWsFrames(buf: Buffer): { frames: WsFrame[]; rest: Buffer } {
  const frames: WsFrame[] = [];
  for (;;) {
    if (buf.length < 2) break;
    let len = buf[1] & 0x7f, off = 2;
    if (len === 126) { if (buf.length < 4) break; len = buf.readUInt16BE(2); off = 4; }
    else if (len === 127) { if (buf.length < 10) break; len = Number(buf.readBigUInt64BE(2)); off = 10; }
    const masked = (buf[1] & 0x80) !== 0;
    const maskAt = off;
    if (masked) off += 4;
    if (buf.length < off + len) break;
    const payload = Buffer.from(buf.subarray(off, off + len));
    if (masked) for (let i = 0; i < len; i++) payload[i] ^= buf[maskAt + (i & 3)];
    frames.push({ fin: (buf[0] & 0x80) !== 0, opcode: buf[0] & 0x0f, payload });
    buf = buf.subarray(off + len);
  }
  return { frames, rest: buf };
}

/** node:http server that accepts `Upgrade: websocket` and echoes every data frame back. */
export async function startWsEcho(): Promise<Backend> {
  const server = createHttpServer((_req, res) => { res.writeHead(426, { 'content-length': '0' }); res.end(); });
  const b: Backend = { port: 0, name: 'ws-echo', requests: [], connections: 0, streamSent: 0, close: async () => {} };
  const sockets = tracked(server, b);
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    b.requests.push({ method: req.method ?? '', url: req.url ?? '', httpVersion: req.httpVersion, headers: { ...req.headers }, bodyBytes: 0, bodySha256: '', remotePort: socket.remotePort ?? 0, servername: undefined, alpn: undefined, backend: 'ws-echo' });
    const key = req.headers['sec-websocket-key'];
    if (String(req.headers.upgrade).toLowerCase() !== 'websocket' || typeof key !== 'string') { socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n'); return; }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${wsAccept(key)}\r\n\r\n`);
    let pending = head;
    const onData = (d: Buffer): void => {
      const { frames, rest } = decodeWsFrames(pending.length ? Buffer.concat([pending, d]) : d);
      pending = rest;
      for (const f of frames) {
        if (f.opcode === 0x8) { socket.end(encodeWsFrame(0x8, f.payload)); return; }
        if (f.opcode === 0x9) socket.write(encodeWsFrame(0xa, f.payload));
        else if (f.opcode <= 0x2) socket.write(Buffer.concat([Buffer.from([(f.fin ? 0x80 : 0) | f.opcode]), encodeWsFrame(0, f.payload).subarray(1)]));
      }
    };
    socket.on('data', onData);
    socket.on('error', () => socket.destroy());
    if (head.length) { pending = Buffer.alloc(0); onData(head); }
  });
  const port = await listen(server);
  Object.assign(b, { port, close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }) });
  return b;
}

// ---------------------------------------------------------------- certificates

export interface TestCert { readonly certPath: string; readonly keyPath: string; readonly cert: string; readonly key: string; readonly dir: string; remove(): void }

/** A self-signed P-256 certificate made with openssl for this run (CN and DNS/IP/URI SANs). */
export function makeCert(cn: string, sans: readonly string[] = []): Promise<TestCert> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-cert-'));
  const certPath = path.join(dir, 'cert.pem'), keyPath = path.join(dir, 'key.pem');
  const san = [cn, ...sans].map((s) => (/^[\d.]+$/.test(s) ? `IP:${s}` : s.includes('://') ? `URI:${s}` : `DNS:${s}`)).join(',');
  const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', `/CN=${cn}`, '-addext', `subjectAltName=${san}`, '-keyout', keyPath, '-out', certPath];
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { timeout: 15_000 }, (err, _out, stderr) => {
      if (err) { reject(new Error(`openssl failed: ${stderr}`)); return; }
      resolve({ certPath, keyPath, dir, cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), remove: () => rmSync(dir, { recursive: true, force: true }) });
    });
  });
}
