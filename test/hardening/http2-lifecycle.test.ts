// HTTP/2 connections that end without GOAWAY: the client closes its socket (FIN) or vanishes
// (RST). The proxy must close its side too (no CLOSE-WAIT, no fd leak, downstream_cx_active back
// to 0), cancel what was in flight upstream, and count it as Envoy does
// (downstream_cx_destroy_remote[_active_rq]).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { cleanup, startProxy, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from '../lib/config.ts';
import { run, sleep } from '../lib/client.ts';
import { RawH2, requestBlock } from '../lib/h2-frames.ts';
import { startH2Backend, type H2Backend } from './http2-backend.ts';

function fdCount(pid: number): number { return readdirSync(`/proc/${pid}/fd`).length; }

async function closeWaitCount(port: number): Promise<number> {
  const r = await run('ss', ['-Htn', 'state', 'close-wait', 'sport', '=', `:${port}`]);
  return r.stdout.split('\n').filter((l) => l.trim()).length;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(50);
  }
}

describe('HTTP/2 client gone without GOAWAY', { timeout: 120_000 }, () => {
  let backend: H2Backend, proxy: RunningProxy;
  const stat = async (n: string): Promise<number> => (await proxy.stat(`http.h2.${n}`)) ?? 0;

  before(async () => {
    backend = await startH2Backend();
    proxy = await startProxy((p) => bootstrap([
      listener(p('h2'), [chain(hcm([vhost([routeTo('up', '/', { timeout: '0s' })])], { statPrefix: 'h2' }))]),
      listener(p('h2only'), [chain(hcm([vhost([routeTo('up', '/', { timeout: '0s' })])], { statPrefix: 'h2only', codec: 'HTTP2' }))]),
    ], [cluster('up', [backend.port], { http2: true })]), { ports: ['h2', 'h2only'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('300 × curl --http2-prior-knowledge: every connection closes, no CLOSE-WAIT, fds back to the baseline', async () => {
    const fds0 = fdCount(proxy.pid);
    const url = `http://127.0.0.1:${proxy.ports.h2}/curl`;
    for (let batch = 0; batch < 30; batch++) {
      const results = await Promise.all(Array.from({ length: 10 }, () => run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--http2-prior-knowledge', url])));
      for (const r of results) assert.equal(r.stdout, '200', r.stderr);
    }
    await until('downstream_cx_active back to 0', async () => (await stat('downstream_cx_active')) === 0);
    assert.equal(await closeWaitCount(proxy.ports.h2), 0, 'sockets left in CLOSE-WAIT');
    assert.ok(fdCount(proxy.pid) <= fds0 + 5, `fds: ${fds0} before, ${fdCount(proxy.pid)} after`);
    assert.ok((await stat('downstream_cx_destroy')) >= 300);
    assert.equal(backend.requests.filter((p) => p === '/curl').length, 300);
  });

  test('FIN with a request in flight: the connection closes, the upstream stream is cancelled, destroy_remote_active_rq counts it', async () => {
    const remoteActive0 = await stat('downstream_cx_destroy_remote_active_rq');
    const aborted0 = backend.aborted;
    const c = await RawH2.open(proxy.ports.h2);
    c.headers(1, requestBlock('/slow?ms=5000'));
    await until('the request reached the backend', async () => backend.requests.includes('/slow?ms=5000'));
    const t0 = Date.now();
    c.socket.end(); // FIN, no GOAWAY
    assert.ok(await c.waitClosed(3000), 'the proxy did not close its side');
    await until('upstream stream cancelled', async () => backend.aborted > aborted0, 3000);
    assert.ok(Date.now() - t0 < 3000);
    await until('destroy_remote_active_rq', async () => (await stat('downstream_cx_destroy_remote_active_rq')) === remoteActive0 + 1);
    await until('downstream_cx_active back to 0', async () => (await stat('downstream_cx_active')) === 0);
  });

  test('50 clients that send a request, read the answer and just close (FIN): all closed, counted as remote closes', async () => {
    const remote0 = await stat('downstream_cx_destroy_remote');
    for (let i = 0; i < 50; i++) {
      const c = await RawH2.open(proxy.ports.h2);
      c.headers(1, requestBlock('/fin'));
      await c.waitFor((x) => x.streamFrames(1).some((f) => f.flags & 1), 5000, 'response');
      c.socket.end();
    }
    await until('downstream_cx_active back to 0', async () => (await stat('downstream_cx_active')) === 0);
    assert.equal(await closeWaitCount(proxy.ports.h2), 0);
    assert.ok((await stat('downstream_cx_destroy_remote')) >= remote0 + 50);
  });

  test('codec HTTP2: clients that close before (or in the middle of) the preface leave nothing open', async () => {
    for (const sent of [Buffer.alloc(0), Buffer.from('PRI * HTTP/2.0\r\n'), Buffer.from('GET / HTTP/1.1\r\n\r\n')]) {
      const s = connect(proxy.ports.h2only, '127.0.0.1');
      await new Promise((r) => s.once('connect', r));
      s.on('error', () => { /* reset by the proxy */ });
      s.resume(); // read what the proxy says (SETTINGS, GOAWAY), or 'close' never comes
      s.end(sent);
      const closed = await Promise.race([new Promise((r) => s.once('close', () => r(true))), sleep(3000).then(() => false)]);
      s.destroy();
      assert.ok(closed, `the proxy kept the connection open after ${JSON.stringify(sent.toString())} + FIN`);
    }
    await until('http.h2only.downstream_cx_active back to 0', async () => ((await proxy.stat('http.h2only.downstream_cx_active')) ?? 0) === 0, 3000);
    assert.equal(await closeWaitCount(proxy.ports.h2only), 0);
  });

  test('a client that resets its TCP connection mid-request: cleaned up, upstream cancelled', async () => {
    const aborted0 = backend.aborted;
    const c = await RawH2.open(proxy.ports.h2);
    c.headers(1, requestBlock('/slow?ms=4000&rst=1'));
    await until('the request reached the backend', async () => backend.requests.includes('/slow?ms=4000&rst=1'));
    c.socket.resetAndDestroy();
    await until('upstream stream cancelled', async () => backend.aborted > aborted0, 3000);
    await until('downstream_cx_active back to 0', async () => (await stat('downstream_cx_active')) === 0);
  });
});
