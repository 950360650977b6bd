// HTTP/2 request limits: max_request_headers_kb and max_headers_count apply to HTTP/2 as to
// HTTP/1 (Envoy's codec resets the stream and counts http2.header_overflow; nothing is forwarded),
// HPACK-compressed header blocks are measured decoded (an HPACK bomb is refused the same way),
// and streams beyond max_concurrent_streams are refused, never queued or forwarded.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from '../lib/config.ts';
import { sleep } from '../lib/client.ts';
import { ErrorCode, Flag, FrameType, RawH2, indexed, literalIndexed, requestBlock, statusOf } from '../lib/h2-frames.ts';
import { startH2Backend, type H2Backend } from './http2-backend.ts';

const KB = 1024;

describe('HTTP/2 request limits', { timeout: 60_000 }, () => {
  let backend: H2Backend, proxy: RunningProxy;
  const stat = async (n: string): Promise<number> => (await proxy.stat(n)) ?? 0;

  before(async () => {
    backend = await startH2Backend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('h2'), [chain(hcm([vhost([routeTo('up', '/', { timeout: '0s' })])], {
        statPrefix: 'h2',
        extra: { http2_protocol_options: { max_concurrent_streams: 5 } },
      }))])],
      [cluster('up', [backend.port], { http2: true })],
    ), { ports: ['h2'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  /** Sends one request on a fresh connection; resolves with the stream's outcome. */
  async function oneRequest(block: Buffer): Promise<{ status?: number; rst?: number; goaway?: number; c: RawH2 }> {
    const c = await RawH2.open(proxy.ports.h2);
    c.headersSplit(1, block);
    await c.waitFor((x) => x.rstCode(1) !== undefined || x.goaway() || x.streamFrames(1).some((f) => f.flags & Flag.END_STREAM), 5000, 'an outcome for stream 1');
    const head = c.streamFrames(1).find((f) => f.type === FrameType.HEADERS);
    return { status: head ? statusOf(head.payload) : undefined, rst: c.rstCode(1), goaway: c.goaway()?.code, c };
  }

  test('70 KB of headers (max_request_headers_kb 60): RST_STREAM, not forwarded, http2.header_overflow; the connection stays usable', async () => {
    const overflow0 = await stat('http2.header_overflow');
    const r = await oneRequest(requestBlock('/big', [['x-big-1', 'x'.repeat(35 * KB)], ['x-big-2', 'x'.repeat(35 * KB)]]));
    try {
      assert.equal(r.rst, ErrorCode.INTERNAL_ERROR, r.c.describe());
      assert.equal(r.goaway, undefined);
      assert.equal(await stat('http2.header_overflow'), overflow0 + 1);
      // Same connection, next stream: served.
      r.c.headers(3, requestBlock('/after-big'));
      await r.c.waitFor((x) => x.streamFrames(3).some((f) => f.flags & Flag.END_STREAM), 5000, 'stream 3');
      assert.equal(statusOf(r.c.streamFrames(3)[0].payload), 200);
    } finally { r.c.close(); }
    assert.ok(!backend.requests.includes('/big'), 'the oversized request reached the backend');
    assert.ok(backend.requests.includes('/after-big'));
  });

  test('one 70 KB header field: over the HPACK decoder\'s 64 KB field cap, the connection is refused (COMPRESSION_ERROR), nothing forwarded', async () => {
    const r = await oneRequest(requestBlock('/one-big', [['x-big', 'x'.repeat(70 * KB)]]));
    r.c.close();
    assert.ok(r.rst !== undefined || r.goaway === ErrorCode.COMPRESSION_ERROR, r.c.describe());
    assert.ok(!backend.requests.includes('/one-big'));
  });

  test('just under the limit (59 KB of headers) is forwarded', async () => {
    const r = await oneRequest(requestBlock('/fits', [['x-fits', 'y'.repeat(59 * KB)]]));
    r.c.close();
    assert.equal(r.status, 200, r.c.describe());
    assert.ok(backend.requests.includes('/fits'));
  });

  test('101 headers (max_headers_count 100): refused, not forwarded', async () => {
    const extra = Array.from({ length: 101 }, (_, i) => [`x-h${i}`, 'v'] as const);
    const r = await oneRequest(requestBlock('/many', extra));
    r.c.close();
    assert.ok(r.rst !== undefined, r.c.describe());
    assert.ok(!backend.requests.includes('/many'));
  });

  test('HPACK bomb: one 4 KB entry referenced 5,000 times (20 MB decoded from 5 KB): refused, memory bounded', async () => {
    const rss0 = proxy.rss();
    const overflow0 = await stat('http2.header_overflow');
    const bomb = Buffer.concat([requestBlock('/bomb'), literalIndexed('x-bomb', 'b'.repeat(4000)), ...Array.from({ length: 5000 }, () => indexed(62))]);
    const c = await RawH2.open(proxy.ports.h2);
    try {
      c.headersSplit(1, bomb);
      await c.waitFor((x) => x.rstCode(1) !== undefined || x.goaway(), 5000, 'the bomb refused');
    } finally { c.close(); }
    assert.ok(!backend.requests.includes('/bomb'), 'the bomb reached the backend');
    // Refused by the HCM's size check (RST_STREAM, header_overflow) or by node's own header-list cap first.
    const refusedHere = (await stat('http2.header_overflow')) > overflow0;
    assert.ok(refusedHere || c.rstCode(1) !== undefined || c.goaway() !== undefined, c.describe());
    assert.ok(proxy.rss() - rss0 < 64 * KB * KB, `RSS grew by ${Math.round((proxy.rss() - rss0) / KB / KB)} MB`);
  });

  test('streams past max_concurrent_streams (5): the extra ones are refused and never reach the backend', async () => {
    const before = backend.requests.length;
    const c = await RawH2.open(proxy.ports.h2);
    try {
      // Wait for the server's SETTINGS (the limit); they are acknowledged before any stream opens.
      await c.waitFor((x) => x.frames.some((f) => f.type === FrameType.SETTINGS && !(f.flags & Flag.ACK)), 5000, 'SETTINGS');
      await sleep(50);
      for (let i = 0; i < 8; i++) c.headers(1 + 2 * i, requestBlock(`/slow?ms=800&limit=${i}`));
      // RFC 9113 §5.1.2 allows a stream error (PROTOCOL_ERROR / REFUSED_STREAM); nghttp2 (node's
      // codec, and Envoy's nghttp2 codec) makes a stream past an acknowledged limit a connection
      // error: GOAWAY(PROTOCOL_ERROR). Either way the extra streams go nowhere.
      await c.waitFor((x) => x.goaway() || [11, 13, 15].every((s) => x.rstCode(s) !== undefined), 5000, 'the extra streams refused');
      const goaway = c.goaway();
      if (goaway) {
        assert.equal(goaway.code, ErrorCode.PROTOCOL_ERROR, c.describe());
        assert.ok(goaway.lastStream <= 9, `last stream ${goaway.lastStream}`);
      } else {
        for (const s of [11, 13, 15]) assert.ok(c.rstCode(s) === ErrorCode.REFUSED_STREAM || c.rstCode(s) === ErrorCode.PROTOCOL_ERROR, `stream ${s}: ${c.rstCode(s)}`);
      }
    } finally { c.close(); }
    await sleep(200);
    const reached = backend.requests.slice(before).filter((p) => p.includes('limit='));
    assert.ok(reached.length <= 5, reached.join(' '));
    for (const i of [5, 6, 7]) assert.ok(!reached.includes(`/slow?ms=800&limit=${i}`), `stream ${1 + 2 * i} reached the backend`);
    // The proxy serves new connections.
    const r = await oneRequest(requestBlock('/after-limit'));
    r.c.close();
    assert.equal(r.status, 200);
  });
});
