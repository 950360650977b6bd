// Abusive HTTP/2 clients, frame by frame: rapid reset (CVE-2023-44487), CONTINUATION flood
// (CVE-2024-27316 family), SETTINGS and PING floods from a client that never reads. Each must end
// with the right GOAWAY code (or the connection closed), nothing unexpected upstream, the process
// alive and its memory bounded. Load is bounded: a few thousand frames on loopback per test.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, startProxy, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from '../lib/config.ts';
import { sleep } from '../lib/client.ts';
import { ErrorCode, Flag, FrameType, RawH2, frame, literal, requestBlock, statusOf } from '../lib/h2-frames.ts';
import { startH2Backend, type H2Backend } from './http2-backend.ts';

const MB = 1024 * 1024;

/** Waits until the socket takes more, closes, or 500 ms pass (a peer that stopped reading). */
function drainOrClose(c: RawH2): Promise<unknown> {
  return Promise.race([new Promise((r) => c.socket.once('drain', r)), new Promise((r) => c.socket.once('close', r)), sleep(500)]);
}

describe('HTTP/2 floods', { timeout: 120_000 }, () => {
  let backend: H2Backend, proxy: RunningProxy, rss0 = 0;
  const stat = async (n: string): Promise<number> => (await proxy.stat(n)) ?? 0;

  before(async () => {
    backend = await startH2Backend();
    proxy = await startProxy((p) => bootstrap(
      [listener(p('h2'), [chain(hcm([vhost([routeTo('up', '/', { timeout: '0s' })])], { statPrefix: 'h2' }))])],
      [cluster('up', [backend.port], { http2: true })],
    ), { ports: ['h2'] });
    rss0 = proxy.rss();
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  /** After each flood: the proxy still answers a plain request and its RSS stayed bounded. */
  async function stillHealthy(label: string): Promise<void> {
    const c = await RawH2.open(proxy.ports.h2);
    try {
      c.headers(1, requestBlock(`/healthy-after-${label}`));
      await c.waitFor((x) => x.streamFrames(1).some((f) => f.flags & Flag.END_STREAM), 5000, 'a normal response');
      assert.equal(statusOf(c.streamFrames(1)[0].payload), 200);
    } finally { c.close(); }
    const grown = proxy.rss() - rss0;
    assert.ok(grown < 150 * MB, `RSS grew by ${Math.round(grown / MB)} MB after ${label}`);
  }

  test('rapid reset: 2,000 HEADERS + RST_STREAM pairs → GOAWAY(ENHANCE_YOUR_CALM), counted, nothing after it forwarded', async () => {
    const before = backend.requests.length;
    const c = await RawH2.open(proxy.ports.h2);
    for (let i = 0; i < 2000; i++) { const id = 1 + 2 * i; c.headers(id, requestBlock(`/rr?i=${i}`)); c.rst(id, ErrorCode.CANCEL); }
    // The guard's GOAWAY. On a loaded machine nghttp2's own RST_STREAM limiter (burst 1,000) can
    // answer first with GOAWAY(INTERNAL_ERROR) while the guard's count waits for JS (seen once in a
    // full suite run); the guard's ENHANCE_YOUR_CALM must still follow, counted, and end the connection.
    const goaway = await c.waitFor((x) => x.goaway(ErrorCode.ENHANCE_YOUR_CALM), 10_000, 'GOAWAY(ENHANCE_YOUR_CALM)');
    assert.deepEqual(c.frames.filter((f) => f.type === FrameType.GOAWAY).map((f) => f.payload.readUInt32BE(4)).filter((code) => code !== ErrorCode.INTERNAL_ERROR),
      [ErrorCode.ENHANCE_YOUR_CALM], c.describe());
    assert.ok(await c.waitClosed(5000), 'the connection was not closed');
    assert.equal(await stat('http.h2.downstream_rq_too_many_premature_resets'), 1);
    const rxReset = await stat('http.h2.downstream_rq_rx_reset');
    assert.ok(rxReset >= 250, `downstream_rq_rx_reset ${rxReset}`);
    await sleep(300);
    const forwarded = backend.requests.slice(before).filter((p) => p.startsWith('/rr?'));
    // Streams accepted before the GOAWAY may have been forwarded (and cancelled); none after it.
    const maxIndex = Math.max(-1, ...forwarded.map((p) => Number(p.slice('/rr?i='.length))));
    assert.ok(1 + 2 * maxIndex <= goaway.lastStream, `stream ${1 + 2 * maxIndex} forwarded after GOAWAY(last ${goaway.lastStream})`);
    assert.ok(forwarded.length < 2000, `${forwarded.length} forwarded`);
    await stillHealthy('rapid-reset');
  });

  test('resets after a response are not premature: 600 answered-then-reset streams keep the connection', async () => {
    const c = await RawH2.open(proxy.ports.h2);
    try {
      for (let i = 0; i < 600; i++) {
        const id = 1 + 2 * i;
        c.headers(id, requestBlock('/answered'));
        await c.waitFor((x) => x.streamFrames(id).some((f) => f.flags & Flag.END_STREAM), 5000, `stream ${id}`);
        c.rst(id, ErrorCode.CANCEL);
      }
      await sleep(200);
      assert.equal(c.goaway(), undefined, c.describe());
      assert.equal(c.closed, false);
    } finally { c.close(); }
  });

  test('CONTINUATION flood: a header block that never ends → the connection is closed, nothing forwarded', async () => {
    const c = await RawH2.open(proxy.ports.h2);
    c.headers(1, requestBlock('/cont'), { endStream: true, endHeaders: false });
    const piece = literal('x-c', 'a'.repeat(100));
    let sent = 0;
    for (let i = 0; i < 20_000 && !c.closed; i++) {
      sent++;
      if (!c.continuation(1, piece, false)) await drainOrClose(c);
    }
    assert.ok(await c.waitClosed(5000), `still open after ${sent} CONTINUATION frames`);
    assert.equal(c.goaway()?.code, ErrorCode.ENHANCE_YOUR_CALM, c.describe());
    assert.ok(!backend.requests.includes('/cont'));
    await stillHealthy('continuation');
  });

  /** Sends `bursts` × 1,000 copies of `f` without reading a byte back; the proxy must hang up with ENHANCE_YOUR_CALM. */
  async function floodWithoutReading(f: Buffer, bursts: number, label: string): Promise<void> {
    const c = await RawH2.open(proxy.ports.h2);
    c.socket.pause(); // never read the ACKs
    const burst = Buffer.concat(Array.from({ length: 1000 }, () => f));
    for (let i = 0; i < bursts && !c.closed; i++) {
      if (!c.write(burst)) await drainOrClose(c);
    }
    c.socket.resume();
    assert.ok(await c.waitClosed(10_000), 'the flooding connection is still open');
    assert.equal(c.goaway()?.code, ErrorCode.ENHANCE_YOUR_CALM, c.describe());
    await stillHealthy(label);
  }

  test('SETTINGS flood from a client that never reads: GOAWAY(ENHANCE_YOUR_CALM), memory bounded', async () => {
    await floodWithoutReading(frame(FrameType.SETTINGS, 0, 0, Buffer.from([0, 4, 0, 0, 0xff, 0xff])), 100, 'settings-flood');
  });

  test('PING flood from a client that never reads: GOAWAY(ENHANCE_YOUR_CALM), memory bounded', async () => {
    await floodWithoutReading(frame(FrameType.PING, 0, 0, Buffer.alloc(8, 7)), 200, 'ping-flood');
  });

  test('the process survived every flood', async () => {
    process.kill(proxy.pid, 0); // throws if the process is gone
    const r = await proxy.admin('/ready');
    assert.equal(r.status, 200);
  });
});
