/**
 * Node's own HTTP/1 parser (llhttp, the one node:http servers use, with their default strict
 * settings), driven synchronously in-process: what it makes of the first request in some bytes.
 */
import { createRequire } from 'node:module';

interface LlhttpParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(data: Buffer): number | (Error & { code: string; bytesParsed: number });
  finish(): unknown;
  close(): void;
  [k: number]: unknown;
}
interface LlhttpModule {
  new (): LlhttpParser;
  REQUEST: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
  kOnExecute: number;
  kOnHeaders: number;
  kLenientNone: number;
}

/** `methods` maps llhttp's method codes to names. */
const { HTTPParser, methods: METHODS } = createRequire(import.meta.url)('_http_common') as { HTTPParser: LlhttpModule; methods: string[] };

export interface LlhttpVerdict {
  /** The first request's head was accepted (headers-complete reached without an error before it). */
  headAccepted: boolean;
  /** The first request's body ended (message complete) without an error. */
  messageComplete: boolean;
  /** llhttp's error code, or '' (an error after the first message counts too). */
  error: string;
  /** Bytes consumed before the error. */
  errorAt: number;
  method: string;
  upgrade: boolean;
  versionMinor: number;
  versionMajor: number;
  /** Raw header name/value pairs as llhttp delivered them. */
  headers: string[];
}

const parser = new HTTPParser();
let verdict: LlhttpVerdict;

function onHeadersComplete(major: number, minor: number, headers: string[] | undefined, method: number, _url: string,
  _status: number, _message: string, upgrade: boolean): number {
  if (!verdict.headAccepted) {
    verdict.headAccepted = true;
    verdict.versionMajor = major;
    verdict.versionMinor = minor;
    verdict.method = METHODS[method] ?? String(method);
    verdict.upgrade = upgrade;
    if (headers) verdict.headers.push(...headers);
  }
  return 0;
}

/** Runs llhttp over `data` as one request stream (strict, node's default header size limit off). */
export function llhttpParse(data: Buffer): LlhttpVerdict {
  verdict = { headAccepted: false, messageComplete: false, error: '', errorAt: -1, method: '', upgrade: false, versionMinor: -1, versionMajor: -1, headers: [] };
  parser.initialize(HTTPParser.REQUEST, {}, 0, HTTPParser.kLenientNone);
  parser[HTTPParser.kOnHeaders] = (headers: string[]) => { if (!verdict.headAccepted) verdict.headers.push(...headers); };
  parser[HTTPParser.kOnHeadersComplete] = onHeadersComplete;
  parser[HTTPParser.kOnBody] = () => {};
  parser[HTTPParser.kOnMessageComplete] = () => { if (!verdict.error) verdict.messageComplete = true; };
  parser[HTTPParser.kOnExecute] = () => {};
  const r = parser.execute(data);
  if (typeof r === 'object' && r !== null) {
    verdict.error = r.code;
    verdict.errorAt = r.bytesParsed;
  }
  return verdict;
}
