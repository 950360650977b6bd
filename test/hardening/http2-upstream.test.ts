// The upstream HTTP/2 pool (node:http2 client): connection failures, the concurrent-stream limit,
// max_requests_per_connection, an upstream GOAWAY, REFUSED_STREAM retries, max_pending_requests,
// a reset mid-body, and the cluster stats that go with each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, constants as h2c, type Http2Server, type ServerHttp2Session } from 'node:http2';
import { cleanup, freePort, startProxy, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from '../lib/config.ts';
import { request } from '../lib/client.ts';

interface Upstream { server: Http2Server; port: number; sessions: Set<ServerHttp2Session>; sessionsSeen: number; refusedOnce: Set<string> }

/** /slow?ms=N answers after N ms; /goaway answers, then GOAWAYs its session; /refuse-once refuses the first try; /reset-mid-body resets after 1 KB. */
async function startUpstream(): Promise<Upstream> {
  const u: Upstream = { server: createServer(), port: 0, sessions: new Set(), sessionsSeen: 0, refusedOnce: new Set() };
  u.server.on('session', (s) => { u.sessions.add(s); u.sessionsSeen++; s.once('close', () => u.sessions.delete(s)); });
  u.server.on('stream', (stream, h) => {
    const url = new URL(String(h[':path']), 'http://x');
    stream.on('error', () => { /* resets are the point */ });
    stream.resume();
    const ok = (): void => { if (!stream.destroyed) { stream.respond({ ':status': 200 }); stream.end('ok'); } };
    if (url.pathname === '/slow') { setTimeout(ok, Number(url.searchParams.get('ms') ?? 300)); return; }
    if (url.pathname === '/goaway') { ok(); stream.session?.close(); return; }
    if (url.pathname === '/refuse-once' && !u.refusedOnce.has(url.search)) { u.refusedOnce.add(url.search); stream.close(h2c.NGHTTP2_REFUSED_STREAM); return; }
    if (url.pathname === '/reset-mid-body') {
      stream.respond({ ':status': 200, 'content-length': '4096' });
      stream.write(Buffer.alloc(1024, 0x61), () => setTimeout(() => stream.close(h2c.NGHTTP2_INTERNAL_ERROR), 50));
      return;
    }
    ok();
  });
  await new Promise<void>((r) => u.server.listen(0, '127.0.0.1', () => r()));
  u.port = (u.server.address() as { port: number }).port;
  return u;
}

describe('upstream HTTP/2 pool', { timeout: 60_000 }, () => {
  let up: Upstream, proxy: RunningProxy, deadPort = 0;
  const base = (): string => `http://127.0.0.1:${proxy.ports.http}`;
  const stat = async (n: string): Promise<number> => (await proxy.stat(n)) ?? 0;
  const h2 = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', ...extra,
    } },
  });

  before(async () => {
    up = await startUpstream();
    deadPort = await freePort();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('http'), [chain(hcm([vhost([
        routeTo('dead', '/dead'),
        routeTo('two', '/two/', { prefix_rewrite: '/' }),
        routeTo('permax', '/permax/', { prefix_rewrite: '/' }),
        routeTo('tight', '/tight/', { prefix_rewrite: '/' }),
        routeTo('up', '/', { retry_policy: { retry_on: 'refused-stream', num_retries: 1 } }),
      ])]))])],
      [
        cluster('up', [up.port], { http2: true }),
        cluster('dead', [deadPort], { http2: true }),
        cluster('two', [up.port], { extra: h2({ explicit_http_config: { http2_protocol_options: { max_concurrent_streams: 2 } } }) }),
        cluster('permax', [up.port], { extra: h2({ explicit_http_config: { http2_protocol_options: {} }, common_http_protocol_options: { max_requests_per_connection: 2 } }) }),
        cluster('tight', [up.port], { http2: true, extra: { circuit_breakers: { thresholds: [{ max_connections: 1, max_pending_requests: 1, max_requests: 1 }] } } }),
      ],
    ), { ports: ['http'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => new Promise<void>((r) => { for (const s of up?.sessions ?? []) s.destroy(); up?.server.close(() => r()); })));

  test('connection refused: 503 UF, upstream_cx_connect_fail', async () => {
    const r = await request(`${base()}/dead`);
    assert.equal(r.status, 503);
    assert.equal(r.text, 'upstream connect error or disconnect/reset before headers. reset reason: connection failure');
    assert.ok((await stat('cluster.dead.upstream_cx_connect_fail')) >= 1);
  });

  test('max_concurrent_streams 2: six concurrent requests open three connections, all answered', async () => {
    const seen0 = up.sessionsSeen;
    const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => request(`${base()}/two/slow?ms=400&i=${i}`)));
    for (const r of rs) assert.equal(r.status, 200);
    assert.equal(up.sessionsSeen - seen0, 3);
    assert.equal(await stat('cluster.two.upstream_cx_total'), 3);
  });

  test('max_requests_per_connection 2: five sequential requests use three connections', async () => {
    const seen0 = up.sessionsSeen;
    for (let i = 0; i < 5; i++) assert.equal((await request(`${base()}/permax/x?i=${i}`)).status, 200);
    assert.equal(up.sessionsSeen - seen0, 3);
  });

  test('an upstream GOAWAY: the answer arrives, the next request takes a new connection', async () => {
    assert.equal((await request(`${base()}/warm`)).status, 200);
    const seen0 = up.sessionsSeen;
    assert.equal((await request(`${base()}/goaway`)).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await request(`${base()}/after-goaway?i=${i}`)).status, 200);
    assert.equal(up.sessionsSeen - seen0, 1);
  });

  test('REFUSED_STREAM is retried under retry_on refused-stream', async () => {
    const retries0 = await stat('cluster.up.upstream_rq_retry');
    const r = await request(`${base()}/refuse-once?k=1`);
    assert.equal(r.status, 200);
    assert.equal(await stat('cluster.up.upstream_rq_retry'), retries0 + 1);
  });

  test('a reset in the middle of the body: the client sees a truncated, failed response (never a clean short one)', async () => {
    const reset0 = await stat('cluster.up.upstream_rq_rx_reset');
    const r = await request(`${base()}/reset-mid-body`).catch((e: Error) => e);
    if (!(r instanceof Error)) assert.notEqual(r.body.length, 4096, 'a reset stream must not look complete');
    assert.equal(await stat('cluster.up.upstream_rq_rx_reset'), reset0 + 1);
  });

  test('max_pending_requests 1 with max_requests 1: the third concurrent request overflows (503 UO)', async () => {
    const rs = await Promise.all(Array.from({ length: 3 }, (_, i) => request(`${base()}/tight/slow?ms=300&i=${i}`)));
    const statuses = rs.map((r) => r.status).sort();
    assert.ok(statuses.includes(503), `statuses ${statuses.join(',')}`);
    assert.ok(statuses.includes(200));
    const overloaded = rs.find((r) => r.status === 503);
    assert.equal(overloaded?.headers['x-envoy-overloaded'], 'true');
  });
});
