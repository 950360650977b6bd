// HTTP/1.1 through skua-proxy: keep-alive, pipelining, request/response headers, bodies.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { patternDigest, patternStream, startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { hasResponses, openSocket, parseResponses, readUntil, request } from './lib/client.ts';
import { simpleHttp } from './lib/config.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('HTTP/1.1', { timeout: 60_000 }, () => {
  let backend: Backend;
  let proxy: RunningProxy;
  let base: string;

  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => simpleHttp(p('http'), backend.port), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('keep-alive: five requests share one downstream connection and one upstream connection', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = { rq: await proxy.stat('http.ingress_http.downstream_rq_total') ?? 0, cx: await proxy.stat('http.ingress_http.downstream_cx_total') ?? 0 };
      const conns = backend.connections;
      const localPorts = new Set<number>();
      for (let i = 0; i < 5; i++) {
        const r = await request(`${base}/ka/${i}`, { agent });
        assert.equal(r.status, 200, r.text);
        assert.equal((JSON.parse(r.text) as EchoReply).url, `/ka/${i}`);
        localPorts.add(r.localPort);
      }
      assert.equal(localPorts.size, 1, `requests used ${localPorts.size} client connections`);
      assert.equal(backend.connections - conns, 1, 'sequential requests should reuse one pooled upstream connection');
      assert.equal((await proxy.stat('http.ingress_http.downstream_rq_total')) ?? 0, before.rq + 5);
      assert.equal((await proxy.stat('http.ingress_http.downstream_cx_total')) ?? 0, before.cx + 1);
    } finally {
      agent.destroy();
    }
  });

  test('the proxy adds Envoy request and response headers', async () => {
    const r = await request(`${base}/headers?x=1`, { headers: { 'user-agent': 'skua-e2e', 'x-custom': 'kept' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.server, 'envoy');
    assert.match(String(r.headers['x-envoy-upstream-service-time']), /^\d+$/);
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.url, '/headers?x=1');
    assert.equal(echo.method, 'GET');
    assert.equal(echo.headers.host, `127.0.0.1:${proxy.ports.http}`);
    assert.equal(echo.headers['x-custom'], 'kept');
    assert.equal(echo.headers['user-agent'], 'skua-e2e');
    assert.match(String(echo.headers['x-request-id']), UUID);
    assert.equal(echo.headers['x-forwarded-proto'], 'http');
    assert.equal(echo.headers['x-envoy-expected-rq-timeout-ms'], '15000');
  });

  test('an incoming x-request-id is kept, a fresh one differs per request', async () => {
    const kept = JSON.parse((await request(`${base}/rid`, { headers: { 'x-request-id': 'abc-123' } })).text) as EchoReply;
    assert.equal(kept.headers['x-request-id'], 'abc-123');
    const a = JSON.parse((await request(`${base}/rid`)).text) as EchoReply;
    const b = JSON.parse((await request(`${base}/rid`)).text) as EchoReply;
    assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id']);
  });

  test('request bodies arrive intact, with content-length and chunked', async () => {
    const size = 3 * 1024 * 1024 + 17;
    const withLength = await request(`${base}/upload`, { method: 'POST', headers: { 'content-length': size }, body: patternStream(size) });
    const e1 = JSON.parse(withLength.text) as EchoReply;
    assert.equal(e1.bodyBytes, size);
    assert.equal(e1.bodySha256, patternDigest(size));
    const chunked = await request(`${base}/upload`, { method: 'PUT', headers: { 'transfer-encoding': 'chunked' }, body: patternStream(size) });
    const e2 = JSON.parse(chunked.text) as EchoReply;
    assert.equal(e2.method, 'PUT');
    assert.equal(e2.bodyBytes, size);
    assert.equal(e2.bodySha256, patternDigest(size));
  });

  test('a request written together with the client\'s FIN (half-close) is still answered', async () => {
    // The proxy reads a new connection's first bytes before the codec takes it; those bytes, and the
    // end of stream right behind them, must reach the codec in that order.
    for (let i = 0; i < 5; i++) {
      const s = await openSocket(proxy.ports.http);
      try {
        const got = readUntil(s, hasResponses(1), 5000);
        s.end(`GET /fin/${i} HTTP/1.1\r\nHost: fin\r\n\r\n`);
        const { responses } = parseResponses(await got);
        assert.equal(responses[0]?.status, 200);
        assert.equal((JSON.parse(responses[0].body.toString()) as EchoReply).url, `/fin/${i}`);
      } finally {
        s.destroy();
      }
    }
  });

  test('pipelining: three requests written at once get three responses in order', async () => {
    const s = await openSocket(proxy.ports.http);
    try {
      const got = readUntil(s, hasResponses(3), 10_000);
      // The first is the slowest, so a proxy answering out of order would be caught.
      s.write([
        'GET /p1?delay=300 HTTP/1.1\r\nHost: pipe\r\n\r\n',
        'GET /p2 HTTP/1.1\r\nHost: pipe\r\n\r\n',
        'POST /p3?delay=100 HTTP/1.1\r\nHost: pipe\r\nContent-Length: 5\r\n\r\nhello',
      ].join(''));
      const { responses } = parseResponses(await got);
      assert.equal(responses.length, 3);
      const urls = responses.map((r) => (JSON.parse(r.body.toString()) as EchoReply).url);
      assert.deepEqual(urls, ['/p1?delay=300', '/p2', '/p3?delay=100']);
      assert.deepEqual(responses.map((r) => r.status), [200, 200, 200]);
      assert.equal((JSON.parse(responses[2].body.toString()) as EchoReply).bodyBytes, 5);
      // The connection is still usable afterwards.
      const again = readUntil(s, hasResponses(1), 5000);
      s.write('GET /p4 HTTP/1.1\r\nHost: pipe\r\n\r\n');
      assert.equal(parseResponses(await again).responses[0]?.status, 200);
    } finally {
      s.destroy();
    }
  });

  test('Connection: close is honoured', async () => {
    const s = await openSocket(proxy.ports.http);
    try {
      const all = readUntil(s, undefined, 5000); // resolves when the proxy closes
      s.write('GET /close HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const { responses } = parseResponses(await all);
      assert.equal(responses.length, 1);
      assert.equal(responses[0].status, 200);
    } finally {
      s.destroy();
    }
  });

  test('HEAD and status codes pass through', async () => {
    const head = await request(`${base}/status/204`, { method: 'HEAD' });
    assert.equal(head.status, 204);
    assert.equal(head.body.length, 0);
    const nf = await request(`${base}/status/404`);
    assert.equal(nf.status, 404);
    assert.equal(nf.headers.server, 'envoy');
  });
});
