// pilot-agent's end of life (`skua-proxy proxy sidecar`, issue 12 item 2), against a real gRPC
// ADS server: SIGTERM drains the INBOUND listeners (they keep accepting; HTTP/1 answers carry
// `connection: close`, HTTP/2 sessions get GOAWAY), leaves the OUTBOUND ones alone, turns
// readiness to 503 and exits 0 after terminationDrainDuration; EXIT_ON_ZERO_ACTIVE_CONNECTIONS
// waits MINIMUM_DRAIN_DURATION, then exits as the last connection closes; POST /quitquitquit
// (local only) ends a job's proxy at once; POST /drain drains without exiting. Envoy's
// /drain_listeners reaches every worker thread.
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { Agent as HttpAgent } from 'node:http';
import { networkInterfaces } from 'node:os';
import { cleanup, freePort, startProxy } from './lib/proxy.ts';
import { patternDigest, startHttpBackend, type Backend } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';
import { simpleHttp } from './lib/config.ts';
import { startTestAds, type TestAds } from './lib/ads-server.ts';
import { exitWithin, startAgent, type RunningAgent } from './lib/agent.ts';
import { xdsCluster, xdsHttpListener } from './lib/agent-config.ts';
import { TYPE_URL } from '@skua/proxy/xds';

const BYTES = 1 << 20;
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/**
 * A request on a new keep-alive connection: node sends `connection: close` on agent-less requests,
 * which any server echoes, so only a keep-alive request shows whether the proxy asked to close.
 */
async function onNewConnection(url: string, opts: { timeoutMs?: number } = {}): ReturnType<typeof request> {
  const keepAlive = new HttpAgent({ keepAlive: true });
  try { return await request(url, { agent: keepAlive, ...opts }); } finally { keepAlive.destroy(); }
}

/** A non-loopback address of this machine (to check the local-only endpoints), if any. */
function outsideAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

/** POST from a given local address (node's fetch cannot choose one). */
async function postFrom(localAddress: string, host: string, port: number, path: string): Promise<number> {
  const { request: httpRequest } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host, port, path, method: 'POST', localAddress, agent: false }, (res) => { res.resume(); res.once('end', () => resolve(res.statusCode ?? 0)); });
    req.once('error', reject);
    req.end();
  });
}

describe('pilot-agent lifecycle: SIGTERM, EXIT_ON_ZERO_ACTIVE_CONNECTIONS, /quitquitquit, /drain', { timeout: 180_000 }, () => {
  let backend: Backend;
  let ads: TestAds;
  let inPort: number, outPort: number;
  const agents: RunningAgent[] = [];

  before(async () => {
    backend = await startHttpBackend('app');
    [inPort, outPort] = [await freePort(), await freePort()];
    ads = await startTestAds();
    ads.set(TYPE_URL.cluster, [xdsCluster('app', backend.port)]);
    ads.set(TYPE_URL.listener, [
      xdsHttpListener('inbound', inPort, 'app', { direction: 'INBOUND' }),
      xdsHttpListener('outbound', outPort, 'app', { direction: 'OUTBOUND' }),
    ]);
  });
  after(() => cleanup(...agents.map((a) => () => a.stop(500)), () => ads?.close(), () => backend?.close()));

  /** A sidecar agent on the shared listener ports; stopped when the test ends (the next one binds them). */
  async function agent(t: TestContext, o: { proxyConfig?: Record<string, unknown>; env?: Record<string, string>; concurrency?: number } = {}): Promise<RunningAgent> {
    const a = await startAgent({ xdsPort: ads.port, ...o });
    agents.push(a);
    t.after(() => a.stop(500));
    await a.ready();
    return a;
  }

  test('SIGTERM: inbound keeps accepting and answers with connection: close, outbound keeps alive, readiness 503, in-flight bytes intact; exit 0 after terminationDrainDuration (2 workers)', async (t) => {
    const a = await agent(t, { proxyConfig: { terminationDrainDuration: '3s' }, concurrency: 2 });
    const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.equal((await request(`http://127.0.0.1:${outPort}/before`, { agent: keepAlive })).headers.connection, undefined);
      const inFlight = request(`http://127.0.0.1:${inPort}/stream?bytes=${BYTES}&delay=1500`, { timeoutMs: 15_000 });
      await sleep(300);
      const t0 = Date.now();
      process.kill(a.pid, 'SIGTERM');
      await sleep(300);
      const ready = await fetch(`http://127.0.0.1:${a.ports.envoyStatus}/healthz/ready`);
      assert.equal(ready.status, 503);
      assert.equal(await ready.text(), 'server is not live, current state is: DRAINING');
      // New inbound connections are still taken (the endpoint may not be gone from every client yet),
      // on both worker threads, and each is asked to close.
      for (let i = 0; i < 8; i++) {
        const r = await onNewConnection(`http://127.0.0.1:${inPort}/during-drain-${i}`);
        assert.equal(r.status, 200);
        assert.equal(r.headers.connection, 'close', `inbound response ${i} during the drain`);
      }
      // The app's own outbound calls carry on over their keep-alive connection.
      const out = await request(`http://127.0.0.1:${outPort}/during-drain`, { agent: keepAlive });
      assert.equal(out.status, 200);
      assert.equal(out.headers.connection, undefined, 'outbound listeners are not drained');
      const r = await inFlight;
      assert.equal(r.body.length, BYTES, 'the in-flight response lost bytes');
      assert.equal(sha256(r.body), patternDigest(BYTES));
      assert.equal(await exitWithin(a, 3000 - (Date.now() - t0) - 300), undefined, 'exited before terminationDrainDuration');
      assert.deepEqual(await exitWithin(a, 5000), { code: 0, signal: null });
      assert.ok(Date.now() - t0 >= 2900, `exited ${Date.now() - t0} ms after SIGTERM`);
    } finally {
      keepAlive.destroy();
    }
  });

  test('SIGTERM: an HTTP/2 session on an inbound listener finishes its stream and gets GOAWAY', async (t) => {
    const a = await agent(t, { proxyConfig: { terminationDrainDuration: '2s' } });
    const session: ClientHttp2Session = h2connect(`http://127.0.0.1:${inPort}`);
    try {
      session.on('error', () => { /* ends with the proxy */ });
      const goaway = new Promise<number>((resolve) => session.once('goaway', (code: number) => resolve(code)));
      const stream = session.request({ ':path': `/stream?bytes=${BYTES}&delay=1000` });
      const body = new Promise<Buffer>((resolve, reject) => {
        const chunks: Buffer[] = [];
        stream.on('data', (d: Buffer) => chunks.push(d));
        stream.on('end', () => resolve(Buffer.concat(chunks)));
        stream.on('error', reject);
      });
      await sleep(300);
      process.kill(a.pid, 'SIGTERM');
      assert.equal(await goaway, 0, 'GOAWAY with NO_ERROR');
      const data = await body;
      assert.equal(data.length, BYTES);
      assert.equal(sha256(data), patternDigest(BYTES));
      assert.deepEqual(await exitWithin(a, 6000), { code: 0, signal: null });
    } finally {
      session.destroy();
    }
  });

  test('EXIT_ON_ZERO_ACTIVE_CONNECTIONS: terminationDrainDuration is ignored; the proxy waits MINIMUM_DRAIN_DURATION, then exits once the last connection closed', async (t) => {
    const a = await agent(t, { proxyConfig: { terminationDrainDuration: '60s' }, env: { EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true', MINIMUM_DRAIN_DURATION: '1s' } });
    const slow = onNewConnection(`http://127.0.0.1:${inPort}/stream?bytes=${BYTES}&delay=3500`, { timeoutMs: 20_000 });
    await sleep(300);
    const t0 = Date.now();
    process.kill(a.pid, 'SIGTERM');
    assert.equal(await exitWithin(a, 2500), undefined, 'exited while a request was in flight');
    const r = await slow;
    const answered = Date.now();
    assert.equal(r.body.length, BYTES);
    assert.equal(sha256(r.body), patternDigest(BYTES));
    assert.equal(r.headers.connection, 'close');
    assert.deepEqual(await exitWithin(a, 4000), { code: 0, signal: null }, 'still running after its last connection closed');
    assert.ok(Date.now() - answered < 4000 && Date.now() - t0 < 10_000);
  });

  test('EXIT_ON_ZERO_ACTIVE_CONNECTIONS with no connection: exits after MINIMUM_DRAIN_DURATION, not before', async (t) => {
    const a = await agent(t, { proxyConfig: { terminationDrainDuration: '60s' }, env: { EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true', MINIMUM_DRAIN_DURATION: '1500ms' } });
    const t0 = Date.now();
    process.kill(a.pid, 'SIGTERM');
    assert.equal(await exitWithin(a, 1200), undefined, 'exited before MINIMUM_DRAIN_DURATION');
    assert.deepEqual(await exitWithin(a, 5000), { code: 0, signal: null });
    assert.ok(Date.now() - t0 >= 1400);
  });

  test('POST /quitquitquit (localhost) ends a job\'s proxy at once with exit 0; GET is 405, another address 403', async (t) => {
    const a = await agent(t, { proxyConfig: { terminationDrainDuration: '60s' } });
    assert.equal((await a.status('/quitquitquit')).status, 405);
    const outside = outsideAddress();
    if (outside) assert.equal(await postFrom(outside, outside, a.ports.status, '/quitquitquit'), 403, `POST from ${outside}`);
    assert.equal(await exitWithin(a, 300), undefined);
    const res = await a.status('/quitquitquit', 'POST');
    assert.deepEqual(res, { status: 200, body: 'OK' });
    assert.deepEqual(await exitWithin(a, 3000), { code: 0, signal: null }, 'still running 3 s after /quitquitquit (no drain wait for a job)');
  });

  test('POST /drain: inbound answers close their connection, readiness 503, the proxy keeps running', async (t) => {
    const a = await agent(t);
    assert.equal((await onNewConnection(`http://127.0.0.1:${inPort}/`)).headers.connection, undefined);
    assert.deepEqual(await a.status('/drain', 'POST'), { status: 200, body: 'OK' });
    assert.equal((await onNewConnection(`http://127.0.0.1:${inPort}/`)).headers.connection, 'close');
    assert.equal((await fetch(`http://127.0.0.1:${a.ports.envoyStatus}/healthz/ready`)).status, 503);
    assert.equal(await exitWithin(a, 1500), undefined, '/drain must not end the process');
  });

  test('a second SIGTERM while draining ends the process at once', async (t) => {
    const a = await agent(t, { proxyConfig: { terminationDrainDuration: '60s' } });
    process.kill(a.pid, 'SIGTERM');
    assert.equal(await exitWithin(a, 500), undefined);
    process.kill(a.pid, 'SIGTERM');
    assert.deepEqual(await exitWithin(a, 3000), { code: 0, signal: null });
  });

  test('Envoy\'s /drain_listeners?graceful with --concurrency 2 reaches the worker threads\' listeners', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--concurrency', '2', '--drain-time-s', '30', '--drain-strategy', 'immediate'] });
    t.after(() => proxy.stop({ allowExited: true }));
    assert.equal((await proxy.admin('/drain_listeners?graceful', 'POST')).status, 200);
    // New connections land on either thread (SO_REUSEPORT): every answer must ask to close.
    for (let i = 0; i < 12; i++) assert.equal((await onNewConnection(`http://127.0.0.1:${proxy.ports.http}/c${i}`)).headers.connection, 'close', `connection ${i}`);
  });
});
