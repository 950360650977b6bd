/** Chunked transfer coding of HTTP/1.1 bodies (RFC 9112 §7.1), decoded as it streams. */
import type { Headers } from './parse.ts';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Control characters but HTAB: refused in trailer values as in header values. */
const BAD_VALUE = /[\0-\x08\x0a-\x1f\x7f]/;

const St = { SIZE: 0, EXT: 1, SIZE_LF: 2, DATA: 3, DATA_CR: 4, DATA_LF: 5, TRAILER: 6, DONE: 7, SIZE_BWS: 8 } as const;

/**
 * Streaming chunked-encoding decoder. `push` returns the number of bytes of
 * `buf` it consumed (all of them unless the message ended inside `buf`), or -1
 * on a framing error. Data slices go to `onData` without copying.
 */
export class ChunkedDecoder {
  private state: number = St.SIZE;
  private size = 0;
  private sizeDigits = 0;
  private trailerLine = '';
  private trailerBytes = 0;
  trailers: Headers | undefined;
  done = false;

  push(buf: Buffer, start: number, onData: (chunk: Buffer) => void): number {
    let i = start;
    const n = buf.length;
    while (i < n) {
      switch (this.state) {
        case St.SIZE: {
          const c = buf[i];
          const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
          if (d >= 0) {
            // At most 16 digits, and the size stays an exact integer (below 2^53).
            if (++this.sizeDigits > 16 || this.size >= 2 ** 49) return -1;
            this.size = this.size * 16 + d;
            i++;
          } else if (this.sizeDigits === 0) return -1;
          else if (c === 13) { this.state = St.SIZE_LF; i++; }
          else if (c === 59) { this.state = St.EXT; i++; }
          else if (c === 32 || c === 9) { this.state = St.SIZE_BWS; i++; }
          else return -1;
          break;
        }
        case St.SIZE_BWS: {
          // RFC 9112 §7.1.1: after the size only whitespace, then ';' (an extension) or the line's end.
          const c = buf[i++];
          if (c === 59) this.state = St.EXT;
          else if (c === 13) this.state = St.SIZE_LF;
          else if (c !== 32 && c !== 9) return -1;
          break;
        }
        case St.EXT: {
          const cr = buf.indexOf(13, i);
          const lf = buf.indexOf(10, i);
          // A bare LF inside an extension is a known smuggling vector.
          if (lf >= 0 && (cr < 0 || lf < cr)) return -1;
          if (cr < 0) { i = n; break; }
          i = cr + 1;
          this.state = St.SIZE_LF;
          break;
        }
        case St.SIZE_LF:
          if (buf[i++] !== 10) return -1;
          this.sizeDigits = 0;
          this.state = this.size === 0 ? St.TRAILER : St.DATA;
          break;
        case St.DATA: {
          const take = Math.min(this.size, n - i);
          onData(buf.subarray(i, i + take));
          i += take;
          this.size -= take;
          if (this.size === 0) this.state = St.DATA_CR;
          break;
        }
        case St.DATA_CR:
          if (buf[i++] !== 13) return -1;
          this.state = St.DATA_LF;
          break;
        case St.DATA_LF:
          if (buf[i++] !== 10) return -1;
          this.state = St.SIZE;
          break;
        case St.TRAILER: {
          const lf = buf.indexOf(10, i);
          const end = lf < 0 ? n : lf + 1;
          this.trailerBytes += end - i;
          if (this.trailerBytes > 65536) return -1;
          this.trailerLine += buf.toString('latin1', i, end);
          i = end;
          if (lf < 0) break;
          const line = this.trailerLine;
          this.trailerLine = '';
          if (line === '\r\n') { this.state = St.DONE; this.done = true; return i - start; }
          if (!line.endsWith('\r\n')) return -1;
          const colon = line.indexOf(':');
          if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) return -1;
          const value = line.slice(colon + 1, -2);
          if (BAD_VALUE.test(value)) return -1;
          // Defined, not assigned: a `__proto__` trailer is a field like any other.
          Object.defineProperty(this.trailers ??= {}, line.slice(0, colon).toLowerCase(), { value: trimOws(value), writable: true, enumerable: true, configurable: true });
          break;
        }
        default:
          return i - start;
      }
    }
    return i - start;
  }
}

/** Trims optional whitespace (SP / HTAB only, RFC 9110 §5.6.3). */
export function trimOws(s: string): string {
  let a = 0, b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}
