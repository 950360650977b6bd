/**
 * pilot-agent's rewritten application probes: the injector moves each container's liveness /
 * readiness / startup probe to `/app-health/<container>/livez|readyz|startupz` on 15020 and
 * puts the original in ISTIO_KUBE_APP_PROBERS. The kubelet then probes the agent, which probes
 * the app the way the kubelet would have: HTTP GET, TCP connect or gRPC health check, to the
 * pod IP from 127.0.0.6 (::6) so the iptables capture lets it through to the app unchanged.
 */
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { request as httpRequest } from '../core/node-http.ts';
import { request as httpsRequest } from 'node:https';
import { connect as h2connect } from 'node:http2';
import { ConfigError } from '../core/errors.ts';

export interface AppProber {
  readonly kind: 'http' | 'tcp' | 'grpc';
  readonly port: number;
  readonly path: string;
  readonly https: boolean;
  /** gRPC health service name ('' = the server's overall health). */
  readonly service: string;
  readonly timeoutMs: number;
}

export interface ProbeResult {
  readonly status: number;
  readonly body: string;
}

const PROBER_PATH = /^\/(app-health|app-lifecycle)\/[^/]+\/(livez|readyz|startupz|prestopz|poststartz)$/;
const MAX_BODY = 10 * 1024;

function intPort(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535) throw new ConfigError(where, 'the port must be int type');
  return v;
}

/** ISTIO_KUBE_APP_PROBERS → probers by path; a bad entry stops the agent (as pilot-agent does). */
export function parseAppProbers(text: string): Map<string, AppProber> {
  const out = new Map<string, AppProber>();
  if (text === '') return out;
  let json: unknown;
  try { json = JSON.parse(text); } catch (e) { throw new ConfigError('ISTIO_KUBE_APP_PROBERS', `failed to decode app prober: ${(e as Error).message}`); }
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new ConfigError('ISTIO_KUBE_APP_PROBERS', 'expected a JSON object of path → prober');
  for (const [path, raw] of Object.entries(json as Record<string, Record<string, unknown>>)) {
    const where = `ISTIO_KUBE_APP_PROBERS.${path}`;
    if (!PROBER_PATH.test(path)) throw new ConfigError(where, `invalid path, must match ${PROBER_PATH.source}`);
    const kinds = (['httpGet', 'tcpSocket', 'grpc'] as const).filter((k) => raw?.[k] != null);
    if (kinds.length !== 1) throw new ConfigError(where, 'invalid prober type, must be one of type httpGet, tcpSocket or gRPC');
    const spec = raw[kinds[0]] as Record<string, unknown>;
    const timeoutSeconds = typeof raw.timeoutSeconds === 'number' && raw.timeoutSeconds > 0 ? raw.timeoutSeconds : 1;
    const timeoutMs = timeoutSeconds * 1000;
    if (kinds[0] === 'httpGet') {
      const p = typeof spec.path === 'string' ? spec.path : '/';
      out.set(path, { kind: 'http', port: intPort(spec.port, `${where}.httpGet.port`), path: p.startsWith('/') ? p : `/${p}`, https: spec.scheme === 'HTTPS', service: '', timeoutMs });
    } else if (kinds[0] === 'tcpSocket') {
      out.set(path, { kind: 'tcp', port: intPort(spec.port, `${where}.tcpSocket.port`), path: '', https: false, service: '', timeoutMs });
    } else {
      out.set(path, { kind: 'grpc', port: intPort(spec.port, `${where}.grpc.port`), path: '', https: false, service: typeof spec.service === 'string' ? spec.service : '', timeoutMs });
    }
  }
  return out;
}

/** Where probes go: the pod IP (kubelet's behaviour) and the source that skips capture. */
export interface ProbeTarget {
  readonly host: string;
  readonly localAddress: string | undefined;
}

export function probeTarget(podIp: string, legacyLocalhost: boolean): ProbeTarget {
  const v6 = isIP(podIp) === 6;
  if (legacyLocalhost || podIp === '') return { host: v6 ? '::1' : '127.0.0.1', localAddress: v6 ? '::6' : '127.0.0.6' };
  return { host: podIp, localAddress: v6 ? '::6' : '127.0.0.6' };
}

function connectFrom(t: ProbeTarget, port: number): Socket {
  return netConnect({ host: t.host, port, localAddress: t.localAddress });
}

export function probeTcp(t: ProbeTarget, p: AppProber): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const s = connectFrom(t, p.port);
    const timer = setTimeout(() => { s.destroy(); resolve({ status: 500, body: '' }); }, p.timeoutMs);
    s.once('connect', () => { clearTimeout(timer); s.destroy(); resolve({ status: 200, body: '' }); });
    s.once('error', () => { clearTimeout(timer); resolve({ status: 500, body: '' }); });
  });
}

function bracket(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * HTTP GET as the kubelet sends it, with the kubelet's headers (its Host, rewritten to the
 * app's port when it named the status port). Redirects on the same host are followed (10 at
 * most); a redirect elsewhere counts as success, like the kubelet's prober.
 */
export async function probeHttp(t: ProbeTarget, p: AppProber, headers: IncomingHttpHeaders, statusPort: number): Promise<ProbeResult> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && k !== 'connection' && k !== 'content-length') out[k] = v;
  const host = headers.host;
  if (host) {
    const m = /^(.*):(\d+)$/.exec(host);
    out.host = m && Number(m[2]) === statusPort ? `${m[1]}:${p.port}` : host;
  }
  let path = p.path;
  for (let hop = 0; hop <= 10; hop++) {
    const res = await new Promise<{ status: number; location: string | undefined; body: string } | undefined>((resolve) => {
      const req = (p.https ? httpsRequest : httpRequest)({
        host: t.host, port: p.port, path, method: 'GET', headers: out, localAddress: t.localAddress, rejectUnauthorized: false, agent: false,
      }, (r: IncomingMessage) => {
        let body = '';
        r.setEncoding('utf8');
        r.on('data', (c: string) => { if (body.length < MAX_BODY) body += c.slice(0, MAX_BODY - body.length); });
        r.on('end', () => resolve({ status: r.statusCode ?? 500, location: r.headers.location, body }));
        r.on('error', () => resolve(undefined));
      });
      req.setTimeout(p.timeoutMs, () => req.destroy(new Error('probe timeout')));
      req.on('error', () => resolve(undefined));
      req.end();
    });
    if (!res) return { status: 500, body: '' };
    if (res.status < 300 || res.status >= 400) return { status: res.status, body: res.body };
    if (!res.location || hop === 10) return { status: 200, body: '' };
    let next: URL;
    try { next = new URL(res.location, `http://${bracket(t.host)}:${p.port}${path}`); } catch { return { status: 200, body: '' }; }
    if (next.hostname.replace(/^\[|\]$/g, '') !== t.host) return { status: 200, body: '' };
    path = `${next.pathname}${next.search}`;
  }
  return { status: 200, body: '' };
}

/** grpc.health.v1.Health/Check over HTTP/2 (h2c): 200 when the service reports SERVING. */
export function probeGrpc(t: ProbeTarget, p: AppProber): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const svc = Buffer.from(p.service, 'utf8');
    // HealthCheckRequest { string service = 1; }
    const msg = svc.length ? Buffer.concat([Buffer.from([0x0a, svc.length]), svc]) : Buffer.alloc(0);
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]);
    let settled = false;
    const session = h2connect(`http://${bracket(t.host)}:${p.port}`, { createConnection: () => connectFrom(t, p.port) });
    const finish = (status: number): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      session.close();
      session.destroy();
      resolve({ status, body: '' });
    };
    const timer = setTimeout(() => finish(500), p.timeoutMs);
    session.on('error', () => finish(500));
    const stream = session.request({ ':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers' });
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => finish(500));
    stream.on('trailers', (trailers) => {
      const body = Buffer.concat(chunks);
      // HealthCheckResponse { ServingStatus status = 1; } — SERVING is 1.
      const serving = trailers['grpc-status'] === '0' && body.length >= 7 && body[5] === 0x08 && body[6] === 1;
      finish(serving ? 200 : 500);
    });
    stream.on('close', () => finish(500));
    stream.end(frame);
  });
}
