// gRPC over the proxy: trailers-only local replies with Envoy's status mapping, and grpc-timeout as the route timeout.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Http2Server, type IncomingHttpHeaders } from 'node:http2';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

function grpcCall(port: number, path: string, extra: Record<string, string> = {}): Promise<{ headers: IncomingHttpHeaders; trailers: IncomingHttpHeaders; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const s = connect(`http://127.0.0.1:${port}`);
    s.on('error', reject);
    const req = s.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra });
    let headers: IncomingHttpHeaders = {}, trailers: IncomingHttpHeaders = {};
    req.on('response', (h) => { headers = h; });
    req.on('trailers', (t) => { trailers = t; });
    req.on('data', () => { /* messages are not examined */ });
    req.on('end', () => { s.close(); resolve({ headers, trailers, ms: Date.now() - t0 }); });
    req.on('error', reject);
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

describe('gRPC', { timeout: 30_000 }, () => {
  let backend: Http2Server, backendPort = 0, proxy: RunningProxy;

  before(async () => {
    backend = createServer();
    backend.on('stream', (stream, h) => {
      stream.on('data', () => { /* request message */ });
      stream.on('end', () => {
        const delay = h[':path'] === '/slow.Svc/Call' ? 1000 : 0;
        setTimeout(() => {
          if (stream.destroyed) return;
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'ok' }));
          stream.end(Buffer.from([0, 0, 0, 0, 0]));
        }, delay);
      });
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', () => r()));
    const a = backend.address();
    backendPort = typeof a === 'object' && a ? a.port : 0;
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([
        routeTo('grpc', '/slow.Svc/', { timeout: '5s', max_stream_duration: { grpc_timeout_header_max: '0s' } }),
        routeTo('grpc', '/ok.Svc/'),
      ])], { statPrefix: 'grpc', codec: 'HTTP2' }))]),
    ], [cluster('grpc', [backendPort], { http2: true })]), { ports: ['http'] });
  });

  after(() => cleanup(() => proxy?.stop(), () => new Promise<void>((r) => backend?.close(() => r()))));

  test('a call is proxied end to end with its trailers', async () => {
    const r = await grpcCall(proxy.ports.http, '/ok.Svc/Call');
    assert.equal(r.headers[':status'], 200);
    assert.equal(r.trailers['grpc-status'], '0');
  });

  test('no route: a trailers-only reply with grpc-status UNIMPLEMENTED (12), HTTP 200', async () => {
    const r = await grpcCall(proxy.ports.http, '/missing.Svc/Call');
    assert.equal(r.headers[':status'], 200);
    assert.equal(r.headers['grpc-status'], '12');
    assert.equal(r.headers['content-type'], 'application/grpc');
  });

  test('grpc-timeout sets the route timeout: 200m against a 1 s backend → UNAVAILABLE (14) in ~200 ms', async () => {
    const r = await grpcCall(proxy.ports.http, '/slow.Svc/Call', { 'grpc-timeout': '200m' });
    assert.equal(r.headers['grpc-status'], '14');
    assert.equal(decodeURIComponent(String(r.headers['grpc-message'])), 'upstream request timeout');
    assert.ok(r.ms < 900, `took ${r.ms} ms`);
  });
});
