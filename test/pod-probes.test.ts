// 15020 as pilot-agent serves it, against a real app: a kubelet-like prober calls the rewritten
// `/app-health/<container>/livez|readyz|startupz` paths and gets the app's real health through
// HTTP (status, body, kubelet headers, same-host redirects), TCP and gRPC (a grpc-js server
// implementing grpc.health.v1) probes sent from 127.0.0.6; and `/stats/prometheus` merges the
// agent's own metrics (prom-client: process + Node runtime), the proxy's and the app's, which
// promtool accepts (as it does 15090).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, get as httpGet, type Server as HttpServer } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Server as GrpcServer, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js';
import { cleanup, freePort, proxyMain } from './lib/proxy.ts';
import { startTestAds, type TestAds } from './lib/ads-server.ts';
import { TYPE_URL } from '../packages/proxy/src/api/xds.ts';

const PROMTOOL = '/usr/bin/promtool';
// Envoy's exposition style (no HELP, no _total on some counters): the lints the proxy's own output has.
const EXPECTED_LINT = /no help text|should have "_total" suffix|should not have "_total" suffix|abbreviated units|base unit/;

interface App {
  http: HttpServer; tcp: TcpServer | undefined; grpc: GrpcServer;
  httpPort: number; tcpPort: number; grpcPort: number;
  healthy: boolean; serving: number; seen: Array<{ path: string; from: string; headers: Record<string, unknown> }>;
}

async function startApp(): Promise<App> {
  const app = { healthy: true, serving: 1, seen: [] } as unknown as App;
  app.http = createHttpServer((req, res) => {
    app.seen.push({ path: req.url ?? '', from: req.socket.remoteAddress ?? '', headers: req.headers });
    if (req.url === '/healthz') { res.writeHead(app.healthy ? 200 : 503).end(app.healthy ? 'ok' : 'database unreachable'); return; }
    if (req.url === '/old-health') { res.writeHead(301, { location: '/healthz' }).end(); return; }
    if (req.url === '/elsewhere') { res.writeHead(302, { location: 'http://example.invalid/x' }).end(); return; }
    if (req.url === '/metrics') { res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end('# HELP app_orders_total Orders taken.\n# TYPE app_orders_total counter\napp_orders_total{shop="main"} 42\n'); return; }
    res.writeHead(404).end();
  });
  app.httpPort = await freePort();
  await new Promise<void>((r) => app.http.listen(app.httpPort, '127.0.0.1', () => r()));
  app.tcpPort = await freePort();
  app.tcp = createTcpServer((s) => s.end());
  await new Promise<void>((r) => app.tcp!.listen(app.tcpPort, '127.0.0.1', () => r()));
  // grpc.health.v1.Health/Check with raw protobuf bytes: request { service = 1 }, response { status = 1 }.
  app.grpc = new GrpcServer();
  const raw = (b: Buffer): Buffer => b;
  app.grpc.addService({
    Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw },
  }, {
    Check: (call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => {
      const service = call.request.length > 2 ? call.request.subarray(2).toString() : '';
      app.seen.push({ path: `grpc:${service}`, from: call.getPeer(), headers: {} });
      if (service === 'unknown') { cb({ code: 5, details: 'unknown service' }); return; }
      cb(null, Buffer.from([0x08, app.serving]));
    },
  });
  app.grpcPort = await freePort();
  await new Promise<void>((resolve, reject) => app.grpc.bindAsync(`127.0.0.1:${app.grpcPort}`, ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  return app;
}

interface Agent { child: ChildProcess; dir: string; status: number; prom: number; stderr(): string; exited: Promise<number | null> }

function startAgent(env: Record<string, string>, ads: number, ports: { status: number; prom: number; es: number; admin: number }): Agent {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-pod-probes-'));
  const child = spawn(process.execPath, [proxyMain, 'proxy', 'sidecar', '--concurrency', '1'], {
    cwd: dir, stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', POD_NAME: 'shop-1', POD_NAMESPACE: 'default', INSTANCE_IP: '127.0.0.1', SERVICE_ACCOUNT: 'shop', JWT_POLICY: 'none',
      ENVOY_STATUS_PORT: String(ports.es), ENVOY_PROMETHEUS_PORT: String(ports.prom),
      PROXY_CONFIG: JSON.stringify({ discoveryAddress: `127.0.0.1:${ads}`, controlPlaneAuthPolicy: 'NONE', proxyAdminPort: ports.admin, statusPort: ports.status }),
      ...env,
    },
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, dir, status: ports.status, prom: ports.prom, stderr: () => err, exited };
}

async function stopAgent(a: Agent | undefined): Promise<void> {
  if (!a) return;
  if (a.child.exitCode === null && a.child.signalCode === null) { a.child.kill('SIGKILL'); await a.exited; }
  rmSync(a.dir, { recursive: true, force: true });
}

/** What the kubelet sends: GET with its user agent and the probe's httpHeaders, Host = podIP:15020. */
function kubeletProbe(port: number, p: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpGet({ host: '127.0.0.1', port, path: p, agent: false, headers: { 'user-agent': 'kube-probe/1.31', accept: '*/*', ...headers }, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

describe('15020: rewritten app probes and merged metrics', () => {
  let app: App;
  let ads: TestAds;
  let agent: Agent;

  before(async () => {
    app = await startApp();
    ads = await startTestAds();
    ads.set(TYPE_URL.cluster, []);
    ads.set(TYPE_URL.listener, []);
    const probers = {
      '/app-health/shop/livez': { httpGet: { path: '/healthz', port: app.httpPort, scheme: 'HTTP' }, timeoutSeconds: 2 },
      '/app-health/shop/readyz': { tcpSocket: { port: app.tcpPort }, timeoutSeconds: 1 },
      '/app-health/shop/startupz': { grpc: { port: app.grpcPort, service: null }, timeoutSeconds: 2 },
      '/app-health/billing/livez': { grpc: { port: app.grpcPort, service: 'unknown' }, timeoutSeconds: 2 },
      '/app-health/legacy/livez': { httpGet: { path: 'old-health', port: app.httpPort }, timeoutSeconds: 2 },
      '/app-health/redirect/livez': { httpGet: { path: '/elsewhere', port: app.httpPort }, timeoutSeconds: 2 },
    };
    const ports = { status: await freePort(), prom: await freePort(), es: await freePort(), admin: await freePort() };
    agent = startAgent({
      ISTIO_KUBE_APP_PROBERS: JSON.stringify(probers),
      ISTIO_PROMETHEUS_ANNOTATIONS: JSON.stringify({ scrape: 'true', port: String(app.httpPort), path: '/metrics' }),
    }, ads.port, ports);
    // A loaded machine (the full suite, other work) can take a while to start a Node process.
    await ads.waitFor(async () => (await fetch(`http://127.0.0.1:${ports.es}/healthz/ready`).catch(() => undefined))?.status === 200, 'the agent to be ready', 60_000)
      .catch((e: Error) => { throw new Error(`${e.message}\nagent stderr:\n${agent.stderr()}`); });
  });
  after(() => cleanup(() => stopAgent(agent), () => ads?.close(), () => new Promise((r) => app?.http.close(r)), () => app?.tcp?.close(), () => app?.grpc.forceShutdown()));

  test('HTTP probe: the app\'s own status and body, from 127.0.0.6, with the kubelet\'s headers and the app port in Host', async () => {
    app.healthy = true;
    assert.deepEqual(await kubeletProbe(agent.status, '/app-health/shop/livez', { 'x-probe': 'liveness', host: `10.1.0.5:${agent.status}` }), { status: 200, body: 'ok' });
    const seen = app.seen.filter((s) => s.path === '/healthz').at(-1)!;
    assert.equal(seen.from, '127.0.0.6', 'probes leave from 127.0.0.6 so the capture lets them through');
    assert.equal(seen.headers['user-agent'], 'kube-probe/1.31');
    assert.equal(seen.headers['x-probe'], 'liveness');
    assert.equal(seen.headers.host, `10.1.0.5:${app.httpPort}`);
    app.healthy = false;
    assert.deepEqual(await kubeletProbe(agent.status, '/app-health/shop/livez'), { status: 503, body: 'database unreachable' });
    app.healthy = true;
    // A same-host redirect is followed; a redirect elsewhere counts as success (the kubelet's rules).
    assert.equal((await kubeletProbe(agent.status, '/app-health/legacy/livez')).status, 200);
    app.healthy = false;
    assert.equal((await kubeletProbe(agent.status, '/app-health/legacy/livez')).status, 503);
    app.healthy = true;
    assert.equal((await kubeletProbe(agent.status, '/app-health/redirect/livez')).status, 200);
  });

  test('TCP probe: 200 while the app listens, 500 once it stopped', async () => {
    assert.equal((await kubeletProbe(agent.status, '/app-health/shop/readyz')).status, 200);
    await new Promise((r) => app.tcp!.close(r));
    app.tcp = undefined;
    assert.equal((await kubeletProbe(agent.status, '/app-health/shop/readyz')).status, 500);
  });

  test('gRPC probe: SERVING → 200, NOT_SERVING → 500, an unknown service → 500', async () => {
    app.serving = 1;
    assert.equal((await kubeletProbe(agent.status, '/app-health/shop/startupz')).status, 200);
    assert.ok(app.seen.some((s) => s.path === 'grpc:' && s.from.startsWith('127.0.0.6:')), 'the gRPC check came from 127.0.0.6');
    app.serving = 2;
    assert.equal((await kubeletProbe(agent.status, '/app-health/shop/startupz')).status, 500);
    assert.equal((await kubeletProbe(agent.status, '/app-health/billing/livez')).status, 500);
    app.serving = 1;
  });

  test('an unknown probe path gets 400 naming it', async () => {
    assert.deepEqual(await kubeletProbe(agent.status, '/app-health/nosuch/livez'), { status: 400, body: 'app prober config does not exists for /app-health/nosuch/livez' });
  });

  test('/stats/prometheus merges the agent (process, Node runtime), the proxy and the app; promtool accepts it and 15090', async () => {
    const text = await (await fetch(`http://127.0.0.1:${agent.status}/stats/prometheus`)).text();
    assert.match(text, /^istio_agent_process_cpu_user_seconds_total \d/m);
    assert.match(text, /^istio_agent_nodejs_eventloop_lag_seconds /m);
    assert.match(text, /^istio_agent_scrapes_total [1-9]/m);
    assert.match(text, /^envoy_cluster_manager_active_clusters\{?.*\}? \d+$/m);
    assert.match(text, /^app_orders_total\{shop="main"\} 42$/m);
    assert.ok(text.indexOf('istio_agent_') < text.indexOf('envoy_') && text.indexOf('envoy_') < text.indexOf('app_orders_total'), 'agent, then proxy, then app');
    if (!existsSync(PROMTOOL)) return;
    for (const [what, body] of [['15020', text], ['15090', await (await fetch(`http://127.0.0.1:${agent.prom}/stats/prometheus`)).text()]] as const) {
      const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: body, encoding: 'utf8', timeout: 30_000 });
      assert.notEqual(r.status, 1, `${what}: ${r.stdout}${r.stderr}`);
      const problems = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l && !EXPECTED_LINT.test(l) && !/^app_|^istio_agent_/.test(l));
      assert.deepEqual(problems, [], what);
      // The agent's and the app's own families are lint-clean (HELP text, _total counters).
      assert.deepEqual(`${r.stdout}${r.stderr}`.split('\n').filter((l) => /^(istio_agent_|app_)/.test(l)), [], what);
    }
  });

  test('the app down: the rest is still served and the failure is counted', async () => {
    await new Promise((r) => app.http.close(r));
    app.http.closeAllConnections();
    const text = await (await fetch(`http://127.0.0.1:${agent.status}/stats/prometheus`)).text();
    assert.doesNotMatch(text, /app_orders_total/);
    assert.match(text, /^envoy_cluster_manager_active_clusters/m);
    assert.match(text, /^istio_agent_scrape_failures_total\{type="application"\} [1-9]/m);
  });
});

describe('15020 settings are checked at start', () => {
  for (const [name, env, message] of [
    ['a probe path outside /app-health', { ISTIO_KUBE_APP_PROBERS: JSON.stringify({ '/healthz': { tcpSocket: { port: 80 } } }) }, /ISTIO_KUBE_APP_PROBERS\.\/healthz: invalid path/],
    ['two probe kinds at once', { ISTIO_KUBE_APP_PROBERS: JSON.stringify({ '/app-health/a/livez': { tcpSocket: { port: 80 }, httpGet: { port: 80 } } }) }, /must be one of type httpGet, tcpSocket or gRPC/],
    ['a named port', { ISTIO_KUBE_APP_PROBERS: JSON.stringify({ '/app-health/a/livez': { httpGet: { port: 'http' } } }) }, /httpGet\.port: the port must be int type/],
    ['scraping a reserved port', { ISTIO_PROMETHEUS_ANNOTATIONS: '{"scrape":"true","port":"15090"}' }, /ISTIO_PROMETHEUS_ANNOTATIONS\.port: target port 15090 is reserved/],
  ] as const) {
    test(`refused: ${name}`, async () => {
      const ports = { status: await freePort(), prom: await freePort(), es: await freePort(), admin: await freePort() };
      const a = startAgent(env, await freePort(), ports);
      try {
        const code = await Promise.race([a.exited, new Promise((r) => setTimeout(() => r('still running'), 30_000))]);
        assert.equal(code, 1, a.stderr());
        assert.match(a.stderr(), message);
      } finally { await stopAgent(a); }
    });
  }
});
