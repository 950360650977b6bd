/** One-request probes the checks use: HTTP/2 with prior knowledge (h2c), and a TCP round trip. */
import http2 from 'node:http2';
import net from 'node:net';
import { HOST } from './net.ts';

export function h2Get(port: number, path: string, timeoutMs = 3000): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${HOST}:${port}`);
    const timer = setTimeout(() => { session.destroy(); reject(new Error(`h2 GET ${path}: timed out`)); }, timeoutMs);
    const fail = (err: Error): void => { clearTimeout(timer); session.destroy(); reject(err); };
    session.on('error', fail);
    const stream = session.request({ ':method': 'GET', ':path': path });
    let headers: http2.IncomingHttpHeaders = {};
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (h) => { headers = h; });
    stream.on('data', (s: string) => { body += s; });
    stream.on('error', fail);
    stream.on('end', () => {
      clearTimeout(timer);
      session.close();
      resolve({ status: Number(headers[':status']), headers, body });
    });
  });
}

/** Sends `payload`, half-closes, and resolves with everything read back until the peer closes. */
export function tcpRoundTrip(port: number, payload: string, timeoutMs = 3000): Promise<{ echoed: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect({ host: HOST, port, allowHalfOpen: true });
    let echoed = '';
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('tcp round trip timed out')));
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.end(payload));
    socket.on('data', (s: string) => { echoed += s; });
    socket.on('end', () => { socket.destroy(); resolve({ echoed, ms: performance.now() - started }); });
    socket.on('error', reject);
  });
}
