import { connect as h2connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { connectUpstreamTls } from '../tls/upstream-connect.ts';
import type { Duplex } from 'node:stream';
import type { Cluster } from './cluster.ts';
import type { Host } from './host.ts';
import { connectInternalHost } from './internal-upstream.ts';

const SESSION_KEY = 'h2-connect';

/** One HTTP/2 session per host carries many CONNECT tunnels (as Envoy's tcp_proxy tunneling does). */
class TunnelSession {
  readonly session: ClientHttp2Session;
  constructor(session: ClientHttp2Session) { this.session = session; }
  close(): void { this.session.close(); }
  get usable(): boolean { return !this.session.closed && !this.session.destroyed; }
}

function sessionFor(cluster: Cluster, host: Host): ClientHttp2Session {
  const pools = host.pools ?? (host.pools = new Map());
  const existing = pools.get(SESSION_KEY) as TunnelSession | undefined;
  if (existing?.usable) return existing.session;
  const tls = host.tls;
  const session = host.internal
    ? h2connect('http://internal', { createConnection: () => connectInternalHost(cluster, host, undefined), settings: { initialWindowSize: 4 << 20 }, maxSessionMemory: 64 })
    : tls
    ? h2connect(`https://${host.hostPort}`, {
      createConnection: () => connectUpstreamTls(tls, host.address, host.port, ['h2'], cluster.stats.ssl),
      settings: { initialWindowSize: 4 << 20 }, maxSessionMemory: 64,
    })
    : h2connect(`http://${host.hostPort}`, { settings: { initialWindowSize: 4 << 20 }, maxSessionMemory: 64 });
  cluster.stats.cxTotal.inc();
  cluster.stats.cxActive.inc();
  session.once('connect', () => session.setLocalWindowSize(16 << 20));
  session.once('close', () => { cluster.stats.cxActive.dec(); if (pools.get(SESSION_KEY) === entry) pools.delete(SESSION_KEY); });
  session.on('error', () => { /* reported on each stream */ });
  const entry = new TunnelSession(session);
  pools.set(SESSION_KEY, entry);
  return session;
}

/** Opens `CONNECT authority` on the host's HTTP/2 session; `onUp` gets the stream once a 2xx arrives. */
export function openConnectTunnel(cluster: Cluster, host: Host, authority: string, headers: Readonly<Record<string, string | string[] | undefined>>,
  onUp: (stream: Duplex, response: Readonly<Record<string, unknown>>) => void, onFail: (err: Error) => void): void {
  const req: Record<string, string | string[]> = { ':method': 'CONNECT', ':authority': authority };
  for (const k in headers) { const v = headers[k]; if (v !== undefined) req[k] = v; }
  let stream: ClientHttp2Stream;
  try {
    stream = sessionFor(cluster, host).request(req, { endStream: false });
  } catch (err) {
    onFail(err as Error);
    return;
  }
  let settled = false;
  stream.once('response', (h) => {
    const status = Number(h[':status']);
    settled = true;
    if (status >= 200 && status < 300) onUp(stream, h);
    else { stream.close(); onFail(new Error(`CONNECT answered ${status}`)); }
  });
  stream.once('error', (err) => { if (!settled) { settled = true; onFail(err); } });
  stream.once('close', () => { if (!settled) { settled = true; onFail(new Error(`tunnel closed (code ${stream.rstCode})`)); } });
}
