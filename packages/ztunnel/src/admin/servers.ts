/**
 * ztunnel's three HTTP servers: admin on 15000 (localhost: /config_dump, /connections, /logging,
 * /quitquitquit), stats on 15020 (/metrics, /stats/prometheus) and readiness on 15021
 * (/healthz/ready: 200 "ready", else 500 "not ready, pending: …").
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createHttpServer as createServer } from '../core.ts';
import type { AddressInfo } from 'node:net';
import { log, setLogLevel } from '../core.ts';

export interface AdminHandlers {
  configDump(): unknown;
  connections(): unknown;
  metrics(): string;
  /** Names of what is not ready yet (empty: ready). */
  pending(): readonly string[];
  quit(): void;
}

function send(res: ServerResponse, status: number, body: string, type = 'text/plain'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function json(res: ServerResponse, body: unknown): void {
  send(res, 200, `${JSON.stringify(body, null, 2)}\n`, 'application/json');
}

function adminRoute(h: AdminHandlers, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://admin');
  switch (url.pathname) {
    case '/config_dump': return json(res, h.configDump());
    case '/connections': return json(res, h.connections());
    case '/logging': {
      if (req.method !== 'POST') return send(res, 405, 'Invalid HTTP method\n');
      const level = url.searchParams.get('level');
      if (url.searchParams.has('reset')) setLogLevel('info');
      else if (level !== null && !setLogLevel(level)) return send(res, 400, `invalid level ${JSON.stringify(level)}\n`);
      return send(res, 200, `current log level is ${log.enabled('debug') ? (log.enabled('trace') ? 'trace' : 'debug') : 'info'}\n`);
    }
    case '/quitquitquit':
      if (req.method !== 'POST') return send(res, 405, 'Invalid HTTP method\n');
      send(res, 200, 'shutdown now\n');
      h.quit();
      return;
    case '/': return send(res, 200, 'config_dump\nconnections\nlogging\nquitquitquit\n');
    default: return send(res, 404, '');
  }
}

function statsRoute(h: AdminHandlers, req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/metrics' || path === '/stats/prometheus') return send(res, 200, h.metrics(), 'application/openmetrics-text; version=1.0.0; charset=utf-8');
  send(res, 404, '');
}

function readinessRoute(h: AdminHandlers, req: IncomingMessage, res: ServerResponse): void {
  if ((req.url ?? '/').split('?')[0] !== '/healthz/ready') return send(res, 404, '');
  if (req.method !== 'GET') return send(res, 405, '');
  const pending = [...h.pending()].sort();
  if (pending.length === 0) return send(res, 200, 'ready\n');
  send(res, 500, `not ready, pending: ${pending.join(', ')}\n`);
}

export interface StartedServers {
  readonly admin: Server;
  readonly stats: Server;
  readonly readiness: Server;
  readonly ports: { readonly admin: number; readonly stats: number; readonly readiness: number };
  close(): Promise<void>;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => { server.off('error', reject); resolve((server.address() as AddressInfo).port); });
  });
}

export async function startAdminServers(h: AdminHandlers, ports: { admin: number; stats: number; readiness: number }, host = '0.0.0.0', adminHost = '127.0.0.1'): Promise<StartedServers> {
  const admin = createServer((req, res) => adminRoute(h, req, res));
  const stats = createServer((req, res) => statsRoute(h, req, res));
  const readiness = createServer((req, res) => readinessRoute(h, req, res));
  const bound = {
    admin: await listen(admin, ports.admin, adminHost),
    stats: await listen(stats, ports.stats, host),
    readiness: await listen(readiness, ports.readiness, host),
  };
  const closeOne = (s: Server): Promise<void> => new Promise((r) => { s.close(() => r()); s.closeAllConnections(); });
  return { admin, stats, readiness, ports: bound, close: async () => { await Promise.all([closeOne(admin), closeOne(stats), closeOne(readiness)]); } };
}
