/** Loopback helpers: free ports, waiting for a listener or for the proxy's /ready, one-shot GETs. */
import net from 'node:net';
import http from 'node:http';
import { tailOf, type Proc } from './procs.ts';

export const HOST = '127.0.0.1';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface Reply { status: number; headers: http.IncomingHttpHeaders; body: string }

export function get(port: number, path: string, headers: Record<string, string> = {}, timeoutMs = 2000): Promise<Reply> {
  return getFrom(HOST, port, path, headers, timeoutMs);
}

/** A GET to another loopback address (a sidecar's own, e.g. 127.0.21.11). */
export function getFrom(host: string, port: number, path: string, headers: Record<string, string> = {}, timeoutMs = 2000): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path, headers, agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => { body += s; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} on :${port} timed out`)));
    req.on('error', reject);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function connects(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, host);
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/** Polls until `ok()` holds; fails early (with the process's last output) if `proc` exits. */
async function until(proc: Proc, what: string, timeoutMs: number, ok: () => Promise<string | true>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (proc.status !== undefined) throw new Error(`${proc.name} exited (${proc.status}) before ${what}:\n${tailOf(proc)}`);
    const r = await ok().catch((err: Error) => err.message);
    if (r === true) return;
    last = r;
    await sleep(50);
  }
  throw new Error(`${proc.name}: not ${what} after ${timeoutMs / 1000} s (${last})\n${tailOf(proc)}`);
}

export function waitForPort(proc: Proc, port: number, timeoutMs = 5000, host = HOST): Promise<void> {
  return until(proc, `listening on ${host}:${port}`, timeoutMs, async () => (await connects(port, host)) || 'connection refused');
}

/** Envoy's readiness: admin `GET /ready` answers 200 `LIVE`. */
export function waitForReady(proc: Proc, adminPort: number, timeoutMs = 15_000, host = HOST): Promise<void> {
  return until(proc, 'ready', timeoutMs, async () => {
    const r = await getFrom(host, adminPort, '/ready', {}, 500);
    return r.status === 200 || `GET /ready: ${r.status} ${r.body.trim()}`;
  });
}
