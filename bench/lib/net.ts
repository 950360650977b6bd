/** Loopback helpers: free ports, waiting for a listener, one-shot HTTP GETs. */
import net from 'node:net';
import http from 'node:http';
import { tailOf, type Proc } from './procs.ts';

export const HOST = '127.0.0.1';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function tryConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, HOST);
    sock.once('connect', () => { sock.destroy(); resolve(true); });
    sock.once('error', () => { sock.destroy(); resolve(false); });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function exitedError(proc: Proc, what: string): Error {
  return new Error(`${proc.name} exited (${String(proc.exitStatus)}) before ${what}:\n${tailOf(proc)}`);
}

/** Wait until something accepts TCP connections on `port`; fail early if `proc` dies. */
export async function waitForPort(port: number, proc: Proc, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitStatus !== undefined) throw exitedError(proc, `listening on ${port}`);
    if (await tryConnect(port)) return;
    await sleep(50);
  }
  throw new Error(`${proc.name} did not listen on ${HOST}:${port} within ${timeoutMs} ms:\n${tailOf(proc)}`);
}

export interface HttpReply {
  status: number;
  body: string;
}

export function httpGet(port: number, path: string, timeoutMs = 2000): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: HOST, port, path, agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => { body += s; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} on port ${port} timed out`)));
    req.on('error', reject);
  });
}

/** Poll `GET /ready` (Envoy admin) until 200; fail early if `proc` dies. */
export async function waitForReady(adminPort: number, proc: Proc, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (proc.exitStatus !== undefined) throw exitedError(proc, 'becoming ready');
    try {
      const reply = await httpGet(adminPort, '/ready', 500);
      if (reply.status === 200) return;
      last = `HTTP ${reply.status} ${reply.body.trim().slice(0, 80)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(100);
  }
  throw new Error(
    `${proc.name} did not become ready within ${timeoutMs / 1000} s ` +
    `(GET http://${HOST}:${adminPort}/ready: ${last})` + (tailOf(proc) ? `:\n${tailOf(proc)}` : ''),
  );
}
