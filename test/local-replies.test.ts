// Envoy's local replies (status, body, response flag) and the default access log format on stdout.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect } from 'node:http2';
import { cleanup, freePort, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { parseAccessLog, parseResponses, rawExchange, request, type AccessLogLine } from './lib/client.ts';
import { bootstrap, chain, cluster, directResponse, hcm, listener, routeTo, vhost } from './lib/config.ts';

describe('local replies and access log', { timeout: 60_000 }, () => {
  let backend: Backend, proxy: RunningProxy, base: string;

  before(async () => {
    backend = await startHttpBackend();
    const closedPort = await freePort(); // nothing listens there
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([
        vhost([{ match: { prefix: '/here' }, route: { cluster: 'backend' } }], ['only.test'], 'only'),
        vhost([
          directResponse(418, 'short and stout', '/direct'),
          { match: { prefix: '/redirect' }, redirect: { host_redirect: 'example.test', path_redirect: '/new', response_code: 'PERMANENT_REDIRECT' } },
          { match: { prefix: '/secure' }, redirect: { https_redirect: true } },
          routeTo('empty', '/uh-empty'),
          routeTo('unhealthy', '/uh-unhealthy'),
          routeTo('closed', '/uf'),
          routeTo('backend', '/ut', { timeout: '0.2s' }),
          routeTo('backend', '/'),
        ], ['*'], 'main'),
      ], { statPrefix: 'local', accessLog: true }))]),
      listener(p('small'), [chain(hcm([vhost([routeTo('backend')])], {
        statPrefix: 'small', extra: { max_request_headers_kb: 2, common_http_protocol_options: { max_headers_count: 20 } },
      }))]),
    ], [
      cluster('backend', [backend.port]),
      cluster('empty', []),
      cluster('unhealthy', [backend.port], { health: ['UNHEALTHY'] }),
      cluster('closed', [closedPort], { connectTimeout: '1s' }),
    ]), { ports: ['http', 'small'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  async function logFor(id: string): Promise<AccessLogLine> {
    const raw = await proxy.waitForStdout(new RegExp(`"${id}"`));
    const line = parseAccessLog(raw);
    assert.ok(line, `not Envoy's default access log format: ${raw}`);
    return line;
  }

  test('404 route not found (NR)', async () => {
    const r = await request(`${base}/elsewhere`, { headers: { host: 'only.test', 'x-request-id': 'lr-nr' } });
    assert.equal(r.status, 404);
    assert.equal(r.headers.server, 'envoy');
    assert.equal(r.body.length, 0);
    const l = await logFor('lr-nr');
    assert.equal(l.status, 404);
    assert.equal(l.flags, 'NR');
    assert.equal(l.upstreamHost, '-');
    assert.equal(l.authority, 'only.test');
  });

  test('503 no healthy upstream (UH) for a cluster without endpoints', async () => {
    const r = await request(`${base}/uh-empty`, { headers: { 'x-request-id': 'lr-uh1' } });
    assert.equal(r.status, 503);
    assert.equal(r.text, 'no healthy upstream');
    assert.equal(r.headers['content-type'], 'text/plain');
    const l = await logFor('lr-uh1');
    assert.equal(l.flags, 'UH');
    assert.equal(l.bytesSent, 'no healthy upstream'.length);
  });

  test('all endpoints UNHEALTHY: panic mode routes to them (default panic threshold 50%)', async () => {
    const r = await request(`${base}/uh-unhealthy`);
    assert.equal(r.status, 200);
  });

  test('all endpoints UNHEALTHY with healthy_panic_threshold 0 → 503 UH, the endpoint gets no traffic', async (t) => {
    const strict = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([routeTo('unhealthy')])], { accessLog: true }))])],
      [cluster('unhealthy', [backend.port], { health: ['UNHEALTHY'], extra: { common_lb_config: { healthy_panic_threshold: { value: 0 } } } })],
    ), { ports: ['http'] });
    t.after(() => strict.stop());
    const before = backend.requests.length;
    const r = await request(`http://127.0.0.1:${strict.ports.http}/x`, { headers: { 'x-request-id': 'lr-uh2' } });
    assert.equal(r.status, 503);
    assert.equal(r.text, 'no healthy upstream');
    assert.equal(parseAccessLog(await strict.waitForStdout(/"lr-uh2"/))?.flags, 'UH');
    assert.equal(backend.requests.length, before, 'an UNHEALTHY endpoint must not get traffic');
  });

  test('503 upstream connection failure (UF) when the endpoint port is closed', async () => {
    const r = await request(`${base}/uf`, { headers: { 'x-request-id': 'lr-uf' } });
    assert.equal(r.status, 503);
    assert.equal(r.text, 'upstream connect error or disconnect/reset before headers. reset reason: connection failure');
    const l = await logFor('lr-uf');
    assert.equal(l.flags, 'UF');
    assert.notEqual(l.upstreamHost, '-');
    assert.ok(((await proxy.stat('cluster.closed.upstream_cx_connect_fail')) ?? 0) >= 1);
  });

  test('504 upstream request timeout (UT) after the route timeout of 200 ms', async () => {
    const started = performance.now();
    const r = await request(`${base}/ut?delay=3000`, { headers: { 'x-request-id': 'lr-ut' } });
    const elapsed = performance.now() - started;
    assert.equal(r.status, 504);
    assert.equal(r.text, 'upstream request timeout');
    assert.ok(elapsed >= 180 && elapsed < 1500, `timed out after ${Math.round(elapsed)} ms`);
    const l = await logFor('lr-ut');
    assert.equal(l.flags, 'UT');
    assert.equal(backend.requests.find((q) => q.headers['x-request-id'] === 'lr-ut')?.headers['x-envoy-expected-rq-timeout-ms'], '200');
    assert.ok(((await proxy.stat('cluster.backend.upstream_rq_timeout')) ?? 0) >= 1);
  });

  test('direct_response', async () => {
    const r = await request(`${base}/direct`, { headers: { 'x-request-id': 'lr-dr' } });
    assert.equal(r.status, 418);
    assert.equal(r.text, 'short and stout');
    assert.equal(r.headers.server, 'envoy');
    const l = await logFor('lr-dr');
    assert.equal(l.status, 418);
    assert.equal(l.bytesSent, 15);
    assert.equal(l.upstreamHost, '-');
  });

  test('redirects: host/path (308) and https_redirect (301)', async () => {
    const r = await request(`${base}/redirect/x?q=1`);
    assert.equal(r.status, 308);
    assert.equal(r.headers.location, 'http://example.test/new?q=1');
    const s = await request(`${base}/secure/page`, { headers: { host: 'site.test' } });
    assert.equal(s.status, 301);
    assert.equal(s.headers.location, 'https://site.test/secure/page');
  });

  test('431 for too large and for too many request headers', async () => {
    const big = await rawExchange(proxy.ports.small, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4096)}\r\n\r\n`, (b) => parseResponses(b).responses.length > 0);
    assert.match(big.toString('latin1'), /^HTTP\/1\.1 431 /);
    const many = Array.from({ length: 30 }, (_, i) => `X-H${i}: v\r\n`).join('');
    const count = await rawExchange(proxy.ports.small, `GET / HTTP/1.1\r\nHost: x\r\n${many}\r\n`, (b) => parseResponses(b).responses.length > 0);
    assert.match(count.toString('latin1'), /^HTTP\/1\.1 431 /);
    const fine = await request(`http://127.0.0.1:${proxy.ports.small}/ok`);
    assert.equal(fine.status, 200);
  });

  test('426 for HTTP/1.0 (accept_http_10 is off)', async () => {
    const r = await rawExchange(proxy.ports.http, 'GET / HTTP/1.0\r\n\r\n');
    assert.match(r.toString('latin1'), /^HTTP\/1\.1 426 /);
  });

  test('a proxied request is logged with its upstream host, bytes and service time', async () => {
    const r = await request(`${base}/logged`, { method: 'POST', body: 'twelve bytes', headers: { 'x-request-id': 'lr-ok', 'user-agent': 'lr-agent', 'x-forwarded-for': '10.1.2.3' } });
    assert.equal(r.status, 200);
    const l = await logFor('lr-ok');
    assert.equal(l.method, 'POST');
    assert.equal(l.path, '/logged');
    assert.equal(l.protocol, 'HTTP/1.1');
    assert.equal(l.status, 200);
    assert.equal(l.flags, '-');
    assert.equal(l.bytesReceived, 12);
    assert.equal(l.bytesSent, r.body.length);
    assert.match(l.upstreamServiceTime, /^\d+$/);
    assert.equal(l.xff, '10.1.2.3');
    assert.equal(l.userAgent, 'lr-agent');
    assert.equal(l.authority, `127.0.0.1:${proxy.ports.http}`);
    assert.equal(l.upstreamHost, `127.0.0.1:${backend.port}`);
    assert.ok(Math.abs(Date.parse(l.start) - Date.now()) < 60_000);
  });

  test('an HTTP/2 request is logged with protocol HTTP/2 and its body bytes', async () => {
    const session = h2connect(base);
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const st = session.request({ ':method': 'POST', ':path': '/logged-h2', 'x-request-id': 'lr-h2' }, { endStream: false });
        st.on('response', (h) => resolve(Number(h[':status'])));
        st.once('error', reject);
        st.resume();
        st.end('twelve bytes');
      });
      assert.equal(status, 200);
    } finally {
      session.close();
    }
    const l = await logFor('lr-h2');
    assert.equal(l.protocol, 'HTTP/2');
    assert.equal(l.method, 'POST');
    assert.equal(l.bytesReceived, 12);
  });

  test('every stdout line is an access log line in the default format', () => {
    const lines = proxy.stdout().split('\n').filter((l) => l.trim() !== '');
    assert.ok(lines.length >= 7, `only ${lines.length} lines`);
    for (const l of lines) assert.ok(parseAccessLog(l), `not in the default format: ${l}`);
    const ids = lines.map((l) => parseAccessLog(l)?.requestId).filter((id) => id?.startsWith('lr-'));
    assert.equal(new Set(ids).size, ids.length, `a request was logged more than once: ${ids.join(' ')}`);
  });
});
