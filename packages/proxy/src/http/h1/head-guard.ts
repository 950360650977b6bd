import { isRequestLine, isTokenChar } from './parse.ts';

const CR = 13, LF = 10;

/** Empty lines (CRLF) a request may be preceded by (RFC 9112 §2.2): how many bytes of them `buf` starts with. */
export function leadingEmptyLines(buf: Buffer): number {
  let i = 0;
  while (i + 1 < buf.length && buf[i] === CR && buf[i + 1] === LF) i += 2;
  return i;
}

/**
 * Checks on a request head that has not ended yet (no CRLFCRLF so far), so that input which can
 * never become a valid head is refused at once instead of holding the connection until a timeout:
 * a first byte that cannot start a method (a TLS ClientHello on a plaintext port, binary noise),
 * a bare LF or CR (a peer using LF line endings waits for a CRLFCRLF that never comes), and a
 * complete first line that is not `METHOD SP target SP HTTP/1.x` (HTTP/0.9's `GET /`).
 * Runs only on partial heads, and only over the bytes from `from` on (earlier ones passed).
 */
export function partialHeadError(buf: Buffer, from: number): boolean {
  const n = buf.length;
  // (A lone CR may be the start of an empty line before the request line.)
  if (from === 0 && n > 0 && !isTokenChar(buf[0]) && !(n === 1 && buf[0] === CR)) return true;
  // A CR must be followed by LF and an LF preceded by CR; the last byte may be a CR whose LF is still to come.
  for (let i = buf.indexOf(LF, from); i >= 0; i = buf.indexOf(LF, i + 1)) if (i === 0 || buf[i - 1] !== CR) return true;
  for (let i = buf.indexOf(CR, from > 0 ? from - 1 : 0); i >= 0 && i < n - 1; i = buf.indexOf(CR, i + 1)) if (buf[i + 1] !== LF) return true;
  // The request line, once it is complete and if it was not checked before.
  const eol = buf.indexOf('\r\n', 0, 'latin1');
  return eol >= 0 && eol + 2 > from && !isRequestLine(buf.toString('latin1', 0, eol));
}
