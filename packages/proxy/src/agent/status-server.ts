/**
 * The agent's status port (ProxyConfig.statusPort, 15020), as pilot-agent serves it:
 *  - `/healthz/ready`: what the 15021 readiness listener routes to and what the kubelet probes.
 *    Ready once the first CDS and LDS from istiod were applied and the proxy went LIVE with its
 *    listeners warmed (readiness.ts); not ready while draining;
 *  - `/stats/prometheus` (and `/metrics`): the agent's own metrics, then the proxy's (what 15090
 *    serves), then the application's when ISTIO_PROMETHEUS_ANNOTATIONS asks for them;
 *  - `/app-health/<container>/livez|readyz|startupz` (and `/app-lifecycle/...`): the rewritten
 *    kubelet probes from ISTIO_KUBE_APP_PROBERS, sent on to the app;
 *  - `/debug/ndsz`: the DNS name table (localhost only);
 *  - POST `/quitquitquit` (localhost only): exit without draining, for a job whose work is done;
 *    POST `/drain` (localhost only): start draining the inbound listeners and keep running.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../core/node-http.ts';
import type { ProxyServer } from '../server.ts';
import { renderPrometheus } from '../stats/prometheus.ts';
import { probeGrpc, probeHttp, probeTcp, type AppProber, type ProbeResult, type ProbeTarget } from './app-probers.ts';
import { scrapeApp, type ScrapeTarget } from './app-metrics.ts';
import type { AgentMetrics } from './agent-metrics.ts';
import { canonicalIp } from '../core/canonical-ip.ts';
import { ReadinessProbe, type ReadinessSource } from './readiness.ts';

export interface ProxySource extends ReadinessSource {
  collectStats: ProxyServer['collectStats'];
}

/** The agent's lifecycle hooks behind /quitquitquit and /drain. */
export interface LifecycleHooks {
  readonly draining: boolean;
  quit(): void;
  drain(): void;
}

export interface StatusServerOptions {
  readonly port: number;
  /** Listen address ('' = all interfaces, as pilot-agent does). */
  readonly host?: string;
  readonly proxy: () => ProxySource | undefined;
  readonly lifecycle?: LifecycleHooks;
  readonly probers?: ReadonlyMap<string, AppProber>;
  readonly probeTarget?: ProbeTarget;
  readonly scrapeTargets?: readonly ScrapeTarget[];
  readonly metrics?: AgentMetrics;
  /** The last NDS table, for /debug/ndsz. */
  readonly nameTable?: () => unknown;
}

const TEXT_FORMAT = 'text/plain; version=0.0.4; charset=utf-8';

function isLocal(req: IncomingMessage): boolean {
  const a = canonicalIp(req.socket.remoteAddress ?? '');
  return a === '127.0.0.1' || a === '::1';
}

async function mergedStats(o: StatusServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  o.metrics?.scrapes.inc();
  const app = o.scrapeTargets?.length ? Promise.all(o.scrapeTargets.map((t) => scrapeApp(t, req.headers))) : Promise.resolve([]);
  const p = o.proxy();
  let envoy = '';
  if (p) {
    try { envoy = renderPrometheus(await p.collectStats()); } catch { o.metrics?.scrapeFailures.inc({ type: 'envoy' }); }
  } else o.metrics?.scrapeFailures.inc({ type: 'envoy' });
  const bodies: string[] = [];
  for (const body of await app) {
    if (body === undefined) { o.metrics?.scrapeFailures.inc({ type: 'application' }); continue; }
    // An OpenMetrics body's end marker would end the merged exposition early.
    bodies.push(body.replace(/#\s*EOF\s*$/, ''));
  }
  // The agent's own metrics last to be collected (they count this scrape's failures), first in the output.
  let agent = '';
  try { if (o.metrics) agent = await o.metrics.render(); } catch { /* the rest is still worth serving */ }
  res.writeHead(200, { 'content-type': TEXT_FORMAT });
  res.end([agent, envoy, ...bodies].map((s) => (s === '' || s.endsWith('\n') ? s : `${s}\n`)).join(''));
}

async function appProbe(o: StatusServerOptions, path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const prober = o.probers?.get(path);
  if (!prober || !o.probeTarget) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(`app prober config does not exists for ${path}`);
    return;
  }
  let r: ProbeResult;
  if (prober.kind === 'http') r = await probeHttp(o.probeTarget, prober, req.headers, o.port);
  else if (prober.kind === 'tcp') r = await probeTcp(o.probeTarget, prober);
  else r = await probeGrpc(o.probeTarget, prober);
  res.writeHead(r.status).end(r.body);
}

/** POST-only, localhost-only lifecycle endpoints (pilot-agent checks the address first). */
function lifecycleRequest(req: IncomingMessage, res: ServerResponse, action: (() => void) | undefined): void {
  if (!isLocal(req)) { res.writeHead(403, { 'content-type': 'text/plain' }).end('Only requests from localhost are allowed\n'); return; }
  if (req.method !== 'POST') { res.writeHead(405, { 'content-type': 'text/plain' }).end('Method Not Allowed\n'); return; }
  if (!action) { res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n'); return; }
  // Answer first: the action may end the process.
  res.once('finish', action);
  res.writeHead(200, { 'content-type': 'text/plain' }).end('OK');
}

export function startStatusServer(o: StatusServerOptions): Promise<Server> {
  const probe = new ReadinessProbe();
  const srv = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz/ready') {
      const r = probe.check(o.proxy(), o.lifecycle?.draining ?? false);
      res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(r.reason);
      return;
    }
    if (path === '/quitquitquit') { lifecycleRequest(req, res, o.lifecycle && (() => o.lifecycle?.quit())); return; }
    if (path === '/drain') { lifecycleRequest(req, res, o.lifecycle && (() => o.lifecycle?.drain())); return; }
    if (path === '/stats/prometheus' || path === '/metrics') {
      mergedStats(o, req, res).catch((err: Error) => { if (!res.headersSent) res.writeHead(500); res.end(err.message); });
      return;
    }
    if (path.startsWith('/app-health/') || path.startsWith('/app-lifecycle/')) {
      appProbe(o, path, req, res).catch(() => { if (!res.headersSent) res.writeHead(500); res.end(); });
      return;
    }
    if (path === '/debug/ndsz') {
      if (!isLocal(req)) { res.writeHead(403).end('Only requests from localhost are allowed\n'); return; }
      const t = o.nameTable?.();
      res.writeHead(t ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(t ?? {}));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    const done = (): void => { srv.off('error', reject); resolve(srv); };
    if (o.host) srv.listen(o.port, o.host, done); else srv.listen(o.port, done);
  });
}
