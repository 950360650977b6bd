import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { leadingEmptyLines, partialHeadError } from '../src/http/h1/head-guard.ts';
import { absoluteForm } from '../src/http/h1/request-target.ts';
import { parseHeadText, Underscores } from '../src/http/h1/parse.ts';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

describe('partialHeadError: a head without its CRLFCRLF yet', () => {
  test('the start of a good head waits', () => {
    for (const s of ['\r', 'G', 'GET', 'GET /', 'GET / HTTP/1.1', 'GET / HTTP/1.1\r', 'GET / HTTP/1.1\r\n', 'GET / HTTP/1.1\r\nHost: a\r\n', 'GET / HTTP/1.1\r\nHost: a\r\n\r']) {
      assert.equal(partialHeadError(b(s), 0), false, JSON.stringify(s));
    }
  });
  test('refused at once: TLS ClientHello, binary, bare LF, bare CR, HTTP/0.9, bad request lines', () => {
    const hello = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);
    assert.equal(partialHeadError(hello, 0), true);
    for (const s of ['\0GET', ' GET /', 'GET / HTTP/1.1\nHost: a\n', 'GET / HTTP/1.1\r\nHost: a\n', 'GET / HTTP/1.1\rHost', 'GET /\r\n', 'GET / HTTP/2.0\r\n', 'GET  / HTTP/1.1\r\n']) {
      assert.equal(partialHeadError(b(s), 0), true, JSON.stringify(s));
    }
  });
  test('only the new bytes are checked, across reads', () => {
    const first = b('GET / HTTP/1.1\r\nHost: a\r');
    assert.equal(partialHeadError(first, 0), false);
    assert.equal(partialHeadError(b('GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n'), first.length), false);
    assert.equal(partialHeadError(b('GET / HTTP/1.1\r\nHost: a\rX'), first.length), true, 'the CR ending the last read is followed by X');
    assert.equal(partialHeadError(b('GET /\r'), 0), false);
    assert.equal(partialHeadError(b('GET /\r\n'), 6), true, 'the request line completes in the second read');
  });
  test('leading empty lines (RFC 9112 §2.2) are counted', () => {
    assert.equal(leadingEmptyLines(b('\r\n\r\nGET')), 4);
    assert.equal(leadingEmptyLines(b('\r')), 0);
    assert.equal(leadingEmptyLines(b('GET')), 0);
  });
});

describe('absoluteForm', () => {
  test('authority and path (with query) of http(s) URLs', () => {
    assert.deepEqual(absoluteForm('http://a.test/x/y?q=1'), { scheme: 'http', authority: 'a.test', path: '/x/y?q=1' });
    assert.deepEqual(absoluteForm('HTTPS://A.test:8443'), { scheme: 'https', authority: 'A.test:8443', path: '/' });
    assert.deepEqual(absoluteForm('http://a.test?q'), { scheme: 'http', authority: 'a.test', path: '/?q' });
    assert.deepEqual(absoluteForm('http://[::1]:80/p'), { scheme: 'http', authority: '[::1]:80', path: '/p' });
  });
  test('not an absolute http(s) URL: undefined', () => {
    for (const t of ['www.x.com', 'ftp://x/a', 'http:///a', 'http://user@x/a', '://x', 'http:/x']) assert.equal(absoluteForm(t), undefined, t);
  });
});

describe('parseHeadText: request-only rules', () => {
  const head = (s: string, u: 0 | 1 | 2 = Underscores.Allow) => parseHeadText(s, s.length, true, 100, u);
  test('headers_with_underscores_action: ALLOW keeps, REJECT_REQUEST refuses, DROP_HEADER drops', () => {
    const text = 'GET / HTTP/1.1\r\nHost: a\r\nX_Thing: 1\r\nX-Other: 2';
    assert.deepEqual((head(text) as { headers: object }).headers, { host: 'a', x_thing: '1', 'x-other': '2' });
    assert.equal(head(text, Underscores.Reject), 'underscore');
    assert.deepEqual((head(text, Underscores.Drop) as { headers: object }).headers, { host: 'a', 'x-other': '2' });
  });
  test('Transfer-Encoding in an HTTP/1.0 request is faulty framing (RFC 9112 §6.1)', () => {
    assert.equal(head('POST / HTTP/1.0\r\nTransfer-Encoding: chunked'), 'bad-request');
  });
});
