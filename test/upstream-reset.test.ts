// Upstream resets: before the response headers the client gets Envoy's 503 local reply; after a
// partial body the downstream response is cut short. Either way the proxy keeps serving.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect } from 'node:http2';
import { request as httpRequest } from 'node:http';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { parseAccessLog, request } from './lib/client.ts';
import { simpleHttp } from './lib/config.ts';

const RESET_BODY = /^upstream connect error or disconnect\/reset before headers\. reset reason: (connection termination|remote reset)$/;

/** Reads a response to the end or to its abort; reports what arrived. */
function fetchPartial(url: string): Promise<{ status: number; declared: number; received: number; aborted: boolean }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { req.destroy(); reject(new Error('no end and no abort within 10 s')); }, 10_000);
    const req = httpRequest(url, { agent: false }, (res) => {
      let received = 0, settled = false;
      const settle = (aborted: boolean): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, declared: Number(res.headers['content-length'] ?? -1), received, aborted });
      };
      res.on('data', (d: Buffer) => { received += d.length; });
      res.once('end', () => settle(res.readableAborted || !res.complete));
      res.once('aborted', () => settle(true));
      res.once('error', () => settle(true));
      res.once('close', () => settle(!res.complete));
    });
    req.once('error', (e) => { clearTimeout(timer); reject(e); });
    req.end();
  });
}

describe('upstream resets', { timeout: 60_000 }, () => {
  let backend: Backend;
  let proxy: RunningProxy;
  let base: string;

  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => simpleHttp(p('http'), backend.port, { accessLog: true }), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('reset before headers → 503 with the reset body (UC/UR), proxy alive', async () => {
    const r = await request(`${base}/reset?when=headers`, { headers: { 'x-request-id': 'reset-before-headers' } });
    assert.equal(r.status, 503);
    assert.match(r.text, RESET_BODY);
    assert.equal(r.headers.server, 'envoy');
    assert.equal(r.headers['content-type'], 'text/plain');
    const line = parseAccessLog(await proxy.waitForStdout(/reset-before-headers/));
    assert.ok(line, 'access log line in the default format');
    assert.equal(line.status, 503);
    assert.match(line.flags, /^(UC|UR)$/);
    assert.equal(line.upstreamHost, `127.0.0.1:${backend.port}`);
    const next = await request(`${base}/after-reset`);
    assert.equal(next.status, 200);
    assert.equal((JSON.parse(next.text) as EchoReply).url, '/after-reset');
  });

  test('reset after part of the body → the HTTP/1.1 client sees a truncated, aborted response', async () => {
    const n = 256 * 1024;
    const r = await fetchPartial(`${base}/reset?when=body&bytes=${n}`);
    assert.equal(r.status, 200);
    assert.equal(r.declared, 2 * n);
    assert.ok(r.received < r.declared, `received ${r.received} of ${r.declared}`);
    assert.ok(r.received >= 0);
    assert.equal(r.aborted, true, 'the downstream connection must be reset, not ended cleanly');
    const next = await request(`${base}/after-partial`);
    assert.equal(next.status, 200);
  });

  test('reset after part of the body → the HTTP/2 client sees the stream reset, the session survives', async () => {
    const session = h2connect(base);
    try {
      const outcome = await new Promise<{ status: number; received: number; error: string }>((resolve) => {
        const st = session.request({ ':path': '/reset?when=body&bytes=65536' });
        let status = 0, received = 0;
        const timer = setTimeout(() => resolve({ status, received, error: 'timeout' }), 10_000);
        st.on('response', (h) => { status = Number(h[':status']); });
        st.on('data', (d: Buffer) => { received += d.length; });
        st.once('error', (e: Error) => { clearTimeout(timer); resolve({ status, received, error: e.message }); });
        st.once('close', () => { clearTimeout(timer); resolve({ status, received, error: st.rstCode ? `rst ${st.rstCode}` : 'clean end' }); });
      });
      assert.equal(outcome.status, 200);
      assert.ok(outcome.received < 2 * 65536);
      assert.notEqual(outcome.error, 'clean end', 'a truncated body must not end cleanly');
      assert.notEqual(outcome.error, 'timeout');
      const again = await new Promise<number>((resolve, reject) => {
        const st = session.request({ ':path': '/h2-after-reset' });
        st.on('response', (h) => resolve(Number(h[':status'])));
        st.once('error', reject);
        st.resume();
      });
      assert.equal(again, 200);
    } finally {
      session.close();
    }
  });

  test('many resets in a row do not leak or kill the proxy', async () => {
    const before5xx = (await proxy.stat('http.ingress_http.downstream_rq_5xx')) ?? 0;
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => request(`${base}/reset?when=headers&i=${i}`)));
    for (const r of results) assert.equal(r.status, 503);
    assert.doesNotThrow(() => process.kill(proxy.pid, 0), 'the proxy process is gone');
    assert.equal((await proxy.admin('/ready')).status, 200);
    const ok = await request(`${base}/still-alive`);
    assert.equal(ok.status, 200);
    assert.equal(((await proxy.stat('http.ingress_http.downstream_rq_5xx')) ?? 0) - before5xx, 30);
    assert.equal((await proxy.stat('http.ingress_http.downstream_rq_active')) ?? 0, 0, 'no request left active');
  });
});
