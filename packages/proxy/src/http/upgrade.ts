import type { OutgoingHttpHeaders } from 'node:http';
import type { ServerHttp2Stream, IncomingHttpHeaders as H2Headers } from 'node:http2';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { rawResponse } from './h1/server.ts';
import { serializeHeaders, type Head } from './h1/parse.ts';
import { H2Exchange, type Exchange, type Headers } from './exchange.ts';
import { complete, finishLocal, planForward, type RouterSettings } from './router.ts';
import { RequestRecord } from './request-record.ts';
import { Flag, LocalBody } from './response-flags.ts';
import { connectHost, splice } from './tunnel.ts';
import type { ConnInfo } from '../listener/conn-info.ts';
import type { ForwardAction } from './route-config.ts';

/** An HTTP/1.1 request taken over from node's parser (Upgrade, CONNECT): replies are written raw. */
class RawH1Exchange implements Exchange {
  readonly protocol = 'HTTP/1.1' as const;
  readonly method: string;
  readonly path: string;
  readonly authority: string;
  readonly scheme: string;
  readonly headers: Headers;
  readonly hasBody = false;
  readonly conn: ConnInfo;
  readonly socket: Socket;
  headersSent = false;

  constructor(head: Head, socket: Socket, conn: ConnInfo) {
    this.method = head.method;
    this.path = head.target;
    this.headers = head.headers;
    this.authority = head.method === 'CONNECT' ? head.target : ((head.headers.host as string | undefined) ?? '');
    this.scheme = conn.tls ? 'https' : 'http';
    this.conn = conn;
    this.socket = socket;
  }

  /** The payload after the head travels raw through the tunnel, never as a request body. */
  get body(): Readable { return Readable.from([]); }

  respond(status: number, headers: OutgoingHttpHeaders, endStream: boolean): void {
    this.headersSent = true;
    this.socket.write(rawResponse(status, headers));
    if (endStream) this.socket.end();
  }
  write(chunk: Buffer): boolean { return this.socket.write(chunk); }
  end(): void { this.socket.end(); }
  reset(): void { this.socket.destroy(); }
  watch(): void { /* replies are written in one go */ }
}

type Hcm = { settings: RouterSettings; config: { upgrades: ReadonlyMap<string, boolean>; h2AllowConnect: boolean } };

/** Route an Upgrade / CONNECT request and decide whether the upgrade is allowed; undefined after a local reply. */
function admit(hcm: Hcm, ex: Exchange, rec: RequestRecord, kind: string, isConnect: boolean): { a: ForwardAction; terminate: boolean; plan: NonNullable<ReturnType<typeof planForward>> } | undefined {
  const s = hcm.settings;
  s.stats.rqTotal.value++;
  s.stats.rqActive.value++;
  const m = s.routes.route(ex.authority, ex, isConnect);
  if (!m) { finishLocal(rec, s, 404, undefined, Flag.NoRouteFound, 'route_not_found'); return undefined; }
  rec.routeName = m.route.name;
  const a = m.route.action;
  if (a.kind !== 'forward') { finishLocal(rec, s, a.kind === 'direct' ? a.status : a.status, a.kind === 'direct' ? a.body : undefined, Flag.None, a.kind); return undefined; }
  const routeCfg = a.upgrades.get(kind);
  const enabled = routeCfg ? routeCfg.enabled : (hcm.config.upgrades.get(kind) ?? false);
  if (!enabled) { finishLocal(rec, s, 403, undefined, Flag.None, 'upgrade_failed'); return undefined; }
  const plan = planForward(ex, s, rec, m.vhost, m.route, a);
  if (!plan) return undefined;
  return { a, terminate: routeCfg?.terminateConnect ?? false, plan };
}

function tunnel(hcm: Hcm, ex: Exchange, rec: RequestRecord, downstream: Socket | ServerHttp2Stream, plan: NonNullable<ReturnType<typeof planForward>>, onConnect: (upstream: Socket) => void): void {
  const s = hcm.settings;
  s.stats.upgradesTotal.inc();
  const upstream = connectHost(plan.cluster, plan.host);
  let connected = false;
  upstream.once(plan.host.tls ? 'secureConnect' : 'connect', () => {
    connected = true;
    onConnect(upstream);
    splice(downstream, upstream, (up, down) => {
      rec.bytesReceived = up;
      rec.bytesSent += down;
      complete(rec, s);
    });
  });
  upstream.once('error', () => {
    if (connected) return;
    plan.cluster.stats.cxConnectFail.inc();
    finishLocal(rec, s, 503, LocalBody.connectFailure, Flag.UpstreamConnectionFailure, 'upstream_reset_before_response_started{connection_failure}');
  });
}

/** HTTP/1.1 Upgrade (WebSocket and others): forward the request head, then splice bytes both ways. */
export function handleUpgrade(hcm: Hcm, req: Head, socket: Socket, head: Buffer, conn: ConnInfo): void {
  const ex = new RawH1Exchange(req, socket, conn);
  const kind = String(req.headers.upgrade ?? '').split(',')[0].trim().toLowerCase();
  const rec = new RequestRecord(ex, performance.now());
  const upgradeValue = req.headers.upgrade;
  const admitted = admit(hcm, ex, rec, kind, false);
  if (!admitted) return;
  const { plan } = admitted;
  tunnel(hcm, ex, rec, socket, plan, (upstream) => {
    const h = plan.headers;
    h.connection = 'upgrade';
    h.upgrade = upgradeValue;
    upstream.write(`${ex.method} ${plan.path} HTTP/1.1\r\n${serializeHeaders(h)}\r\n`);
    if (head.length) upstream.write(head);
    rec.status = 101;
  });
}

/** HTTP/1.1 CONNECT: terminate (connect_config) → reply 200 and carry the payload; otherwise pass the CONNECT on. */
export function handleH1Connect(hcm: Hcm, req: Head, socket: Socket, head: Buffer, conn: ConnInfo): void {
  const ex = new RawH1Exchange(req, socket, conn);
  const rec = new RequestRecord(ex, performance.now());
  const admitted = admit(hcm, ex, rec, 'connect', true);
  if (!admitted) return;
  const { plan, terminate } = admitted;
  tunnel(hcm, ex, rec, socket, plan, (upstream) => {
    rec.status = 200;
    if (terminate) ex.respond(200, {}, false);
    else upstream.write(`CONNECT ${ex.authority} HTTP/1.1\r\n${serializeHeaders(plan.headers)}\r\n`);
    if (head.length) upstream.write(head);
  });
}

/** HTTP/2 CONNECT (allow_connect): the stream becomes the tunnel to a host of the route's cluster. */
export function handleH2Connect(hcm: Hcm, stream: ServerHttp2Stream, headers: H2Headers, conn: ConnInfo): void {
  const ex = new H2Exchange(stream, headers, false, conn);
  const rec = new RequestRecord(ex, performance.now());
  if (!hcm.config.h2AllowConnect) {
    hcm.settings.stats.rqTotal.value++;
    hcm.settings.stats.rqActive.value++;
    finishLocal(rec, hcm.settings, 403, undefined, Flag.None, 'upgrade_failed');
    return;
  }
  const admitted = admit(hcm, ex, rec, 'connect', true);
  if (!admitted) return;
  tunnel(hcm, ex, rec, stream, admitted.plan, () => {
    rec.status = 200;
    stream.respond({ ':status': 200 });
  });
}
