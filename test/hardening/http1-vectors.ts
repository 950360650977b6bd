// Byte-level HTTP/1.1 request vectors for the hardening suites and compare-nginx.ts. Each is sent on
// a fresh connection followed by a pipelined `GET /next` request; a vector skua refuses must close the
// connection with no request (and nothing smuggled) reaching the backend, a vector it accepts gets
// its response and then /next's. Bodies that smuggle a request name it /smuggled.

export interface Vector {
  readonly name: string;
  readonly group: string;
  /** The request bytes (latin1). */
  readonly request: string;
  /** skua's answer: the status, and whether the connection then closes. */
  readonly status: number;
  /** The answer must come at once (no head end, no timeout involved). */
  readonly prompt?: boolean;
  /** Requests the backend sees for the vector itself when accepted (default 1 if status < 400, else 0). */
  readonly forwarded?: number;
  /** An accepted vector whose connection then closes (Connection: close, a refused upgrade). */
  readonly close?: boolean;
  /** Why this answer, when it is a choice. */
  readonly note?: string;
}

const SMUGGLED = 'GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n';
export const NEXT = 'GET /next HTTP/1.1\r\nHost: h\r\n\r\n';

const post = (headers: string, body: string, line = 'POST /v HTTP/1.1'): string => `${line}\r\nHost: h\r\n${headers}\r\n\r\n${body}`;
const get = (headers: string, line = 'GET /v HTTP/1.1'): string => `${line}\r\n${headers}${headers ? '\r\n' : ''}\r\n`;
const chunkedSmuggle = `0\r\n\r\n${SMUGGLED}`;
const chunkOf = (s: string): string => `${s.length.toString(16)}\r\n${s}\r\n0\r\n\r\n`;
const CLIENT_HELLO = Buffer.from('16030100c8010000c40303' + '00'.repeat(32) + '000002130101000099', 'hex').toString('latin1');

export const VECTORS: readonly Vector[] = [
  // ---- CL.TE / TE.CL / TE.TE
  { group: 'framing', name: 'CL.TE: Content-Length and chunked', request: post(`Content-Length: ${chunkedSmuggle.length}\r\nTransfer-Encoding: chunked`, chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE.CL: chunked and a short Content-Length', request: post('Content-Length: 4\r\nTransfer-Encoding: chunked', `${SMUGGLED.length.toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`), status: 400 },
  { group: 'framing', name: 'TE.TE: Transfer-Encoding: xchunked', request: post('Transfer-Encoding: xchunked', chunkedSmuggle), status: 501 },
  { group: 'framing', name: 'TE.TE: xchunked with Content-Length', request: post(`Content-Length: ${chunkedSmuggle.length}\r\nTransfer-Encoding: xchunked`, chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE.TE: space before the colon', request: post('Transfer-Encoding : chunked', chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE.TE: tab before the colon', request: post('Transfer-Encoding\t: chunked', chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE: leading spaces in the value (OWS)', request: post('Transfer-Encoding:   chunked', chunkOf('hello')), status: 200, note: 'OWS is legal (RFC 9110 §5.5)' },
  { group: 'framing', name: 'TE: tab as OWS', request: post('Transfer-Encoding:\tchunked', chunkOf('hello')), status: 200, note: 'OWS is legal' },
  { group: 'framing', name: 'TE: upper case CHUNKED', request: post('Transfer-Encoding: CHUNKED', chunkOf('hello')), status: 200 },
  { group: 'framing', name: 'TE.TE: chunked, identity', request: post('Transfer-Encoding: chunked, identity', chunkedSmuggle), status: 501 },
  { group: 'framing', name: 'TE.TE: identity, chunked', request: post('Transfer-Encoding: identity, chunked', chunkedSmuggle), status: 501, note: 'only a lone "chunked" is understood (as Envoy)' },
  { group: 'framing', name: 'TE.TE: chunked twice on two lines', request: post('Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked', chunkedSmuggle), status: 501, note: 'Envoy joins them to "chunked,chunked": 501' },
  { group: 'framing', name: 'TE.TE: chunked then x on two lines', request: post('Transfer-Encoding: chunked\r\nTransfer-Encoding: x', chunkedSmuggle), status: 501 },
  { group: 'framing', name: 'TE.TE: quoted "chunked"', request: post('Transfer-Encoding: "chunked"', chunkedSmuggle), status: 501 },
  { group: 'framing', name: 'TE.TE: obs-fold before chunked', request: post('Transfer-Encoding:\r\n chunked', chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE.TE: vertical tab before chunked', request: post('Transfer-Encoding: \x0bchunked', chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE.TE: NUL after chunked', request: post('Transfer-Encoding: chunked\0', chunkedSmuggle), status: 400 },
  { group: 'framing', name: 'TE in an HTTP/1.0 request', request: post('Transfer-Encoding: chunked', chunkedSmuggle, 'POST /v HTTP/1.0'), status: 400, note: 'RFC 9112 §6.1: faulty framing' },
  { group: 'framing', name: 'TE with Content-Length: 0', request: post('Transfer-Encoding: chunked\r\nContent-Length: 0', chunkedSmuggle), status: 400 },
  // ---- Content-Length
  { group: 'content-length', name: 'two different Content-Length', request: post('Content-Length: 5\r\nContent-Length: 6', 'hello!'), status: 400 },
  { group: 'content-length', name: 'two identical Content-Length', request: post('Content-Length: 5\r\nContent-Length: 5', 'hello'), status: 200, note: 'forwarded once' },
  { group: 'content-length', name: 'Content-Length list "5, 5"', request: post('Content-Length: 5, 5', 'hello'), status: 400, note: 'a choice: RFC 9110 allows treating it as 5' },
  { group: 'content-length', name: 'Content-Length +5', request: post('Content-Length: +5', 'hello'), status: 400 },
  { group: 'content-length', name: 'Content-Length -1', request: post('Content-Length: -1', 'hello'), status: 400 },
  { group: 'content-length', name: 'Content-Length 0x5', request: post('Content-Length: 0x5', 'hello'), status: 400 },
  { group: 'content-length', name: 'Content-Length 20 digits', request: post('Content-Length: 99999999999999999999', 'hello'), status: 400 },
  { group: 'content-length', name: 'Content-Length with trailing space', request: post('Content-Length: 5 ', 'hello'), status: 200 },
  { group: 'content-length', name: 'GET with a body', request: post('Content-Length: 5', 'hello', 'GET /v HTTP/1.1'), status: 200 },
  // ---- Host and other duplicates
  { group: 'duplicates', name: 'Host twice, different', request: get('Host: a\r\nHost: b'), status: 400, note: 'RFC 9112 §3.2 MUST; this crashed skua' },
  { group: 'duplicates', name: 'Host twice, same', request: get('Host: a\r\nHost: a'), status: 400 },
  { group: 'duplicates', name: 'no Host in HTTP/1.1', request: get('X: y'), status: 400 },
  { group: 'duplicates', name: 'empty Host', request: get('Host:'), status: 200, note: 'a choice: routed to the * virtual host' },
  { group: 'duplicates', name: 'Authorization twice', request: get('Host: h\r\nAuthorization: a\r\nAuthorization: b'), status: 200, note: 'combined into one value' },
  { group: 'duplicates', name: 'Cookie twice', request: get('Host: h\r\nCookie: a=1\r\nCookie: b=2'), status: 200 },
  { group: 'duplicates', name: 'Connection: close twice', request: get('Host: h\r\nConnection: close\r\nConnection: close'), status: 200, close: true },
  { group: 'duplicates', name: 'headers named constructor and __proto__', request: get('Host: h\r\nconstructor: x\r\n__proto__: y\r\n__proto__: z'), status: 200 },
  // ---- characters
  { group: 'characters', name: 'NUL in a value', request: get('Host: h\r\nX: a\0b'), status: 400 },
  { group: 'characters', name: 'bare CR in a value', request: get('Host: h\r\nX: a\rb'), status: 400, prompt: true },
  { group: 'characters', name: 'DEL in a value', request: get('Host: h\r\nX: a\x7fb'), status: 400 },
  { group: 'characters', name: 'LF inside a name', request: get('Host: h\r\nX\nY: z'), status: 400, prompt: true },
  { group: 'characters', name: 'space inside a name', request: get('Host: h\r\nBad Name: x'), status: 400 },
  { group: 'characters', name: 'line without a colon', request: get('Host: h\r\nNoColon'), status: 400 },
  { group: 'characters', name: 'empty name', request: get('Host: h\r\n: x'), status: 400 },
  { group: 'characters', name: 'obs-fold continuation', request: get('Host: h\r\nX: a\r\n  b'), status: 400 },
  { group: 'characters', name: 'non-ASCII in a name', request: get('Host: h\r\nX\xe9: a'), status: 400 },
  { group: 'characters', name: 'obs-text (latin1) in a value', request: get('Host: h\r\nX: caf\xe9'), status: 200 },
  { group: 'characters', name: 'underscore in a name (default ALLOW)', request: get('Host: h\r\nX_Y: z'), status: 200 },
  // ---- chunked bodies
  { group: 'chunked', name: 'chunk size of 17 hex digits', request: post('Transfer-Encoding: chunked', 'fffffffffffffffff\r\nhello\r\n0\r\n\r\n'), status: 400 },
  { group: 'chunked', name: 'chunk extension', request: post('Transfer-Encoding: chunked', '5;foo=bar\r\nhello\r\n0\r\n\r\n'), status: 200 },
  { group: 'chunked', name: 'bare LF in a chunk extension', request: post('Transfer-Encoding: chunked', `5;a\nb\r\nhello\r\n${chunkedSmuggle}`), status: 400 },
  { group: 'chunked', name: 'bare LF chunk lines', request: post('Transfer-Encoding: chunked', '5\nhello\n0\n\n'), status: 400 },
  { group: 'chunked', name: 'space before the chunk size', request: post('Transfer-Encoding: chunked', ' 5\r\nhello\r\n0\r\n\r\n'), status: 400 },
  { group: 'chunked', name: 'negative chunk size', request: post('Transfer-Encoding: chunked', '-5\r\nhello\r\n0\r\n\r\n'), status: 400 },
  { group: 'chunked', name: '0x chunk size', request: post('Transfer-Encoding: chunked', '0x5\r\nhello\r\n0\r\n\r\n'), status: 400 },
  { group: 'chunked', name: 'chunk data longer than its size', request: post('Transfer-Encoding: chunked', `3\r\nhello\r\n${chunkedSmuggle}`), status: 400 },
  { group: 'chunked', name: 'trailer fields', request: post('Transfer-Encoding: chunked', '5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n'), status: 200 },
  // ---- request line
  { group: 'request-line', name: 'HTTP/0.9 "GET /" with an empty line', request: 'GET /\r\n\r\n', status: 400, prompt: true },
  { group: 'request-line', name: 'HTTP/0.9 "GET /" alone', request: 'GET /\r\n', status: 400, prompt: true },
  { group: 'request-line', name: 'HTTP/2.0 in a request line', request: get('Host: h', 'GET / HTTP/2.0'), status: 400 },
  { group: 'request-line', name: 'HTTP/1.2', request: get('Host: h', 'GET / HTTP/1.2'), status: 400, note: 'a choice: RFC 9112 lets a server treat 1.2 as 1.1' },
  { group: 'request-line', name: 'lower-case http/1.1', request: get('Host: h', 'GET / http/1.1'), status: 400 },
  { group: 'request-line', name: 'two spaces after the method', request: get('Host: h', 'GET  / HTTP/1.1'), status: 400 },
  { group: 'request-line', name: 'tab as a separator', request: get('Host: h', 'GET\t/ HTTP/1.1'), status: 400 },
  { group: 'request-line', name: 'space inside the target', request: get('Host: h', 'GET /a b HTTP/1.1'), status: 400 },
  { group: 'request-line', name: 'bare LF line endings', request: 'GET /v HTTP/1.1\nHost: h\n\n', status: 400, prompt: true },
  { group: 'request-line', name: 'CRLF request line, LF header line', request: 'GET /v HTTP/1.1\r\nHost: h\n\r\n', status: 400, prompt: true },
  { group: 'request-line', name: 'empty line before the request line', request: `\r\n${get('Host: h')}`, status: 200, note: 'RFC 9112 §2.2' },
  { group: 'request-line', name: 'TLS ClientHello on the plaintext port', request: CLIENT_HELLO, status: 400, prompt: true },
  { group: 'request-line', name: 'binary noise', request: '\x00\x01\x02\x03\xff\xfe', status: 400, prompt: true },
  { group: 'request-line', name: 'absolute-form target', request: get('Host: other', 'GET http://abs.test/abs?x=1 HTTP/1.1'), status: 200, note: 'routed by the URL path and authority, as Envoy' },
  { group: 'request-line', name: 'absolute-form https target', request: get('Host: other', 'GET https://abs.test/abs HTTP/1.1'), status: 200 },
  { group: 'request-line', name: 'absolute-form with userinfo', request: get('Host: h', 'GET http://u@abs.test/ HTTP/1.1'), status: 400 },
  { group: 'request-line', name: 'authority-form for GET', request: get('Host: h', 'GET www.x.test HTTP/1.1'), status: 400 },
  { group: 'request-line', name: 'asterisk-form for GET', request: get('Host: h', 'GET * HTTP/1.1'), status: 400 },
  { group: 'request-line', name: 'HTTP/1.0 (accept_http_10 off)', request: get('Host: h', 'GET /v HTTP/1.0'), status: 426, note: "Envoy's default" },
  // ---- limits
  { group: 'limits', name: '101 headers', request: get(['Host: h', ...Array.from({ length: 100 }, (_, i) => `X-${i}: v`)].join('\r\n')), status: 431 },
  { group: 'limits', name: '61 KiB of headers', request: get(`Host: h\r\nX: ${'a'.repeat(61 * 1024)}`), status: 431 },
  // ---- upgrades
  { group: 'upgrade', name: 'websocket upgrade refused by the backend, request pipelined behind it', request: `GET /plain HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n${SMUGGLED}`, status: 200, close: true, note: 'relayed, then close: only a 101 makes a tunnel' },
  { group: 'upgrade', name: 'websocket upgrade accepted, bytes pipelined behind it', request: `GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n${SMUGGLED}`, status: 101, close: true, note: 'the bytes behind it are tunnel data' },
  { group: 'upgrade', name: 'websocket upgrade not enabled on the route', request: `GET /nows HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n${SMUGGLED}`, status: 403 },
  { group: 'upgrade', name: 'Upgrade: h2c offer', request: 'GET /v HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n', status: 200, note: 'ignored, as Envoy' },
  { group: 'upgrade', name: 'Upgrade without Connection: upgrade', request: get('Host: h\r\nUpgrade: websocket'), status: 200 },
  { group: 'upgrade', name: 'upgrade with Host twice', request: `GET /ws HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n${SMUGGLED}`, status: 400 },
  { group: 'upgrade', name: 'CONNECT with no CONNECT route', request: `CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n${SMUGGLED}`, status: 404 },
  // ---- pipelining after errors
  { group: 'pipelining', name: 'request pipelined behind a bad one', request: `GET /v HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n${SMUGGLED}`, status: 400 },
  { group: 'pipelining', name: 'request pipelined behind a bad chunked body', request: post('Transfer-Encoding: chunked', `5\r\nhelloXX\r\n0\r\n\r\n${SMUGGLED}`), status: 400 },
];

/** Requests the backend must see for `v` itself (the pipelined /next is counted apart). */
export function expectedForwarded(v: Vector): number {
  return v.forwarded ?? (v.status < 400 ? 1 : 0);
}

/** How long to read for `v`: enough responses, the echo of the bytes behind a 101, or the close. */
export function readFor(v: Vector): { responses?: number; until?: (raw: string) => boolean } {
  if (v.status === 101) return { until: (raw) => raw.includes(NEXT) };
  return keepsAlive(v) ? { responses: 2 } : {};
}

/** Whether `v` leaves the connection open for the pipelined /next request. */
export function keepsAlive(v: Vector): boolean {
  return v.status < 400 && !v.close && v.status !== 101;
}
