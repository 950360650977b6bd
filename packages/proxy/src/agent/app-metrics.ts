/**
 * Metrics merging for the application (pilot-agent's ISTIO_PROMETHEUS_ANNOTATIONS, set by the
 * injector from the pod's prometheus.io/scrape|port|path annotations): 15020's
 * /stats/prometheus appends what the app serves on http://localhost:<port><path>.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { request } from '../core/node-http.ts';
import { ConfigError } from '../core/errors.ts';

export interface ScrapeTarget {
  readonly port: number;
  readonly path: string;
}

/** Ports the agent and proxy own: scraping them would loop or double-count. */
const RESERVED: Readonly<Record<number, string>> = {
  15000: 'Envoy admin', 15001: 'outbound traffic capture', 15004: 'pilot debug', 15006: 'inbound traffic capture', 15008: 'HBONE tunnel',
  15020: 'pilot-agent status / merged Prometheus', 15021: 'Envoy health', 15053: 'DNS proxy', 15090: 'Envoy Prometheus (already merged)',
};

const MAX_BODY = 10 * 1024 * 1024;

/** ISTIO_PROMETHEUS_ANNOTATIONS → the app's scrape targets ([] when unset or scrape "false"). */
export function parseScrapeConfig(text: string | undefined, statusPort: number): ScrapeTarget[] {
  if (text === undefined) return [];
  let cfg: { scrape?: string; path?: string; port?: string; targets?: Array<{ port?: string; path?: string }> };
  try { cfg = JSON.parse(text) as typeof cfg; } catch (e) { throw new ConfigError('ISTIO_PROMETHEUS_ANNOTATIONS', `failed to unmarshal: ${(e as Error).message}`); }
  if (cfg.scrape === 'false') return [];
  const raw = cfg.targets && cfg.targets.length ? cfg.targets : [{ port: cfg.port || '80', path: cfg.path || '/metrics' }];
  return raw.map((t, i) => {
    const port = Number(t.port);
    const where = `ISTIO_PROMETHEUS_ANNOTATIONS${cfg.targets?.length ? `.targets[${i}]` : ''}.port`;
    if (!/^\d+$/.test(String(t.port)) || port < 1 || port > 65535) throw new ConfigError(where, `invalid target port "${t.port}"`);
    if (port === statusPort) throw new ConfigError(where, `application port ${port} is the agent's status port, which would scrape itself in a loop`);
    if (RESERVED[port]) throw new ConfigError(where, `target port ${port} is reserved for Istio (${RESERVED[port]}) and cannot be scraped`);
    return { port, path: t.path || '/metrics' };
  });
}

/**
 * One app scrape: the body (at most 10 MiB) or undefined on any failure. The Prometheus
 * server's timeout header is honoured; the app is asked for the text format.
 */
export function scrapeApp(t: ScrapeTarget, incoming: IncomingHttpHeaders): Promise<string | undefined> {
  const timeoutSec = Number(incoming['x-prometheus-scrape-timeout-seconds']);
  const headers: Record<string, string> = { accept: 'text/plain;version=0.0.4;q=1,*/*;q=0.1' };
  if (typeof incoming['user-agent'] === 'string') headers['user-agent'] = incoming['user-agent'];
  if (Number.isFinite(timeoutSec) && timeoutSec > 0) headers['x-prometheus-scrape-timeout-seconds'] = String(timeoutSec);
  return new Promise((resolve) => {
    const req = request({ host: 'localhost', port: t.port, path: t.path, headers, agent: false }, (res) => {
      if (res.statusCode !== 200) { res.resume(); resolve(undefined); return; }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => { size += c.length; if (size > MAX_BODY) { req.destroy(); resolve(undefined); } else chunks.push(c); });
      res.on('end', () => resolve(size > MAX_BODY ? undefined : Buffer.concat(chunks).toString('utf8')));
      res.on('error', () => resolve(undefined));
    });
    req.setTimeout(Number.isFinite(timeoutSec) && timeoutSec > 0 ? timeoutSec * 1000 : 10_000, () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}
