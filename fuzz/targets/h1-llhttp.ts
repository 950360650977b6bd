/**
 * Differential: our HTTP/1.1 request parsing (what H1Connection does with the first request in a
 * stream) against Node's llhttp on the same bytes. Where one accepts and the other refuses, or both
 * accept but read the head or the body framing differently, the input is a finding unless a rule in
 * ./lib-llhttp-known.ts explains it (those are the places we differ on purpose; fuzz/README.md).
 */
import { leadingEmptyLines } from '../../packages/proxy/src/http/h1/head-guard.ts';
import { ChunkedDecoder, parseHeadText, type Head } from '../../packages/proxy/src/http/h1/parse.ts';
import { llhttpParse, type LlhttpVerdict } from './lib-llhttp.ts';
import { explain } from './lib-llhttp-known.ts';
import { fail } from './invariant.ts';
import { appendFileSync } from 'node:fs';

const MAX_HEADERS = 100;

export interface OurVerdict {
  /** 'incomplete': no CRLFCRLF yet (we wait; we never judge a partial head). */
  head: 'incomplete' | 'accepted' | 'refused';
  error: string;
  parsed: Head | undefined;
  /** After an accepted head: the body framing of the first request. */
  body: 'none' | 'complete' | 'incomplete' | 'error';
}

export function ourParse(input: Buffer): OurVerdict {
  // H1Connection skips empty lines (CRLF) before a request line (RFC 9112 §2.2).
  const data = input.subarray(leadingEmptyLines(input));
  const text = data.toString('latin1');
  const at = text.indexOf('\r\n\r\n');
  if (at < 0) return { head: 'incomplete', error: '', parsed: undefined, body: 'none' };
  const head = parseHeadText(text, at, true, MAX_HEADERS);
  if (typeof head === 'string') return { head: 'refused', error: head, parsed: undefined, body: 'none' };
  if (head.versionMinor === 1 && head.headers.host === undefined) return { head: 'refused', error: 'missing_host', parsed: head, body: 'none' };
  const rest = data.subarray(at + 4);
  let body: OurVerdict['body'] = 'none';
  if (head.method === 'CONNECT' || head.upgrade) body = 'none';
  else if (head.chunked) {
    const d = new ChunkedDecoder();
    body = d.push(rest, 0, () => {}) < 0 ? 'error' : d.done ? 'complete' : 'incomplete';
  } else if (head.contentLength > 0) body = rest.length >= head.contentLength ? 'complete' : 'incomplete';
  else body = 'complete';
  return { head: 'accepted', error: '', parsed: head, body };
}

export type Disagreement = { kind: string; detail: string } | undefined;

/** How the two verdicts differ, or undefined when they agree. */
export function compare(ours: OurVerdict, theirs: LlhttpVerdict): Disagreement {
  if (ours.head === 'incomplete') {
    return theirs.headAccepted ? { kind: 'llhttp-head-without-crlfcrlf', detail: theirs.error } : undefined;
  }
  if (ours.head === 'refused') return theirs.headAccepted ? { kind: 'we-refuse-head', detail: ours.error } : undefined;
  if (!theirs.headAccepted) return { kind: 'we-accept-head', detail: theirs.error };
  const p = ours.parsed!;
  if (p.method !== theirs.method) return { kind: 'method-differs', detail: `${p.method} vs ${theirs.method}` };
  if (p.versionMinor !== theirs.versionMinor || theirs.versionMajor !== 1) return { kind: 'version-differs', detail: `1.${p.versionMinor} vs ${theirs.versionMajor}.${theirs.versionMinor}` };
  const mine = flatten(p);
  const llhttp = combined(theirs.headers);
  if (mine.sort().join('\n') !== llhttp.sort().join('\n')) return { kind: 'headers-differ', detail: JSON.stringify({ ours: mine, llhttp }) };
  if (ours.body === 'none') return undefined;
  const theirBodyError = theirs.error !== '' && !theirs.messageComplete;
  if (ours.body === 'error' && !theirBodyError) return { kind: 'we-refuse-body', detail: theirs.messageComplete ? 'llhttp completed it' : 'llhttp waits' };
  // We judge a chunk line or trailer line when its LF arrives; llhttp may refuse it byte by byte before.
  if (ours.body === 'incomplete' && theirBodyError) return undefined;
  if (ours.body !== 'error' && theirBodyError) return { kind: 'we-accept-body', detail: theirs.error };
  if (ours.body === 'complete' && !theirs.messageComplete) return { kind: 'body-end-differs', detail: 'we end the message, llhttp does not' };
  if (ours.body === 'incomplete' && theirs.messageComplete) return { kind: 'body-end-differs', detail: 'llhttp ends the message, we wait' };
  return undefined;
}

/** Our headers in arrival order is not kept (a map), so compare name-sorted "name: value" lines. */
function flatten(h: Head): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(h.headers)) for (const x of Array.isArray(v) ? v : [v]) out.push(`${k}: ${x}`);
  return out;
}

/**
 * llhttp's raw header lines as we forward a request: repeated fields combined in order with ", "
 * ("; " for Cookie, RFC 9110 §5.3), identical repeated Content-Length kept once.
 */
function combined(raw: readonly string[]): string[] {
  const byName = new Map<string, string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase(), value = raw[i + 1];
    const prev = byName.get(name);
    if (prev === undefined) byName.set(name, value);
    else if (name !== 'content-length' && value !== '') byName.set(name, prev === '' ? value : `${prev}${name === 'cookie' ? '; ' : ', '}${value}`);
  }
  return [...byName].map(([k, v]) => `${k}: ${v}`);
}

const EXPLORE = process.env.SKUA_FUZZ_EXPLORE;

export function fuzz(data: Buffer): void {
  const ours = ourParse(data);
  const theirs = llhttpParse(data);
  const d = compare(ours, theirs);
  if (!d) return;
  // The rules read the request as H1Connection does: after the empty lines it skips.
  const known = explain(d.kind, ours, theirs, data.subarray(leadingEmptyLines(data)));
  if (known) return;
  if (EXPLORE) { appendFileSync(EXPLORE, JSON.stringify({ ...d, llhttp: theirs.error, input: data.toString('latin1').slice(0, 300) }) + '\n'); return; }
  fail(`parsers disagree (${d.kind})`, { detail: d.detail, llhttp: theirs.error, input: data.toString('latin1').slice(0, 500) });
}
