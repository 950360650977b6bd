// Zero-window stalls: a client that advertises a 0-byte stream window and never opens it. The
// proxy must push back on the upstream (flow control, not buffering), keep its memory bounded,
// reset the stalled stream after stream_idle_timeout and cancel it upstream. A client that opens
// its window slowly still gets every byte.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from '../lib/config.ts';
import { sleep } from '../lib/client.ts';
import { Flag, FrameType, RawH2, Setting, requestBlock, statusOf } from '../lib/h2-frames.ts';
import { startH2Backend, type H2Backend } from './http2-backend.ts';

const MB = 1024 * 1024;

describe('HTTP/2 zero-window stalls', { timeout: 90_000 }, () => {
  let backend: H2Backend, proxy: RunningProxy;

  before(async () => {
    backend = await startH2Backend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('h2'), [chain(hcm([vhost([routeTo('up', '/', { timeout: '0s' })])], { statPrefix: 'h2', extra: { stream_idle_timeout: '2s' } }))])],
      [cluster('up', [backend.port], { http2: true })],
    ), { ports: ['h2'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('one stalled 64 MB download: upstream held back, memory bounded, reset after stream_idle_timeout and cancelled upstream', async () => {
    const rss0 = proxy.rss();
    const sent0 = backend.sent, aborted0 = backend.aborted;
    const c = await RawH2.open(proxy.ports.h2, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
    try {
      c.headers(1, requestBlock(`/bytes?n=${64 * MB}`));
      const head = await c.waitFor((x) => x.streamFrames(1).find((f) => f.type === FrameType.HEADERS), 5000, 'response headers');
      assert.equal(statusOf(head.payload), 200);
      await sleep(1000);
      const held = backend.sent - sent0;
      assert.ok(held < 5 * MB, `the upstream was allowed to send ${Math.round(held / MB)} MB into a stalled stream`);
      assert.equal(c.streamFrames(1).filter((f) => f.type === FrameType.DATA && f.length > 0).length, 0, 'DATA past a zero window');
      const t0 = Date.now();
      await c.waitFor((x) => x.rstCode(1) !== undefined, 6000, 'the stalled stream reset');
      assert.ok(Date.now() - t0 < 5000);
      await c.waitFor(() => backend.aborted > aborted0 || undefined, 3000, 'the upstream stream cancelled');
      assert.ok(proxy.rss() - rss0 < 100 * MB, `RSS grew by ${Math.round((proxy.rss() - rss0) / MB)} MB`);
    } finally { c.close(); }
  });

  test('20 stalled 32 MB downloads on one connection: each holds at most its upstream stream window (4 MiB)', async () => {
    const rss0 = proxy.rss();
    const sent0 = backend.sent, aborted0 = backend.aborted;
    const c = await RawH2.open(proxy.ports.h2, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
    try {
      for (let i = 0; i < 20; i++) c.headers(1 + 2 * i, requestBlock(`/bytes?n=${32 * MB}&i=${i}`));
      await c.waitFor((x) => x.frames.filter((f) => f.type === FrameType.HEADERS).length === 20, 5000, '20 response heads');
      await sleep(1000);
      const held = backend.sent - sent0;
      assert.ok(held < 20 * 5 * MB, `${Math.round(held / MB)} MB sent upstream into 20 stalled streams`);
      assert.ok(proxy.rss() - rss0 < 150 * MB, `RSS grew by ${Math.round((proxy.rss() - rss0) / MB)} MB`);
    } finally { c.close(); }
    await sleep(500);
    assert.ok(backend.aborted - aborted0 >= 20, `${backend.aborted - aborted0} upstream streams cancelled`);
  });

  test('a slow reader that opens its window 64 KB at a time gets all 4 MB', async () => {
    const size = 4 * MB;
    const c = await RawH2.open(proxy.ports.h2, { settings: [[Setting.INITIAL_WINDOW_SIZE, 65_536]] });
    try {
      c.headers(1, requestBlock(`/bytes?n=${size}`));
      let seen = 0;
      while (true) {
        const got = c.streamFrames(1).filter((f) => f.type === FrameType.DATA).reduce((n, f) => n + f.length, 0);
        if (got > seen) { c.windowUpdate(1, got - seen); c.windowUpdate(0, got - seen); seen = got; }
        if (c.streamFrames(1).some((f) => f.flags & Flag.END_STREAM)) break;
        await c.waitFor((x) => x.streamFrames(1).filter((f) => f.type === FrameType.DATA).reduce((n, f) => n + f.length, 0) > seen || x.streamFrames(1).some((f) => f.flags & Flag.END_STREAM), 5000, `data past ${seen}`);
      }
      assert.equal(seen, size);
    } finally { c.close(); }
  });
});
