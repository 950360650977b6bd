// Large bodies are streamed, not buffered: the proxy's RSS (VmRSS from /proc) stays far below the
// body size going up and going down, and a slow reader pushes back all the way to the backend.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { patternDigest, patternStream, startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request, sampleMax, sleep } from './lib/client.ts';
import { simpleHttp } from './lib/config.ts';

const MiB = 1024 * 1024;
/** Bigger than the RSS budget below, so a proxy that buffers whole bodies cannot pass. */
const BODY = 256 * MiB;
const RSS_BUDGET = 128 * MiB;

const mib = (n: number): string => `${(n / MiB).toFixed(1)} MiB`;

async function freshProxy(backend: Backend): Promise<RunningProxy> {
  const proxy = await startProxy((p) => simpleHttp(p('http'), backend.port, { routeExtra: { timeout: '0s' } }), { ports: ['http'] });
  // Warm up the code paths (and the upstream pool) before taking the baseline.
  for (let i = 0; i < 3; i++) await request(`http://127.0.0.1:${proxy.ports.http}/warm`, { method: 'POST', body: Buffer.alloc(256 * 1024) });
  return proxy;
}

function get(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false }, resolve);
    req.once('error', reject);
    req.end();
  });
}

describe('streaming large bodies', { timeout: 150_000 }, () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend(); patternDigest(BODY); });
  after(() => cleanup(() => backend?.close()));

  test(`${BODY / MiB} MiB request body up: intact, and proxy RSS grows by < ${RSS_BUDGET / MiB} MiB`, { timeout: 90_000 }, async (t) => {
    const proxy = await freshProxy(backend);
    t.after(() => proxy.stop());
    const baseline = proxy.rss();
    const rss = sampleMax(() => proxy.rss());
    const started = performance.now();
    const r = await request(`http://127.0.0.1:${proxy.ports.http}/upload`, {
      method: 'PUT', headers: { 'content-length': BODY }, body: patternStream(BODY), timeoutMs: 80_000,
    });
    const peak = rss.stop();
    const secs = (performance.now() - started) / 1000;
    t.diagnostic(`upload ${mib(BODY)} in ${secs.toFixed(2)} s; proxy RSS ${mib(baseline)} → peak ${mib(peak)} (+${mib(peak - baseline)})`);
    assert.equal(r.status, 200, r.text);
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.bodyBytes, BODY);
    assert.equal(echo.bodySha256, patternDigest(BODY));
    assert.ok(peak - baseline < RSS_BUDGET, `proxy RSS grew by ${mib(peak - baseline)} while streaming ${mib(BODY)}`);
  });

  test(`${BODY / MiB} MiB response body down: intact, and proxy RSS grows by < ${RSS_BUDGET / MiB} MiB`, { timeout: 90_000 }, async (t) => {
    const proxy = await freshProxy(backend);
    t.after(() => proxy.stop());
    const baseline = proxy.rss();
    const rss = sampleMax(() => proxy.rss());
    const started = performance.now();
    const res = await get(`http://127.0.0.1:${proxy.ports.http}/stream?bytes=${BODY}`);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-length'], String(BODY));
    const h = createHash('sha256');
    let n = 0;
    for await (const chunk of res as AsyncIterable<Buffer>) { n += chunk.length; h.update(chunk); }
    const peak = rss.stop();
    t.diagnostic(`download ${mib(BODY)} in ${((performance.now() - started) / 1000).toFixed(2)} s; proxy RSS ${mib(baseline)} → peak ${mib(peak)} (+${mib(peak - baseline)})`);
    assert.equal(n, BODY);
    assert.equal(h.digest('hex'), patternDigest(BODY));
    assert.ok(peak - baseline < RSS_BUDGET, `proxy RSS grew by ${mib(peak - baseline)} while streaming ${mib(BODY)}`);
  });

  test('slow reader: backpressure reaches the backend, proxy RSS stays flat, then the body drains intact', { timeout: 90_000 }, async (t) => {
    const total = 200 * MiB;
    const proxy = await freshProxy(backend);
    t.after(() => proxy.stop());
    const baseline = proxy.rss();
    const rss = sampleMax(() => proxy.rss());
    const res = await get(`http://127.0.0.1:${proxy.ports.http}/stream?bytes=${total}`);
    assert.equal(res.statusCode, 200);
    const h = createHash('sha256');
    let received = 0;
    let slow = true;
    const done = new Promise<void>((resolve, reject) => {
      res.on('data', (d: Buffer) => {
        received += d.length;
        h.update(d);
        if (slow) { res.pause(); setTimeout(() => res.resume(), 40); }
      });
      res.once('end', resolve);
      res.once('error', reject);
      res.once('aborted', () => reject(new Error('aborted')));
    });
    // Read slowly for 4 s (a few MB at most) while the backend could write 200 MiB in well under a second.
    await sleep(4000);
    const slowPeak = rss.max();
    const sentWhileSlow = backend.streamSent, receivedWhileSlow = received;
    t.diagnostic(`slow phase: client read ${mib(receivedWhileSlow)}, backend wrote ${mib(sentWhileSlow)}, proxy RSS ${mib(baseline)} → ${mib(slowPeak)}`);
    assert.ok(receivedWhileSlow < 50 * MiB, `the client was not slow (${mib(receivedWhileSlow)})`);
    assert.ok(sentWhileSlow - receivedWhileSlow < 48 * MiB,
      `backend wrote ${mib(sentWhileSlow)} but the client read only ${mib(receivedWhileSlow)}: the proxy is not propagating backpressure`);
    assert.ok(slowPeak - baseline < 64 * MiB, `proxy RSS grew by ${mib(slowPeak - baseline)} behind a slow reader`);
    slow = false;
    res.resume();
    await done;
    const peak = rss.stop();
    assert.equal(received, total);
    assert.equal(h.digest('hex'), patternDigest(total));
    assert.ok(peak - baseline < RSS_BUDGET, `proxy RSS grew by ${mib(peak - baseline)} while draining`);
  });
});
