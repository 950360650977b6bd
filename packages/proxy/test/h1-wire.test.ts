import { test } from 'node:test';
import assert from 'node:assert/strict';
import { framed, requestHead, responseMessage } from '../src/http/h1/wire.ts';

test('requestHead writes the request line, defined headers (repeated ones once per value), extra lines and the blank line', () => {
  const h = { host: 'example.com', 'x-gone': undefined, accept: ['a/b', 'c/d'], 'content-length': 12 };
  const out = requestHead('POST', '/p?q=1', h, 'transfer-encoding: chunked\r\n');
  assert.equal(out.toString('latin1'),
    'POST /p?q=1 HTTP/1.1\r\nhost: example.com\r\naccept: a/b\r\naccept: c/d\r\ncontent-length: 12\r\ntransfer-encoding: chunked\r\n\r\n');
});

test('responseMessage puts status line, headers, framing, prefix, body and suffix in one buffer', () => {
  const out = responseMessage(200, { server: 'skua', 'set-cookie': ['a=1', 'b=2'] }, 'transfer-encoding: chunked\r\n', '5\r\n', Buffer.from('hello'), '\r\n');
  assert.equal(out.toString('latin1'),
    'HTTP/1.1 200 OK\r\nserver: skua\r\nset-cookie: a=1\r\nset-cookie: b=2\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n');
  assert.equal(responseMessage(799, {}, '', '', undefined, '').toString('latin1'), 'HTTP/1.1 799 Unknown\r\n\r\n');
});

test('latin1 bytes are kept as they are (obs-text in values)', () => {
  const value = 'caf\u00e9 \u00ff';
  const out = responseMessage(204, { 'x-v': value }, '', '', undefined, '');
  assert.deepEqual(out, Buffer.from(`HTTP/1.1 204 No Content\r\nx-v: ${value}\r\n\r\n`, 'latin1'));
});

test('framed wraps a body in chunk framing', () => {
  assert.equal(framed('3\r\n', Buffer.from('abc'), '\r\n').toString('latin1'), '3\r\nabc\r\n');
  assert.equal(framed('0\r\n\r\n', undefined, '').toString('latin1'), '0\r\n\r\n');
});
