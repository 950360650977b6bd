// Envoy compatibility of the HTTP/1.1 codec (issue 9 items 1 and 10): repeated headers never crash
// the process, absolute-form targets are routed by path and authority, an identical repeated
// Content-Length goes upstream once, and codec errors are answered and access-logged as Envoy does
// (status, DPE, http1.* response_code_details, local reply body, protocol error counter).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanup, type RunningProxy } from '../lib/proxy.ts';
import { vhost, routeTo } from '../lib/config.ts';
import { startRecordingBackend, type RecordingBackend } from './http1-backend.ts';
import { accessLog, assertAlive, logLine, probe, startSkua } from './http1-harness.ts';

/** Header names skua itself reads on the request path: each is sent twice. */
const READ_BY_SKUA = ['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'te', 'expect', 'user-agent', 'x-forwarded-for',
  'x-forwarded-proto', 'x-request-id', 'x-envoy-original-dst-host', 'x-envoy-upstream-rq-timeout-ms', 'x-envoy-retry-on',
  'x-envoy-max-retries', 'x-envoy-upstream-rq-per-try-timeout-ms', 'x-envoy-retry-grpc-on', 'grpc-timeout', 'content-type',
  'authorization', 'cookie', 'x-forwarded-client-cert', 'traceparent', 'http2-settings', 'accept-encoding', 'origin'];

describe('HTTP/1.1 codec: Envoy compatibility', { timeout: 60_000 }, () => {
  let backend: RecordingBackend;
  let proxy: RunningProxy;
  let strict: RunningProxy;
  let dropping: RunningProxy;

  before(async () => {
    backend = await startRecordingBackend();
    proxy = await startSkua(backend.port, {
      vhosts: [vhost([routeTo('backend', '/', {}, { request_headers_to_add: [{ header: { key: 'x-vhost', value: 'abs' } }] })], ['abs.test', 'abs.test:*'], 'abs')],
    });
    strict = await startSkua(backend.port, { hcm: { common_http_protocol_options: { headers_with_underscores_action: 'REJECT_REQUEST' } } });
    dropping = await startSkua(backend.port, { hcm: { common_http_protocol_options: { headers_with_underscores_action: 'DROP_HEADER' } } });
  });
  after(() => cleanup(() => proxy?.stop(), () => strict?.stop(), () => dropping?.stop(), () => backend?.close()));

  test('Host twice (the request that killed the process): 400, and every listener keeps serving', async () => {
    const r = await probe(proxy.ports.http, 'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n');
    assert.deepEqual(r.statuses, [400]);
    await assertAlive(proxy);
    assert.deepEqual((await probe(proxy.ports.http, 'GET /ok HTTP/1.1\r\nHost: h\r\n\r\n', { responses: 1 })).statuses, [200]);
  });

  test('every header skua reads, sent twice: served, combined into one value, process alive', async () => {
    backend.clear();
    const lines = READ_BY_SKUA.flatMap((n) => [`${n}: 1`, `${n}: 2`]).join('\r\n');
    const r = await probe(proxy.ports.http, `GET /dups HTTP/1.1\r\nHost: h\r\n${lines}\r\n\r\n`, { responses: 1 });
    assert.deepEqual(r.statuses, [200], r.raw.slice(0, 300));
    const seen = backend.targets('/dups')[0];
    const auth = seen.headers.filter(([k]) => k === 'authorization');
    assert.deepEqual(auth, [['authorization', '1, 2']]);
    assert.deepEqual(seen.headers.filter(([k]) => k === 'cookie'), [['cookie', '1; 2']]);
    await assertAlive(proxy);
  });

  test('headers named constructor, toString and __proto__ reach the backend as sent', async () => {
    backend.clear();
    const r = await probe(proxy.ports.http, 'GET /proto HTTP/1.1\r\nHost: h\r\nconstructor: x\r\ntoString: y\r\n__proto__: z\r\n\r\n', { responses: 1 });
    assert.deepEqual(r.statuses, [200]);
    const seen = backend.targets('/proto')[0].headers.filter(([k]) => ['constructor', 'tostring', '__proto__'].includes(k));
    assert.deepEqual(seen, [['constructor', 'x'], ['tostring', 'y'], ['__proto__', 'z']]);
  });

  test('two identical Content-Length headers: the body goes upstream with one', async () => {
    backend.clear();
    const r = await probe(proxy.ports.http, 'POST /cl HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello', { responses: 1 });
    assert.deepEqual(r.statuses, [200]);
    const seen = backend.targets('/cl')[0];
    assert.deepEqual(seen.headers.filter(([k]) => k.toLowerCase() === 'content-length'), [['content-length', '5']]);
    assert.equal(seen.bodyBytes, 5);
  });

  test('absolute-form target: routed by the URL authority (virtual host) and path; Host follows the URL', async () => {
    backend.clear();
    const logs = accessLog(proxy).length;
    const r = await probe(proxy.ports.http, 'GET http://abs.test/abs/p?x=1 HTTP/1.1\r\nHost: other.test\r\n\r\n', { responses: 1 });
    assert.deepEqual(r.statuses, [200]);
    const seen = backend.targets('/abs/p')[0];
    assert.equal(seen.target, '/abs/p?x=1');
    assert.deepEqual(seen.headers.filter(([k]) => ['host', 'x-vhost'].includes(k)), [['host', 'abs.test'], ['x-vhost', 'abs']]);
    const line = await logLine(proxy, logs, (l) => l.path === '/abs/p?x=1');
    assert.deepEqual([line.status, line.method, line.authority], [200, 'GET', 'abs.test']);
  });

  const codecErrors: Array<[string, string, number, string, string]> = [
    ['a header line without a colon', 'GET / HTTP/1.1\r\nHost: h\r\nfoo bar\r\n\r\n', 400, 'http1.codec_error', 'Bad Request'],
    ['NUL in a header value', 'GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n', 400, 'http1.invalid_characters', 'Bad Request'],
    ['Content-Length with chunked', 'POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n', 400, 'http1.content_length_and_chunked_not_allowed', 'Bad Request'],
    ['Transfer-Encoding: gzip', 'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n', 501, 'http1.invalid_transfer_encoding', 'Not Implemented'],
    ['101 headers', `GET / HTTP/1.1\r\nHost: h\r\n${Array.from({ length: 100 }, (_, i) => `X-${i}: v\r\n`).join('')}\r\n`, 431, 'http1.too_many_headers', 'Request Header Fields Too Large'],
    ['61 KiB of headers', `GET / HTTP/1.1\r\nHost: h\r\nX: ${'a'.repeat(61 * 1024)}\r\n\r\n`, 431, 'http1.headers_too_large', 'Request Header Fields Too Large'],
    ['an invalid absolute URL', 'GET http://u@x/ HTTP/1.1\r\nHost: h\r\n\r\n', 400, 'http1.invalid_url', 'Bad Request'],
  ];
  for (const [name, request, status, details, body] of codecErrors) {
    test(`codec error, ${name}: ${status} "${body}", logged "- -" with DPE ${details}`, async () => {
      const logs = accessLog(proxy).length;
      const errors = (await proxy.stat('http.hardening.downstream_cx_protocol_error')) ?? 0;
      const r = await probe(proxy.ports.http, request);
      assert.deepEqual(r.statuses, [status]);
      assert.match(r.raw, /\r\nconnection: close\r\n/);
      assert.ok(r.raw.endsWith(`\r\n\r\n${body}`), `body: ${JSON.stringify(r.raw.slice(-60))}`);
      const line = await logLine(proxy, logs, (l) => l.details === details);
      assert.deepEqual(line, { status, flags: 'DPE', details, method: '-', path: '-', authority: '-' });
      assert.equal(await proxy.stat('http.hardening.downstream_cx_protocol_error'), errors + 1);
    });
  }

  test('bad chunk framing, with the head or after it was routed: 400 "Bad Request", logged with DPE http1.codec_error', async () => {
    backend.clear();
    let logs = accessLog(proxy).length;
    const r = await probe(proxy.ports.http, 'POST /chunk-now HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhelloXX');
    assert.deepEqual(r.statuses, [400]);
    let line = await logLine(proxy, logs, (l) => l.path === '/chunk-now');
    assert.deepEqual([line.status, line.flags, line.details, line.method], [400, 'DPE', 'http1.codec_error', 'POST']);
    logs = accessLog(proxy).length;
    const later = await probe(proxy.ports.http, '', { pieces: ['POST /chunk-later HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab', 'cXX'], gapMs: 300 });
    assert.deepEqual(later.statuses, [400]);
    line = await logLine(proxy, logs, (l) => l.path === '/chunk-later');
    assert.deepEqual([line.status, line.flags, line.details], [400, 'DPE', 'http1.codec_error']);
    assert.equal(backend.requests.length, 0, 'the backend never got a complete request');
  });

  test('HTTP/1.0 without accept_http_10: 426 logged with low_version', async () => {
    const logs = accessLog(proxy).length;
    const r = await probe(proxy.ports.http, 'GET /old HTTP/1.0\r\n\r\n');
    assert.deepEqual(r.statuses, [426]);
    const line = await logLine(proxy, logs, (l) => l.path === '/old');
    assert.deepEqual([line.status, line.flags, line.details, line.method], [426, '-', 'low_version', 'GET']);
  });

  test('headers_with_underscores_action REJECT_REQUEST: 400 http1.unexpected_underscore; DROP_HEADER: forwarded without it', async () => {
    const logs = accessLog(strict).length;
    const r = await probe(strict.ports.http, 'GET /u HTTP/1.1\r\nHost: h\r\nX_Under: 1\r\n\r\n');
    assert.deepEqual(r.statuses, [400]);
    const line = await logLine(strict, logs, (l) => l.status === 400);
    assert.deepEqual([line.flags, line.details], ['DPE', 'http1.unexpected_underscore']);
    backend.clear();
    const d = await probe(dropping.ports.http, 'GET /u HTTP/1.1\r\nHost: h\r\nX_Under: 1\r\nX-Kept: 2\r\n\r\n', { responses: 1 });
    assert.deepEqual(d.statuses, [200]);
    const names = backend.targets('/u')[0].headers.map(([k]) => k);
    assert.ok(names.includes('x-kept') && !names.includes('x_under'), names.join(','));
  });
});
