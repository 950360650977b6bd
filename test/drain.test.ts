// Graceful drain (defect 10): SIGTERM closes the listeners, lets requests in flight finish with all
// their bytes (HTTP/1 answers `connection: close`, HTTP/2 sends GOAWAY), exits 0 — at the latest
// after --drain-time-s. /drain_listeners?graceful and /healthcheck/fail ask connections to close.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { Agent } from 'node:http';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { patternDigest, startHttpBackend, type Backend } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';
import { simpleHttp } from './lib/config.ts';

const BYTES = 4 << 20;

/** Whether a TCP connect to the port is refused (the listening socket is gone). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(false); });
    s.once('error', () => resolve(true));
  });
}

async function waitRefused(port: number, ms = 3000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (await refused(port)) return true;
  return false;
}

/** The proxy exits with code 0 within `ms`. */
async function expectExit0(proxy: RunningProxy, ms: number, why: string): Promise<void> {
  const exit = await Promise.race([proxy.exited, sleep(ms).then(() => undefined)]);
  assert.ok(exit, why);
  assert.deepEqual(exit, { code: 0, signal: null });
}

/** Opens a stream: 'answered' if it gets a response, 'refused' if it errors or closes without one. */
function newStream(session: ClientHttp2Session): Promise<'answered' | 'refused'> {
  return new Promise((resolve) => {
    try {
      const s = session.request({ ':path': '/after-goaway' });
      s.once('response', () => { s.close(); resolve('answered'); });
      s.once('error', () => resolve('refused'));
      s.once('close', () => resolve('refused'));
    } catch {
      resolve('refused');
    }
  });
}

function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

describe('drain', { timeout: 120_000 }, () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend(); });
  after(() => cleanup(() => backend?.close()));

  test('SIGTERM: an HTTP/1.1 request in flight completes with all its bytes and connection: close; new connections are refused; exit 0', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--drain-time-s', '20'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const port = proxy.ports.http;
    const started = Date.now();
    const inFlight = request(`http://127.0.0.1:${port}/stream?bytes=${BYTES}&delay=1500`, { timeoutMs: 15_000 });
    await sleep(400);
    process.kill(proxy.pid, 'SIGTERM');
    assert.ok(await waitRefused(port), 'the listener still accepts after SIGTERM');
    const res = await inFlight;
    assert.equal(res.status, 200);
    assert.equal(res.body.length, BYTES, 'the response lost bytes');
    assert.equal(sha256(res.body), patternDigest(BYTES));
    assert.equal(res.headers.connection, 'close');
    assert.ok(Date.now() - started >= 1500, 'the response came before the backend answered');
    await expectExit0(proxy, 5000, 'still running 5 s after its last connection closed (drain time is 20 s)');
  });

  test('SIGTERM: an HTTP/2 stream in flight completes, the session gets GOAWAY and refuses new streams; exit 0', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--drain-time-s', '20'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const session: ClientHttp2Session = h2connect(`http://127.0.0.1:${proxy.ports.http}`);
    t.after(() => session.destroy());
    session.on('error', () => { /* the session ends with the proxy */ });
    const goaway = new Promise<number>((resolve) => session.once('goaway', (code: number) => resolve(code)));
    const stream = session.request({ ':path': `/stream?bytes=${BYTES}&delay=1500` });
    const body = new Promise<{ status: number; data: Buffer }>((resolve, reject) => {
      let status = 0;
      const chunks: Buffer[] = [];
      stream.on('response', (h) => { status = Number(h[':status']); });
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('end', () => resolve({ status, data: Buffer.concat(chunks) }));
      stream.on('error', reject);
    });
    await sleep(400);
    process.kill(proxy.pid, 'SIGTERM');
    assert.equal(await goaway, 0, 'GOAWAY with NO_ERROR');
    assert.equal(await newStream(session), 'refused', 'a new stream after GOAWAY was served');
    const r = await body;
    assert.equal(r.status, 200);
    assert.equal(r.data.length, BYTES, 'the stream lost bytes');
    assert.equal(sha256(r.data), patternDigest(BYTES));
    await expectExit0(proxy, 5000, 'still running 5 s after its last stream ended');
  });

  test('SIGTERM with only idle keep-alive connections open: they are closed and the process exits 0 at once', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--drain-time-s', '600'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const s = netConnect(proxy.ports.http, '127.0.0.1');
    t.after(() => s.destroy());
    const closed = new Promise<void>((resolve) => s.once('close', () => resolve()));
    s.on('error', () => { /* closed by the proxy */ });
    s.write('GET /idle HTTP/1.1\r\nHost: a\r\n\r\n');
    await new Promise((resolve) => s.once('data', resolve));
    process.kill(proxy.pid, 'SIGTERM');
    await closed;
    await expectExit0(proxy, 3000, 'an idle connection kept the process up');
  });

  test('SIGTERM: a request that outlives --drain-time-s is cut and the process still exits 0 in time', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--drain-time-s', '1'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const hung = request(`http://127.0.0.1:${proxy.ports.http}/slow?delay=30000`, { timeoutMs: 20_000 }).then(() => 'answered', () => 'cut');
    await sleep(300);
    const started = Date.now();
    process.kill(proxy.pid, 'SIGTERM');
    await expectExit0(proxy, 5000, 'still running 5 s after SIGTERM with --drain-time-s 1');
    assert.ok(Date.now() - started >= 900, 'exited before the drain time although a request was in flight');
    assert.equal(await hung, 'cut');
  });

  test('SIGTERM with --concurrency 2: every worker drains and the process exits 0', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--concurrency', '2', '--drain-time-s', '20'] });
    t.after(() => proxy.stop({ allowExited: true }));
    // Several connections, so both event loops (SO_REUSEPORT) are likely to hold one.
    const inFlight = Array.from({ length: 4 }, () => request(`http://127.0.0.1:${proxy.ports.http}/stream?bytes=65536&delay=1000`, { timeoutMs: 15_000 }));
    await sleep(300);
    process.kill(proxy.pid, 'SIGTERM');
    for (const r of await Promise.all(inFlight)) assert.equal(r.body.length, 65536);
    await expectExit0(proxy, 8000, 'still running 8 s after its last response');
  });

  test('/drain_listeners?graceful keeps accepting while responses ask clients to close, then stops accepting', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'], args: ['--drain-time-s', '2', '--drain-strategy', 'immediate'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const url = `http://127.0.0.1:${proxy.ports.http}/`;
    const agent = new Agent({ keepAlive: true });
    t.after(() => agent.destroy());
    assert.equal((await request(url, { agent })).headers.connection, undefined, 'HTTP/1.1 keep-alive has no connection header');
    assert.equal((await proxy.admin('/drain_listeners?graceful', 'POST')).status, 200);
    const during = await request(url, { agent });
    assert.equal(during.status, 200, 'the listener must still accept during the graceful period');
    assert.equal(during.headers.connection, 'close');
    assert.ok(await waitRefused(proxy.ports.http, 5000), 'the listener still accepts after the drain time');
  });

  test('/healthcheck/fail makes every response close its connection; /healthcheck/ok restores keep-alive', async (t) => {
    const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const url = `http://127.0.0.1:${proxy.ports.http}/`;
    const agent = new Agent({ keepAlive: true });
    t.after(() => agent.destroy());
    assert.equal((await request(url, { agent })).headers.connection, undefined, 'HTTP/1.1 keep-alive has no connection header');
    assert.equal((await proxy.admin('/healthcheck/fail', 'POST')).status, 200);
    assert.equal((await request(url, { agent })).headers.connection, 'close');
    assert.equal((await proxy.admin('/healthcheck/ok', 'POST')).status, 200);
    assert.equal((await request(url, { agent })).headers.connection, undefined, 'HTTP/1.1 keep-alive has no connection header');
  });
});
