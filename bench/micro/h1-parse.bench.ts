import type { Bench } from 'tinybench';
import { STATUS_CODES } from 'node:http';
import { parseHead, findHeadEnd, headWindow, parseHeadText, serializeHeaders } from '../../packages/proxy/src/http/h1/parse.ts';
import { requestHead, responseMessage } from '../../packages/proxy/src/http/h1/wire.ts';

/** Request and response heads like the L7 benchmark's (wrk → proxy → nginx). */
const REQUEST = Buffer.from('GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:10000\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n');
const RESPONSE = Buffer.from('HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 12:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello');
const BODY = Buffer.from('hello');

/** How the codecs read a head: the head end found in the decoded window, parsed from the same string. */
function parseAsCodec(buf: Buffer, isRequest: boolean): void {
  const text = headWindow(buf, 65536);
  parseHeadText(text, text.indexOf('\r\n\r\n'), isRequest, 100);
}

export default function register(bench: Bench): void {
  bench.add('h1 parse request head (findHeadEnd + parseHead)', () => {
    const end = findHeadEnd(REQUEST, 0);
    parseHead(REQUEST, 0, end - 4, true, 100);
  });
  bench.add('h1 parse request head (as the codecs do)', () => parseAsCodec(REQUEST, true));
  bench.add('h1 parse response head (findHeadEnd + parseHead)', () => {
    const end = findHeadEnd(RESPONSE, 0);
    parseHead(RESPONSE, 0, end - 4, false, 100);
  });
  bench.add('h1 parse response head (as the codecs do)', () => parseAsCodec(RESPONSE, false));
  const head = parseHead(RESPONSE, 0, findHeadEnd(RESPONSE, 0) - 4, false, 100);
  if (typeof head === 'string') throw new Error(head);
  const h = { ...head.headers, connection: undefined, 'x-envoy-upstream-service-time': '1' };
  bench.add('h1 response + body to a Buffer (string concat, Buffer.from)', () => {
    const line = `HTTP/1.1 200 ${STATUS_CODES[200]}\r\n${serializeHeaders(h)}\r\n`;
    Buffer.from(line + BODY.toString('latin1'), 'latin1');
  });
  bench.add('h1 response + body to a Buffer (wire.ts responseMessage)', () => {
    responseMessage(200, h, '', '', BODY, '');
  });
  const rh = { host: '127.0.0.1:10000', 'user-agent': 'curl/7.88.1', accept: '*/*', 'x-forwarded-proto': 'http',
    'x-request-id': 'd6c7a9a4-1f2b-4c55-9f0e-3f4a2b1c0d9e', 'x-envoy-expected-rq-timeout-ms': '15000' };
  bench.add('h1 request head to a Buffer (string concat, Buffer.from)', () => {
    Buffer.from(`GET /index.html HTTP/1.1\r\n${serializeHeaders(rh)}\r\n`, 'latin1');
  });
  bench.add('h1 request head to a Buffer (wire.ts requestHead)', () => {
    requestHead('GET', '/index.html', rh, '');
  });
}
