/**
 * The agent's status port (ProxyConfig.statusPort, 15020): `/healthz/ready` is what the
 * 15021 readiness listener routes to and what the kubelet probes. Ready means the proxy is
 * LIVE, which (initial_fetch_timeout 0s) it only becomes after the first CDS and LDS from
 * istiod were applied — pilot-agent's "config received from XDS server" check.
 * `/stats/prometheus` serves the proxy's metrics (the agent's merge of app metrics is not done).
 */
import { createServer, type Server } from 'node:http';
import type { ProxyServer } from '../server.ts';
import { renderPrometheus } from '../stats/prometheus.ts';

export interface ReadinessSource {
  readonly state: string;
  collectStats: ProxyServer['collectStats'];
}

export function readiness(server: ReadinessSource | undefined): { ready: boolean; reason: string } {
  if (!server) return { ready: false, reason: 'proxy not started' };
  if (server.state === 'LIVE') return { ready: true, reason: '' };
  if (server.state === 'DRAINING') return { ready: false, reason: 'server is draining' };
  return { ready: false, reason: `config not received from XDS server (is Istiod running?): server state ${server.state}` };
}

export function startStatusServer(port: number, proxy: () => ReadinessSource | undefined): Promise<Server> {
  const srv = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz/ready') {
      const r = readiness(proxy());
      res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(r.reason);
      return;
    }
    if (path === '/stats/prometheus') {
      const p = proxy();
      if (!p) { res.writeHead(503).end(); return; }
      p.collectStats().then((store) => {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(renderPrometheus(store));
      }, (err: Error) => { res.writeHead(500).end(err.message); });
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, () => { srv.off('error', reject); resolve(srv); });
  });
}
