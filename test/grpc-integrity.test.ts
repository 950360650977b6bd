// gRPC through skua-proxy over an HTTP/2 upstream, checking every byte and the status: large unary
// replies, 10 MB messages, server streams read slowly (downstream backpressure while the upstream's
// trailers arrive), client streams and bidi echo. Then trailers-only replies, which must stay one
// HEADERS frame with END_STREAM (clients otherwise see "13 INTERNAL: ... without gRPC status").
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Http2Server } from 'node:http2';
import type { Client } from '@grpc/grpc-js';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';
import { bidi, bytesClient, clientStream, firstBadMessage, patternMessage, serverStream, startBytesServer, unary, type BytesServer } from './lib/grpc-bytes.ts';
import { Flag, FrameType, RawH2, requestBlock, statusOf } from './lib/h2-frames.ts';

const KB = 1024;

describe('gRPC byte integrity through the proxy (HTTP/2 upstream)', { timeout: 180_000 }, () => {
  let server: BytesServer, proxy: RunningProxy, client: Client;

  before(async () => {
    server = await startBytesServer();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('grpc'), [chain(hcm([vhost([routeTo('grpc', '/', { timeout: '0s' })])], { statPrefix: 'grpc' }))])],
      [cluster('grpc', [server.port], { http2: true })],
    ), { ports: ['grpc'] });
    client = bytesClient(proxy.ports.grpc);
  });
  after(() => cleanup(() => client?.close(), () => proxy?.stop(), () => server?.close()));

  test('20 unary calls with a 314,159-byte reply each arrive whole, status OK', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => unary(client, { size: 314_159 })));
    for (const r of results) {
      assert.equal(r.code, 0, r.details);
      assert.equal(r.messages.length, 1);
      assert.equal(r.messages[0].length, 314_159);
      assert.ok(r.messages[0].equals(patternMessage(0, 314_159)), 'reply bytes differ');
    }
  });

  test('a 10 MB unary reply and a 10 MB request (client stream) arrive whole', async () => {
    const size = 10 * KB * KB;
    const down = await unary(client, { size });
    assert.equal(down.code, 0, down.details);
    assert.equal(down.messages[0]?.length, size);
    assert.ok(down.messages[0].equals(patternMessage(0, size)));
    const up = patternMessage(5, size);
    const r = await clientStream(client, [up]);
    assert.equal(r.code, 0, r.details);
    assert.deepEqual(JSON.parse(r.messages[0].toString()), { sha256: createHash('sha256').update(up).digest('hex'), bytes: size });
  });

  test('100 × 10 KB server stream, read by a slow reader: all 100 messages, in order, status OK', async () => {
    for (let round = 0; round < 3; round++) {
      const r = await serverStream(client, { size: 10 * KB, count: 100 }, { every: 10, pauseMs: 30 });
      assert.equal(r.code, 0, r.details);
      assert.equal(r.messages.length, 100, `round ${round}: ${r.messages.length} of 100 messages`);
      assert.equal(firstBadMessage(r.messages, 10 * KB), -1);
    }
  });

  test('3 × 10 MB server-stream messages to a reader that pauses after each: every byte, status OK', async () => {
    const r = await serverStream(client, { size: 10 * KB * KB, count: 3 }, { every: 1, pauseMs: 200 });
    assert.equal(r.code, 0, r.details);
    assert.equal(r.messages.length, 3);
    assert.equal(firstBadMessage(r.messages, 10 * KB * KB), -1);
  });

  test('bidi: 200 messages of 1–64 KB echoed back intact', async () => {
    const msgs = Array.from({ length: 200 }, (_, i) => patternMessage(i, 1 + ((i * 7919) % (64 * KB))));
    const r = await bidi(client, msgs);
    assert.equal(r.code, 0, r.details);
    assert.equal(r.messages.length, msgs.length);
    r.messages.forEach((m, i) => assert.ok(m.equals(msgs[i]), `message ${i} differs`));
  });

  test('an error status from the server reaches the client as sent (not INTERNAL)', async () => {
    const r = await unary(client, { size: 0, failCode: 9, failMessage: 'precondition ☺ failed' });
    assert.equal(r.code, 9);
    assert.equal(r.details, 'precondition ☺ failed');
    const s = await proxy.stat('cluster.grpc.upstream_rq_total');
    assert.ok((s ?? 0) > 0);
  });
});

describe('trailers-only responses stay trailers-only', { timeout: 60_000 }, () => {
  let upstream: Http2Server, upstreamPort = 0, proxy: RunningProxy;

  before(async () => {
    upstream = createServer();
    upstream.on('stream', (stream, h) => {
      stream.on('data', () => { /* request body */ });
      stream.on('end', () => {
        if (h[':path'] === '/empty-200') { stream.respond({ ':status': 200 }, { endStream: true }); return; }
        // What a gRPC server sends for an immediate error: one HEADERS frame with END_STREAM.
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': 'no such method' }, { endStream: true });
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    upstreamPort = (upstream.address() as { port: number }).port;
    proxy = await startProxy((p) => bootstrap(
      [listener(p('h2'), [chain(hcm([vhost([routeTo('up')])], { statPrefix: 'h2' }))])],
      [cluster('up', [upstreamPort], { http2: true })],
    ), { ports: ['h2'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => new Promise<void>((r) => upstream?.close(() => r()))));

  test('grpc-status 12 in a HEADERS frame with END_STREAM is forwarded as exactly that frame', async () => {
    const c = await RawH2.open(proxy.ports.h2);
    try {
      c.headers(1, requestBlock('/pkg.Svc/Missing', [['content-type', 'application/grpc'], ['te', 'trailers']], 'POST'), { endStream: true });
      const end = await c.waitFor((x) => x.streamFrames(1).find((f) => f.flags & Flag.END_STREAM), 5000, 'end of stream 1');
      const frames = c.streamFrames(1).filter((f) => f.type === FrameType.HEADERS || f.type === FrameType.DATA);
      assert.equal(frames.length, 1, `expected one HEADERS frame, got ${c.describe()}`);
      assert.equal(end.type, FrameType.HEADERS);
      assert.equal(statusOf(end.payload), 200);
    } finally { c.close(); }
  });

  test('a header-only 200 (HEADERS with END_STREAM) is not followed by an empty DATA frame', async () => {
    const c = await RawH2.open(proxy.ports.h2);
    try {
      c.headers(1, requestBlock('/empty-200'), { endStream: true });
      await c.waitFor((x) => x.streamFrames(1).find((f) => f.flags & Flag.END_STREAM), 5000, 'end of stream 1');
      const kinds = c.streamFrames(1).filter((f) => f.type === FrameType.HEADERS || f.type === FrameType.DATA).map((f) => f.type);
      assert.deepEqual(kinds, [FrameType.HEADERS], c.describe());
    } finally { c.close(); }
  });

  test('a gRPC client sees the upstream status (12 UNIMPLEMENTED), not 13 INTERNAL', async () => {
    const client = bytesClient(proxy.ports.h2);
    try {
      const r = await unary(client, { size: 1 });
      assert.equal(r.code, 12, r.details);
      assert.equal(r.details, 'no such method');
    } finally { client.close(); }
  });
});
