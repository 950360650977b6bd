// Every vector of http1-vectors.ts against a real skua-proxy in front of the recording backend:
// the status (or close), that nothing smuggled and nothing after a refusal reached the backend, and
// that the process is alive with its memory bounded after a burst of all of them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, type RunningProxy } from '../lib/proxy.ts';
import { startRecordingBackend, type RecordingBackend } from './http1-backend.ts';
import { assertAlive, probe, startSkua } from './http1-harness.ts';
import { expectedForwarded, keepsAlive, NEXT, readFor, VECTORS } from './http1-vectors.ts';

describe('HTTP/1.1 hardening vectors through skua-proxy', { timeout: 180_000 }, () => {
  let backend: RecordingBackend;
  let proxy: RunningProxy;

  before(async () => {
    backend = await startRecordingBackend();
    proxy = await startSkua(backend.port);
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  for (const v of VECTORS) {
    test(`${v.group}: ${v.name} → ${v.status}`, async () => {
      backend.clear();
      const alive = keepsAlive(v);
      const r = await probe(proxy.ports.http, Buffer.from(v.request + NEXT, 'latin1'), { ...readFor(v), timeoutMs: 6000 });
      assert.equal(r.statuses[0], v.status, `status; got ${JSON.stringify(r.raw.slice(0, 300))}`);
      if (v.status === 101) {
        // Tunnel data after the 101, echoed by the backend: never parsed as requests.
        assert.ok(r.raw.endsWith(`\r\n\r\n${v.request.slice(v.request.indexOf('\r\n\r\n') + 4)}${NEXT}`), 'the bytes behind the upgrade are tunnelled after the 101');
        assert.equal(backend.targets('/next').length, 0);
      } else if (alive) {
        assert.deepEqual(r.statuses, [v.status, 200], 'the pipelined request is answered on the same connection');
        assert.equal(backend.targets('/next').length, 1);
      } else {
        assert.equal(r.closed, true, `the connection closes after ${v.status} (waited ${Math.round(r.ms)} ms)`);
        assert.equal(r.statuses.length, 1, 'nothing after the answer is read as HTTP');
        assert.equal(backend.targets('/next').length, 0, '/next never reaches the backend');
      }
      if (v.prompt) assert.ok(r.ms < 3000, `answered in ${Math.round(r.ms)} ms, not after a timeout`);
      assert.deepEqual(backend.targets('/smuggled'), [], 'no smuggled request reached the backend');
      assert.equal(backend.requests.length - (alive ? 1 : 0), expectedForwarded(v), `requests the backend parsed: ${JSON.stringify(backend.requests.map((q) => q.target))}`);
    });
  }

  test('alive with bounded memory after 20 rounds of every vector, 8 connections at a time', async () => {
    const before = await assertAlive(proxy);
    const all = Array.from({ length: 20 }, () => VECTORS).flat();
    for (let i = 0; i < all.length; i += 8) {
      await Promise.all(all.slice(i, i + 8).map((v) => probe(proxy.ports.http, Buffer.from(v.request + NEXT, 'latin1'), { ...readFor(v), timeoutMs: 6000 })));
    }
    const afterBurst = await assertAlive(proxy);
    assert.ok(afterBurst.heapUsed - before.heapUsed < 64 << 20, `heap grew by ${afterBurst.heapUsed - before.heapUsed} bytes`);
    assert.ok(afterBurst.rss < 512 << 20, `rss ${afterBurst.rss} bytes`);
    assert.deepEqual(backend.targets('/smuggled'), []);
  });
});
