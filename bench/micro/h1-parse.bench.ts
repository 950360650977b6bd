import type { Bench } from 'tinybench';
import { parseHead, findHeadEnd, serializeHeaders } from '../../packages/proxy/src/http/h1/parse.ts';

/** Request and response heads like the L7 benchmark's (wrk → proxy → nginx). */
const REQUEST = Buffer.from('GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:10000\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n');
const RESPONSE = Buffer.from('HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 12:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello');

export default function register(bench: Bench): void {
  bench.add('h1 parse request head', () => {
    const end = findHeadEnd(REQUEST, 0);
    parseHead(REQUEST, 0, end - 4, true, 100);
  });
  bench.add('h1 parse response head', () => {
    const end = findHeadEnd(RESPONSE, 0);
    parseHead(RESPONSE, 0, end - 4, false, 100);
  });
  const head = parseHead(RESPONSE, 0, findHeadEnd(RESPONSE, 0) - 4, false, 100);
  if (typeof head === 'string') throw new Error(head);
  bench.add('h1 serialize response headers', () => {
    serializeHeaders(head.headers);
  });
}
