// HTTP/2 through skua-proxy: h2c prior knowledge (h2load, node:http2), multiplexing, and protocol
// translation in both directions (H2 → H1 upstream, H1 → H2 upstream).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { patternDigest, patternStream, startH2cBackend, startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request, run } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

interface H2Result { status: number; headers: IncomingHttpHeaders; body: Buffer }

function h2request(session: ClientHttp2Session, path: string, opts: { method?: string; body?: NodeJS.ReadableStream; timeoutMs?: number } = {}): Promise<H2Result> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': opts.method ?? 'GET', ':path': path }, { endStream: !opts.body });
    const timer = setTimeout(() => { stream.close(); reject(new Error(`h2 ${path} timed out`)); }, opts.timeoutMs ?? 10_000);
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.once('response', (h) => { headers = h; });
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.once('end', () => { clearTimeout(timer); resolve({ status: Number(headers[':status']), headers, body: Buffer.concat(chunks) }); });
    stream.once('error', (e) => { clearTimeout(timer); reject(e); });
    opts.body?.pipe(stream);
  });
}

function h2session(port: number): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = connect(`http://127.0.0.1:${port}`);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

describe('HTTP/2 downstream (h2c) to an HTTP/1.1 upstream', { timeout: 90_000 }, () => {
  let backend: Backend;
  let proxy: RunningProxy;

  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([routeTo('backend')])], { statPrefix: 'h2in' }))])],
      [cluster('backend', [backend.port])],
    ), { ports: ['http'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('h2load -n 2000 -c 2 -m 20 (prior knowledge): every request succeeds', async () => {
    const r = await run('h2load', ['-n', '2000', '-c', '2', '-m', '20', `http://127.0.0.1:${proxy.ports.http}/h2load`], 60_000);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(r.stdout);
    assert.ok(req, r.stdout);
    assert.deepEqual(req.slice(1, 7).map(Number), [2000, 2000, 2000, 2000, 0, 0], r.stdout);
    assert.match(r.stdout, /status codes: 2000 2xx/);
    assert.match(r.stdout, /Application protocol: h2c/);
    assert.ok(((await proxy.stat('http.h2in.downstream_rq_http2_total')) ?? 0) >= 2000);
    assert.ok(((await proxy.stat('http.h2in.downstream_cx_http2_total')) ?? 0) >= 2);
    assert.equal(backend.requests.filter((x) => x.url === '/h2load').every((x) => x.httpVersion === '1.1'), true);
  });

  test('node:http2: 50 concurrent streams on one session are served concurrently', async () => {
    const cxBefore = (await proxy.stat('http.h2in.downstream_cx_total')) ?? 0;
    const session = await h2session(proxy.ports.http);
    try {
      const started = performance.now();
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => h2request(session, `/mux?delay=300&i=${i}`)));
      const elapsed = performance.now() - started;
      results.forEach((r, i) => {
        assert.equal(r.status, 200);
        assert.equal(r.headers.server, 'envoy');
        const echo = JSON.parse(r.body.toString()) as EchoReply;
        assert.equal(echo.url, `/mux?delay=300&i=${i}`);
        assert.equal(echo.httpVersion, '1.1');
        assert.equal(echo.headers.host, `127.0.0.1:${proxy.ports.http}`);
      });
      // Serialised, 50 × 300 ms would take 15 s.
      assert.ok(elapsed < 4000, `50 streams took ${Math.round(elapsed)} ms`);
      assert.equal(((await proxy.stat('http.h2in.downstream_cx_total')) ?? 0) - cxBefore, 1);
    } finally {
      session.close();
    }
  });

  test('an HTTP/2 request body is forwarded intact', async () => {
    const session = await h2session(proxy.ports.http);
    try {
      const size = 5 * 1024 * 1024 + 3;
      const r = await h2request(session, '/upload', { method: 'POST', body: patternStream(size), timeoutMs: 10_000 });
      assert.equal(r.status, 200);
      const echo = JSON.parse(r.body.toString()) as EchoReply;
      assert.equal(echo.method, 'POST');
      assert.equal(echo.bodyBytes, size);
      assert.equal(echo.bodySha256, patternDigest(size));
    } finally {
      session.close();
    }
  });
});

describe('HTTP/1.1 downstream to an HTTP/2 upstream (explicit http2_protocol_options)', { timeout: 60_000 }, () => {
  let h2: Backend;
  let proxy: RunningProxy;

  before(async () => {
    h2 = await startH2cBackend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([routeTo('h2backend')])]))])],
      [cluster('h2backend', [h2.port], { http2: true })],
    ), { ports: ['http'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => h2?.close()));

  test('requests reach the backend as HTTP/2 with :authority, multiplexed on one upstream connection', async () => {
    const base = `http://127.0.0.1:${proxy.ports.http}`;
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => request(`${base}/up/${i}?delay=100`, { headers: { 'x-i': String(i) } })));
    results.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      const echo = JSON.parse(r.text) as EchoReply;
      assert.equal(echo.httpVersion, '2.0');
      assert.equal(echo.headers[':authority'], `127.0.0.1:${proxy.ports.http}`);
      assert.equal(echo.headers[':path'], `/up/${i}?delay=100`);
      assert.equal(echo.headers['x-i'], String(i));
      assert.equal(echo.headers.connection, undefined);
    });
    assert.equal(h2.connections, 1, 'HTTP/2 upstream requests should share one connection');
  });

  test('a request body and a streamed response survive H1 → H2 translation', async () => {
    const base = `http://127.0.0.1:${proxy.ports.http}`;
    const size = 4 * 1024 * 1024 + 1;
    const up = await request(`${base}/upload`, { method: 'POST', headers: { 'content-length': size }, body: patternStream(size), timeoutMs: 20_000 });
    const echo = JSON.parse(up.text) as EchoReply;
    assert.equal(echo.bodyBytes, size);
    assert.equal(echo.bodySha256, patternDigest(size));
    const down = await request(`${base}/stream?bytes=${size}`, { timeoutMs: 20_000 });
    assert.equal(down.status, 200);
    assert.equal(down.body.length, size);
  });

  test('HTTP/2 end to end (h2c client → proxy → h2c backend)', async () => {
    const session = await h2session(proxy.ports.http);
    try {
      const r = await h2request(session, '/h2h2');
      assert.equal(r.status, 200);
      assert.equal((JSON.parse(r.body.toString()) as EchoReply).httpVersion, '2.0');
    } finally {
      session.close();
    }
  });
});
