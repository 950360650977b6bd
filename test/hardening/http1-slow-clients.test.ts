// Clients that would hold a connection without ever completing a request (issue 9 items 6 and 7):
// heads that can never end get a prompt 400, slow heads hit request_headers_timeout (or the stream
// idle timeout, as in Envoy), a FIN in the middle of a body aborts the upstream request at once
// (Envoy: DC), and a client that never closes after `connection: close` loses the socket.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { cleanup, type RunningProxy } from '../lib/proxy.ts';
import { sleep } from '../lib/client.ts';
import { startRecordingBackend, type RecordingBackend } from './http1-backend.ts';
import { accessLog, assertAlive, logLine, probe, startSkua } from './http1-harness.ts';

const CLIENT_HELLO = Buffer.from('16030100c8010000c40303' + '00'.repeat(32) + '000002130101000099', 'hex');

async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<number> {
  const t0 = performance.now();
  while (!(await ok())) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
  return performance.now() - t0;
}

describe('HTTP/1.1 slow and broken clients', { timeout: 90_000 }, () => {
  let backend: RecordingBackend;
  let proxy: RunningProxy;
  /** request_headers_timeout: 1s */
  let headersProxy: RunningProxy;
  /** stream_idle_timeout: 1s, no request_headers_timeout */
  let idleProxy: RunningProxy;

  before(async () => {
    backend = await startRecordingBackend();
    proxy = await startSkua(backend.port);
    headersProxy = await startSkua(backend.port, { hcm: { request_headers_timeout: '1s' } });
    idleProxy = await startSkua(backend.port, { hcm: { stream_idle_timeout: '1s' } });
  });
  after(() => cleanup(() => proxy?.stop(), () => headersProxy?.stop(), () => idleProxy?.stop(), () => backend?.close()));

  const never: Array<[string, string | Buffer]> = [
    ['HTTP/0.9 request line', 'GET /\r\n'],
    ['bare LF line endings', 'GET / HTTP/1.1\nHost: h\n\n'],
    ['a TLS ClientHello', CLIENT_HELLO],
    ['a bare CR inside the head', 'GET / HTTP/1.1\r\nHost: h\rX: y\r\n'],
  ];
  for (const [name, bytes] of never) {
    test(`${name}: 400 at once, not a held connection`, async () => {
      const logs = accessLog(proxy).length;
      const r = await probe(proxy.ports.http, bytes, { timeoutMs: 8000 });
      assert.deepEqual(r.statuses, [400], JSON.stringify(r.raw));
      assert.equal(r.closed, true);
      assert.ok(r.ms < 3000, `answered after ${Math.round(r.ms)} ms`);
      const line = await logLine(proxy, logs, (l) => l.status === 400);
      assert.deepEqual([line.flags, line.details], ['DPE', 'http1.codec_error']);
    });
  }

  test('request_headers_timeout: a head that trickles in (a byte every 100 ms) gets 408 once it expires', async () => {
    const logs = accessLog(headersProxy).length;
    const head = 'GET /slow HTTP/1.1\r\nHost: h\r\nX-Padding: ' + 'a'.repeat(200) + '\r\n\r\n';
    const r = await probe(headersProxy.ports.http, '', { pieces: head.split(''), gapMs: 100, timeoutMs: 8000 });
    assert.deepEqual(r.statuses, [408]);
    assert.equal(r.closed, true);
    assert.ok(r.ms >= 900 && r.ms < 4000, `408 after ${Math.round(r.ms)} ms`);
    assert.equal(backend.targets('/slow').length, 0);
    const line = await logLine(headersProxy, logs, (l) => l.status === 408);
    assert.deepEqual([line.status, line.flags, line.details], [408, '-', 'request_header_timeout']);
  });

  test('100 connections holding 30 KiB partial heads: all get 408, every socket is released, the heap stays bounded', async () => {
    const partial = `GET /held HTTP/1.1\r\nHost: h\r\nX-Fill: ${'a'.repeat(30 * 1024)}`;
    const before = await assertAlive(headersProxy);
    const results = await Promise.all(Array.from({ length: 100 }, () => probe(headersProxy.ports.http, partial, { timeoutMs: 8000 })));
    assert.deepEqual([...new Set(results.map((r) => r.statuses.join(',')))], ['408']);
    assert.ok(results.every((r) => r.closed));
    await until('every connection to be released', async () => ((await headersProxy.stat('http.hardening.downstream_cx_active')) ?? -1) === 0);
    const afterHeld = await assertAlive(headersProxy);
    assert.ok(afterHeld.heapUsed - before.heapUsed < 32 << 20, `heap grew by ${afterHeld.heapUsed - before.heapUsed} bytes`);
  });

  test('stream_idle_timeout covers a stalled head when request_headers_timeout is not set (Envoy)', async () => {
    const logs = accessLog(idleProxy).length;
    const r = await probe(idleProxy.ports.http, 'GET /stalled HTTP/1.1\r\nHost: h\r\n', { timeoutMs: 8000 });
    assert.deepEqual(r.statuses, [408]);
    assert.equal(r.closed, true);
    assert.ok(r.ms < 4000, `408 after ${Math.round(r.ms)} ms`);
    const line = await logLine(idleProxy, logs, (l) => l.status === 408);
    assert.deepEqual([line.status, line.flags, line.details], [408, 'SI', 'stream_idle_timeout']);
  });

  test('a FIN in the middle of a request body aborts the upstream request at once and logs DC', async () => {
    backend.clear();
    const logs = accessLog(proxy).length;
    const s = connect({ port: proxy.ports.http, host: '127.0.0.1' });
    await new Promise((r) => s.once('connect', r));
    s.on('error', () => {});
    let downstreamClosed = false;
    s.on('close', () => { downstreamClosed = true; });
    s.resume();
    s.write('POST /hold HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n0123456789');
    await until('the request to reach the backend', () => backend.targets('/hold').length === 1);
    const aborted = backend.aborted;
    s.end();
    const ms = await until('the upstream request to be aborted', () => backend.aborted > aborted, 5000);
    assert.ok(ms < 2000, `aborted after ${Math.round(ms)} ms (the route timeout is 15 s)`);
    const line = await logLine(proxy, logs, (l) => l.path === '/hold');
    assert.equal(line.flags, 'DC');
    assert.equal(line.status, 0);
    await until('the downstream socket to close', () => downstreamClosed);
    await assertAlive(proxy);
  });

  test('a client that never closes after `connection: close` loses its socket about a second later', async () => {
    const active = async (): Promise<number> => (await proxy.stat('http.hardening.downstream_cx_active')) ?? -1;
    await until('no connections', async () => (await active()) === 0);
    const s = connect({ port: proxy.ports.http, host: '127.0.0.1', allowHalfOpen: true });
    s.on('error', () => {});
    await new Promise((r) => s.once('connect', r));
    let got = '';
    s.on('data', (d: Buffer) => { got += d.toString('latin1'); });
    s.write('GET /bye HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
    await until('the response', () => got.includes('"target":"/bye"'));
    assert.equal(await active(), 1, 'the client keeps its side open');
    const ms = await until('the proxy to drop the half-open connection', async () => (await active()) === 0, 5000);
    assert.ok(ms < 3000, `dropped after ${Math.round(ms)} ms`);
    s.destroy();
  });
});
