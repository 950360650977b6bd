/**
 * Where our HTTP/1.1 request parsing differs from llhttp's on purpose. Each rule names one
 * difference, says why, and matches only inputs that show exactly it; fuzz/README.md lists them.
 */
import type { LlhttpVerdict } from './lib-llhttp.ts';
import type { OurVerdict } from './h1-llhttp.ts';
import { leadingEmptyLines } from '../../packages/proxy/src/http/h1/head-guard.ts';

interface Rule {
  readonly name: string;
  readonly kind: string;
  readonly matches: (ours: OurVerdict, theirs: LlhttpVerdict, data: Buffer) => boolean;
}

/** The methods llhttp knows (its method table, as node exposes it). */
import { createRequire } from 'node:module';
const LLHTTP_METHODS = new Set((createRequire(import.meta.url)('_http_common') as { methods: string[] }).methods);

const firstLine = (data: Buffer): string => {
  const s = data.toString('latin1', 0, Math.min(data.length, 8192));
  const lf = s.indexOf('\n');
  return lf < 0 ? s : s.slice(0, lf).replace(/\r$/, '');
};

/** Values of the header lines named `name` in the raw head (llhttp stops listing them at its error). */
function rawValues(data: Buffer, name: string): string[] {
  const s = data.toString('latin1');
  const lines = s.slice(0, s.indexOf('\r\n\r\n')).split('\r\n').slice(1);
  const out: string[] = [];
  for (const l of lines) if (l.toLowerCase().startsWith(name + ':')) out.push(l.slice(name.length + 1).trim());
  return out;
}

function headerCount(t: LlhttpVerdict, name: string): number {
  let n = 0;
  for (let i = 0; i < t.headers.length; i += 2) if (t.headers[i].toLowerCase() === name) n++;
  return n;
}

function hasHeader(t: LlhttpVerdict, name: string): boolean {
  for (let i = 0; i < t.headers.length; i += 2) if (t.headers[i].toLowerCase() === name) return true;
  return false;
}

function bodyText(data: Buffer): string {
  const s = data.toString('latin1');
  return s.slice(s.indexOf('\r\n\r\n') + 4);
}

/** Whether a chunk-size line of the body is 2^53 or more. */
function hugeChunk(body: string): boolean {
  for (const m of body.matchAll(/(?:^|\n)([0-9a-fA-F]+)/g)) if (m[1].length > 16 || BigInt('0x' + m[1]) >= 2n ** 53n) return true;
  return false;
}

/** The first chunk-size line of the body, if the head was accepted and is chunked. */
function chunkLine(data: Buffer): string {
  const s = data.toString('latin1');
  const body = s.indexOf('\r\n\r\n');
  const end = s.indexOf('\n', body + 4);
  return end < 0 ? s.slice(body + 4) : s.slice(body + 4, end + 1);
}

export const RULES: readonly Rule[] = [
  // RFC 9112 §3.2: an HTTP/1.1 request without Host gets 400 (as in Envoy); llhttp leaves it to the application.
  { name: 'missing-host', kind: 'we-refuse-head', matches: (o) => o.error === 'missing_host' },
  // RFC 9112 §3.2: a request with more than one Host field gets 400 (as in Envoy); llhttp passes both on.
  { name: 'duplicate-host', kind: 'we-refuse-head', matches: (o, t) => o.error === 'bad-request' && headerCount(t, 'host') > 1 },
  // Only `chunked` is implemented; any other coding (or a list) gets 501, as Envoy answers.
  { name: 'transfer-coding-not-chunked', kind: 'we-refuse-head', matches: (o) => o.error === 'bad-transfer-encoding' },
  // max_headers_count (Envoy's default 100): 431. llhttp has no count limit.
  { name: 'too-many-headers', kind: 'we-refuse-head', matches: (o) => o.error === 'too-many-headers' },
  // We speak HTTP/1.0 and 1.1 only; llhttp also takes HTTP/0.9 simple requests and other x.y versions.
  { name: 'http-version', kind: 'we-refuse-head', matches: (o, t) => o.error === 'bad-request' && !(t.versionMajor === 1 && (t.versionMinor === 0 || t.versionMinor === 1)) },
  { name: 'http-version', kind: 'llhttp-head-without-crlfcrlf', matches: (_o, t) => t.versionMajor === 0 && t.versionMinor === 9 },
  // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty framing; we refuse, llhttp refuses after the head.
  { name: 'http10-transfer-encoding', kind: 'we-refuse-head', matches: (o, t) => o.error === 'bad-request' && t.versionMinor === 0 && hasHeader(t, 'transfer-encoding') },
  // RFC 9110 §9.1: a method is any token (Envoy forwards extension methods); llhttp knows a fixed list.
  { name: 'extension-method', kind: 'we-accept-head', matches: (o, t) => t.error === 'HPE_INVALID_METHOD' && !LLHTTP_METHODS.has(o.parsed!.method) },
  // We take any request-target without spaces or controls; its form is judged later: path
  // normalisation refuses it (400), or no route matches it (404). llhttp checks URL characters.
  { name: 'request-target-chars', kind: 'we-accept-head', matches: (_o, t, d) => t.error === 'HPE_INVALID_URL' && /^[^ ]+ [^ ]+ HTTP\/1\.[01]$/.test(firstLine(d)) },
  // RFC 9112 §6.3: identical duplicate Content-Length values may be taken as one; llhttp refuses any duplicate.
  { name: 'duplicate-content-length', kind: 'we-accept-head', matches: (_o, t, d) => t.error === 'HPE_UNEXPECTED_CONTENT_LENGTH' && rawValues(d, 'content-length').length > 1 },
  // Chunk sizes must stay exact integers here (below 2^53 bytes, at most 16 hex digits); llhttp takes 64-bit sizes.
  { name: 'chunk-size-digits', kind: 'we-refuse-body', matches: (_o, _t, d) => hugeChunk(bodyText(d)) },
  // RFC 9112 §7.1.1 allows BWS between the chunk size and ';' or CRLF; strict llhttp refuses it.
  { name: 'chunk-size-bws', kind: 'we-accept-body', matches: (_o, t, d) => t.error === 'HPE_INVALID_CHUNK_SIZE' && /(^|\n)[0-9a-fA-F]+[ \t]+[;\r]/.test(bodyText(d)) },
  // RFC 9110 §5.6.1: recipients accept empty list elements ("chunked,"); llhttp refuses them in Transfer-Encoding.
  { name: 'te-empty-list-element', kind: 'we-accept-head', matches: (o, t, d) => t.error === 'HPE_INVALID_TRANSFER_ENCODING' && o.parsed!.chunked && /,\s*(,|$)|^\s*,/.test(rawValues(d, 'transfer-encoding').join(', ')) },
  // Chunk extensions are skipped up to their CRLF (a bare CR or LF in them is refused); llhttp checks their syntax.
  { name: 'chunk-extension', kind: 'we-accept-body', matches: (_o, t, d) => t.error === 'HPE_STRICT' && /^[0-9a-fA-F]+[;\t ]/.test(chunkLine(d)) },
  // RFC 9112 §3: request-line = method SP request-target SP HTTP-version, one SP each; we refuse more
  // (a proxy that splits differently from its upstream is a smuggling risk). llhttp skips extra spaces.
  { name: 'request-line-spaces', kind: 'we-refuse-head', matches: (o, _t, d) => o.error === 'bad-request' && /^[^ ]+ {2,}[^ ]|[^ ] {2,}HTTP\/\d\.\d$/.test(firstLine(d)) },
  // RFC 9112 §2.2: empty lines before the request line are skipped as CRLF pairs (H1Connection does it);
  // a bare CR or LF there is refused like bare line endings anywhere else. llhttp skips any CR and LF bytes.
  { name: 'leading-bare-line-ending', kind: 'we-refuse-head', matches: (o, _t, d) => o.error === 'bad-request' && (d[leadingEmptyLines(d)] === 13 || d[leadingEmptyLines(d)] === 10) },
];

/**
 * Differences that are findings, reported to the HTTP/1 codec's owner and not fixed here: the fuzzer
 * does not stop on them, and fuzz/README.md lists them as open.
 */
export const REPORTED: readonly Rule[] = [
  // RFC 9110 §6.5.1: framing fields have no meaning in trailers. We keep them as trailers; llhttp refuses the message.
  { name: 'trailer-framing-field', kind: 'we-accept-body', matches: (o, t) => /CONTENT_LENGTH|TRANSFER_ENCODING/.test(t.error) && o.body === 'complete' },
];

/** The name of the known, justified difference this is, or undefined. */
export function explain(kind: string, ours: OurVerdict, theirs: LlhttpVerdict, data: Buffer): string | undefined {
  for (const r of RULES) if (r.kind === kind && r.matches(ours, theirs, data)) return r.name;
  for (const r of REPORTED) if (r.kind === kind && r.matches(ours, theirs, data)) return `reported:${r.name}`;
  return undefined;
}
