import type { OutgoingHttpHeaders } from 'node:http';
import type { ServerHttp2Stream, IncomingHttpHeaders as H2Headers } from 'node:http2';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { rawResponse } from './h1/server.ts';
import { serializeHeaders, type Head } from './h1/parse.ts';
import { H2Exchange, type Exchange, type Headers } from './exchange.ts';
import { complete, finishLocal, planForward, type RouterSettings } from './router.ts';
import { awaitUpgradeAnswer, relayRefusal } from './h1/upgrade-response.ts';
import { endAndLinger } from './h1/linger.ts';
import { RequestRecord } from './request-record.ts';
import { Flag, LocalBody, type ResponseFlag } from './response-flags.ts';
import { connectHost } from './tunnel.ts';
import { relay } from '../hbone/relay.ts';
import type { ConnInfo } from '../listener/conn-info.ts';
import type { ForwardAction } from './route-config.ts';
import { FilterChainRun } from './filter-chain.ts';

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
    if (endStream) endAndLinger(this.socket);
  }
  write(chunk: Buffer): boolean { return this.socket.write(chunk); }
  end(): void { endAndLinger(this.socket); }
  reset(): void { this.socket.destroy(); }
  watch(): void { /* replies are written in one go */ }
}

type Hcm = { settings: RouterSettings; config: { upgrades: ReadonlyMap<string, boolean>; h2AllowConnect: boolean } };

type Plan = NonNullable<ReturnType<typeof planForward>>;
type Admitted = { a: ForwardAction; terminate: boolean; plan: Plan };

/**
 * Route an Upgrade / CONNECT request, run the HCM's HTTP filters on it (connect_authority,
 * set_filter_state... record what the tunnel's upstream needs), then decide whether the upgrade
 * is allowed. `go` runs only when it is; every other outcome has answered locally.
 */
function admit(hcm: Hcm, ex: Exchange, rec: RequestRecord, kind: string, isConnect: boolean, go: (admitted: Admitted) => void): void {
  const s = hcm.settings;
  s.stats.rqTotal.value++;
  s.stats.rqActive.value++;
  const m = s.routes.route(ex.authority, ex, isConnect);
  const decide = (): void => {
    if (!m) { finishLocal(rec, s, 404, undefined, Flag.NoRouteFound, 'route_not_found'); return; }
    rec.routeName = m.route.name;
    const a = m.route.action;
    if (a.kind !== 'forward') { finishLocal(rec, s, a.status, a.kind === 'direct' ? a.body : undefined, Flag.None, a.kind); return; }
    const routeCfg = a.upgrades.get(kind);
    const enabled = routeCfg ? routeCfg.enabled : (hcm.config.upgrades.get(kind) ?? false);
    if (!enabled) { finishLocal(rec, s, 403, undefined, Flag.None, 'upgrade_failed'); return; }
    const plan = planForward(ex, s, rec, m.vhost, m.route, a);
    if (plan) go({ a, terminate: routeCfg?.terminateConnect ?? false, plan });
  };
  if (s.filters.length === 0) { decide(); return; }
  const run = new FilterChainRun(ex, rec, m?.route, m?.vhost, s.filters, s.routes, decide,
    (status, body, flag, details, headers) => finishLocal(rec, s, status, body, flag as ResponseFlag, details, headers as OutgoingHttpHeaders),
    () => { rec.flags = Flag.DownstreamConnectionTermination; complete(rec, s); });
  rec.filters = run;
  run.continueDecoding();
}

/**
 * Connects to the planned host; `onConnect` gets the upstream socket and `open`, which splices
 * the two connections (CONNECT opens at once, an Upgrade only after the upstream's 101).
 */
function tunnel(hcm: Hcm, ex: Exchange, rec: RequestRecord, downstream: Socket | ServerHttp2Stream, plan: Plan,
  onConnect: (upstream: Socket, open: () => void) => void): void {
  const s = hcm.settings;
  s.stats.upgradesTotal.inc();
  // Filter state the connection and the request share with the upstream reaches an internal listener.
  const upstream = connectHost(plan.cluster, plan.host, ex.conn.filterState, rec.filterState);
  let connected = false;
  upstream.once(plan.host.tls ? 'secureConnect' : 'connect', () => {
    connected = true;
    onConnect(upstream, () => relay(downstream, upstream, (up, down) => {
      rec.bytesReceived = up;
      rec.bytesSent += down;
      complete(rec, s);
    }));
  });
  upstream.on('error', () => {
    if (connected) return;
    connected = true;
    plan.cluster.stats.cxConnectFail.inc();
    finishLocal(rec, s, 503, LocalBody.connectFailure, Flag.UpstreamConnectionFailure, 'upstream_reset_before_response_started{connection_failure}');
  });
}

const RESET_BODY = { connection_termination: LocalBody.connectionTermination, protocol_error: LocalBody.protocolError } as const;
const RESET_FLAG = { connection_termination: Flag.UpstreamConnectionTermination, protocol_error: Flag.UpstreamProtocolError } as const;

/**
 * After the Upgrade request went upstream: a 101 opens the tunnel (the client's early bytes follow
 * it upstream); any other answer is relayed and both connections close; no answer within the route
 * timeout is a 504. Until then the client's socket stays paused.
 */
function awaitSwitch(hcm: Hcm, ex: RawH1Exchange, rec: RequestRecord, upstream: Socket, early: Buffer, timeoutMs: number, open: () => void): void {
  const s = hcm.settings;
  const downstream = ex.socket;
  let timer: NodeJS.Timeout | undefined;
  const onDownstreamClose = (): void => { clearTimeout(timer); stop(); upstream.destroy(); rec.flags = Flag.DownstreamConnectionTermination; complete(rec, s); };
  const settle = (): void => { clearTimeout(timer); downstream.off('close', onDownstreamClose); };
  const stop = awaitUpgradeAnswer(upstream, {
    switched(rawHead, rest) {
      settle();
      rec.status = 101;
      rec.details = 'via_upstream';
      rec.bytesSent = rawHead.length + rest.length;
      downstream.write(rawHead);
      if (rest.length) downstream.write(rest);
      if (early.length) upstream.write(early);
      open();
    },
    refused(head, rest) {
      settle();
      rec.status = head.status;
      rec.details = 'via_upstream';
      const noBody = ex.method === 'HEAD' || head.status === 204 || head.status === 304;
      relayRefusal(upstream, downstream, head, rest, noBody, (sent) => { rec.bytesSent = sent; complete(rec, s); });
    },
    failed(reason) {
      settle();
      upstream.destroy();
      finishLocal(rec, s, 503, RESET_BODY[reason], RESET_FLAG[reason], `upstream_reset_before_response_started{${reason}}`);
    },
  });
  downstream.once('close', onDownstreamClose);
  if (timeoutMs > 0) {
    timer = setTimeout(() => {
      settle();
      stop();
      upstream.destroy();
      finishLocal(rec, s, 504, LocalBody.timeout, Flag.UpstreamRequestTimeout, 'upstream_response_timeout');
    }, timeoutMs);
  }
}

/** HTTP/1.1 Upgrade (WebSocket and others): forward the request head; a 101 turns the connection into a tunnel. */
export function handleUpgrade(hcm: Hcm, req: Head, socket: Socket, head: Buffer, conn: ConnInfo): void {
  const ex = new RawH1Exchange(req, socket, conn);
  const kind = String(req.headers.upgrade ?? '').split(',')[0].trim().toLowerCase();
  const rec = new RequestRecord(ex, performance.now());
  const upgradeValue = req.headers.upgrade;
  admit(hcm, ex, rec, kind, false, ({ plan }) => tunnel(hcm, ex, rec, socket, plan, (upstream, open) => {
    const h = plan.headers;
    h.connection = 'upgrade';
    h.upgrade = upgradeValue;
    upstream.write(`${ex.method} ${plan.path} HTTP/1.1\r\n${serializeHeaders(h)}\r\n`);
    awaitSwitch(hcm, ex, rec, upstream, head, plan.timeoutMs, open);
  }));
}

/** HTTP/1.1 CONNECT: terminate (connect_config) → reply 200 and carry the payload; otherwise pass the CONNECT on. */
export function handleH1Connect(hcm: Hcm, req: Head, socket: Socket, head: Buffer, conn: ConnInfo): void {
  const ex = new RawH1Exchange(req, socket, conn);
  const rec = new RequestRecord(ex, performance.now());
  admit(hcm, ex, rec, 'connect', true, ({ plan, terminate }) => tunnel(hcm, ex, rec, socket, plan, (upstream, open) => {
    rec.status = 200;
    if (terminate) ex.respond(200, {}, false);
    else upstream.write(`CONNECT ${ex.authority} HTTP/1.1\r\n${serializeHeaders(plan.headers)}\r\n`);
    if (head.length) upstream.write(head);
    open();
  }));
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
  admit(hcm, ex, rec, 'connect', true, ({ plan }) => tunnel(hcm, ex, rec, stream, plan, (_upstream, open) => {
    rec.status = 200;
    stream.respond({ ':status': 200 });
    open();
  }));
}
