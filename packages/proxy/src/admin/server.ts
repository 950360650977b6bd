import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../core/node-http.ts';
import type { ProxyServer } from '../server.ts';
import { configDump } from './config-dump.ts';
import { clustersJson, clustersText } from './clusters.ts';
import { renderJson, renderPrometheus, renderText } from '../stats/prometheus.ts';
import { adminLogging } from '../core/log.ts';

type Handler = (server: ProxyServer, q: URLSearchParams, req: IncomingMessage) => { status?: number; type?: string; body: string } | Promise<{ status?: number; type?: string; body: string }>;

const json = (v: unknown): { type: string; body: string } => ({ type: 'application/json', body: JSON.stringify(v, null, 2) + '\n' });
const text = (body: string, status = 200): { status: number; type: string; body: string } => ({ status, type: 'text/plain; charset=UTF-8', body });

function filterOf(q: URLSearchParams): RegExp | undefined {
  const f = q.get('filter');
  return f ? new RegExp(f) : undefined;
}

/** Mutating endpoints need POST, as in Envoy. */
const POST_ONLY = new Set(['/quitquitquit', '/drain_listeners', '/logging', '/healthcheck/fail', '/healthcheck/ok', '/reset_counters']);

const ROUTES: Record<string, Handler> = {
  '/ready': (s) => (s.state === 'LIVE' ? text('LIVE\n') : text(`${s.state}\n`, 503)),
  '/server_info': (s) => json(s.serverInfo()),
  '/config_dump': (s, q) => json(configDump(s, q.get('resource') ?? undefined, q.has('include_eds'))),
  '/clusters': async (s, q) => {
    const others = await s.collectHostCounts();
    return q.get('format') === 'json' ? json(clustersJson(s, others)) : text(clustersText(s, others));
  },
  '/listeners': (s, q) => (q.get('format') === 'json'
    ? json({ listener_statuses: s.listenerStatuses().map((l) => ({ name: l.name, local_address: { socket_address: { address: l.address, port_value: l.port } } })) })
    : text(s.listenerStatuses().map((l) => `${l.name}::${l.address}:${l.port}`).join('\n') + '\n')),
  '/stats': async (s, q) => {
    const stats = await s.collectStats();
    if (q.get('format') === 'json') return { type: 'application/json', body: renderJson(stats, filterOf(q)) };
    if (q.get('format') === 'prometheus') return { type: 'text/plain; version=0.0.4; charset=utf-8', body: renderPrometheus(stats) };
    return text(renderText(stats, filterOf(q)));
  },
  '/stats/prometheus': async (s) => ({ type: 'text/plain; version=0.0.4; charset=utf-8', body: renderPrometheus(await s.collectStats()) }),
  '/logging': (_s, q) => { const r = adminLogging(q); return text(r.body, r.status); },
  '/quitquitquit': (s) => { setImmediate(() => s.shutdown(0)); return text('OK\n'); },
  '/drain_listeners': (s, q) => { s.drainListeners(q.has('inboundonly'), q.has('graceful')); return text('OK\n'); },
  '/healthcheck/fail': (s) => { s.healthFailed = true; return text('OK\n'); },
  '/healthcheck/ok': (s) => { s.healthFailed = false; return text('OK\n'); },
  '/memory': () => json({ allocated: String(process.memoryUsage().heapUsed), heap_size: String(process.memoryUsage().heapTotal), rss: String(process.memoryUsage().rss) }),
  '/help': () => text(Object.keys(ROUTES).map((p) => `  ${p}`).join('\n') + '\n'),
};

/** Envoy's admin interface on the bootstrap's admin address. */
export function startAdmin(server: ProxyServer, host: string, port: number): Promise<Server> {
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://admin');
    const handler = ROUTES[url.pathname];
    const reply = (r: { status?: number; type?: string; body: string }): void => {
      res.writeHead(r.status ?? 200, { 'content-type': r.type ?? 'text/plain', 'cache-control': 'no-cache, max-age=0', 'x-content-type-options': 'nosniff' });
      res.end(req.method === 'HEAD' ? undefined : r.body);
    };
    if (!handler) return reply(text(`invalid path. admin commands are:\n${Object.keys(ROUTES).join('\n')}\n`, 404));
    if (POST_ONLY.has(url.pathname) && req.method !== 'POST') return reply(text('This endpoint requires POST\n', 405));
    try {
      void Promise.resolve(handler(server, url.searchParams, req)).then(reply, (err: Error) => reply(text(`${err.message}\n`, 500)));
    } catch (err) {
      reply(text(`${(err as Error).message}\n`, 400));
    }
  });
  return new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen({ host, port }, () => resolve(http));
  });
}
