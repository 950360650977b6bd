// Upgrade smuggling (issue 9 item 2) and upgrade variants: only a 101 turns an HTTP/1.1 connection
// into a tunnel; a refused upgrade is relayed and the connection closes, so a request pipelined
// behind it never reaches the backend unrouted. `Upgrade: h2c` is ignored, as Envoy does.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, type RunningProxy } from '../lib/proxy.ts';
import { startRecordingBackend, type RecordingBackend } from './http1-backend.ts';
import { accessLog, assertAlive, logLine, probe, startSkua } from './http1-harness.ts';

const SMUGGLED = 'GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n';
const upgrade = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${extra}\r\n`;

describe('HTTP/1.1 upgrades', { timeout: 60_000 }, () => {
  let backend: RecordingBackend;
  let proxy: RunningProxy;

  before(async () => {
    backend = await startRecordingBackend();
    proxy = await startSkua(backend.port, { route: { timeout: '1s' } });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('a backend that answers 200 to an upgrade: relayed, connection closed, the pipelined request never reaches the backend', async () => {
    backend.clear();
    const logs = accessLog(proxy).length;
    const r = await probe(proxy.ports.http, upgrade('/plain') + SMUGGLED, { timeoutMs: 5000 });
    assert.deepEqual(r.statuses, [200]);
    assert.match(r.raw, /\r\nconnection: close\r\n/i);
    assert.equal(r.closed, true);
    await new Promise((res) => setTimeout(res, 200));
    assert.deepEqual(backend.requests.map((q) => q.target), ['/plain'], 'the backend parsed only the upgrade request');
    assert.doesNotMatch(backend.raw(), /smuggled/, 'not even as bytes');
    const line = await logLine(proxy, logs, (l) => l.path === '/plain');
    assert.deepEqual([line.status, line.flags, line.details], [200, '-', 'via_upstream']);
  });

  test('a backend that answers 404 with a chunked body: the body arrives whole, then the close', async () => {
    backend.clear();
    const r = await probe(proxy.ports.http, upgrade('/status/404') + SMUGGLED, { timeoutMs: 5000 });
    assert.deepEqual(r.statuses, [404]);
    assert.equal(r.closed, true);
    assert.equal(backend.targets('/smuggled').length, 0);
  });

  test('bytes sent right behind the upgrade request wait for the 101, then go through the tunnel', async () => {
    backend.clear();
    const r = await probe(proxy.ports.http, upgrade('/ws?delay=300') + SMUGGLED, { until: (raw) => raw.includes(SMUGGLED), timeoutMs: 5000 });
    assert.deepEqual(r.statuses, [101]);
    assert.ok(r.raw.endsWith(`\r\n\r\n${SMUGGLED}`), 'echoed through the tunnel after the 101');
    assert.equal(backend.earlyBytes, 0, 'nothing reached the backend before it answered 101');
    assert.deepEqual(backend.requests.map((q) => q.target), ['/ws?delay=300'], 'the tunnelled bytes were never parsed as a request');
  });

  test('a backend that never answers the upgrade: 504 after the route timeout, UT', async () => {
    backend.clear();
    const logs = accessLog(proxy).length;
    const r = await probe(proxy.ports.http, upgrade('/hold') + SMUGGLED, { timeoutMs: 5000 });
    assert.deepEqual(r.statuses, [504]);
    assert.equal(r.closed, true);
    const line = await logLine(proxy, logs, (l) => l.path === '/hold');
    assert.deepEqual([line.status, line.flags, line.details], [504, 'UT', 'upstream_response_timeout']);
    assert.equal(backend.targets('/smuggled').length, 0);
  });

  test('Upgrade: h2c is ignored: the request is served and the connection stays HTTP/1.1', async () => {
    backend.clear();
    const h2c = 'GET /h2c HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n';
    const r = await probe(proxy.ports.http, `${h2c}GET /after HTTP/1.1\r\nHost: h\r\n\r\n`, { responses: 2, timeoutMs: 5000 });
    assert.deepEqual(r.statuses, [200, 200]);
    const seen = backend.requests.map((q) => [q.target, q.headers.map(([k]) => k.toLowerCase()).filter((k) => ['upgrade', 'http2-settings', 'connection'].includes(k))]);
    assert.deepEqual(seen, [['/h2c', []], ['/after', []]]);
  });

  test('Host twice on an upgrade request: 400, and the process lives', async () => {
    backend.clear();
    const r = await probe(proxy.ports.http, `GET /ws HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`, { timeoutMs: 5000 });
    assert.deepEqual(r.statuses, [400]);
    assert.equal(backend.requests.length, 0);
    await assertAlive(proxy);
  });
});
