import type { Exchange, Headers } from '../../../http/exchange.ts';

export type HeaderPair = readonly [name: string, value: string];

/** How a response header from an OK answer lands on the downstream response (HeaderValueOption.append_action). */
export type ResponseHeaderAction = 'add' | 'set' | 'add_if_absent' | 'overwrite_if_exists';

/** One authorization answer, whichever service gave it (Envoy's ExtAuthz::Response). */
export interface AuthzResult {
  status: 'ok' | 'denied' | 'error';
  /** The denial's status (403 unless the service said otherwise). */
  httpStatus: number;
  body: string;
  /** OK: request headers to overwrite; denied: the local reply's headers. */
  headersToSet: HeaderPair[];
  /** Appended to a request header that exists (comma-joined), ignored otherwise (and on a denial). */
  headersToAppend: HeaderPair[];
  /** Added as another entry (HTTP service allowed_upstream_headers_to_append). */
  headersToAdd: HeaderPair[];
  headersToRemove: string[];
  responseHeaders: Array<{ readonly name: string; readonly value: string; readonly action: ResponseHeaderAction }>;
  queryToSet: HeaderPair[];
  queryToRemove: string[];
  metadata: Record<string, unknown> | undefined;
}

export function newResult(status: AuthzResult['status'], httpStatus = 403): AuthzResult {
  return {
    status, httpStatus, body: '', headersToSet: [], headersToAppend: [], headersToAdd: [], headersToRemove: [],
    responseHeaders: [], queryToSet: [], queryToRemove: [], metadata: undefined,
  };
}

/** A call that failed (timeout, unreachable, 5xx from an HTTP service): status_on_error applies. */
export function errorResult(): AuthzResult {
  return newResult('error');
}

/**
 * Pseudo-headers and Host are never edited by an authorization answer (Envoy refuses to remove
 * them; the router derives them from the request).
 */
function editable(name: string): boolean {
  return name.length > 0 && name.charCodeAt(0) !== 58 /* : */ && name !== 'host';
}

function addValue(h: Headers, name: string, value: string): void {
  const cur = h[name];
  h[name] = cur === undefined ? value : Array.isArray(cur) ? [...cur, value] : [cur, value];
}

/** An OK answer's edits to the request on its way upstream. */
export function applyToRequest(r: AuthzResult, ex: Exchange): void {
  const h = ex.headers;
  for (const [k, v] of r.headersToSet) if (editable(k)) h[k] = v;
  for (const [k, v] of r.headersToAdd) if (editable(k)) addValue(h, k, v);
  for (const [k, v] of r.headersToAppend) {
    const cur = h[k];
    if (cur !== undefined && editable(k)) h[k] = `${Array.isArray(cur) ? cur.join(',') : cur},${v}`;
  }
  // Unset rather than delete: the router's serialisers skip undefined values.
  for (const k of r.headersToRemove) if (editable(k) && h[k] !== undefined) h[k] = undefined;
  if (r.queryToSet.length || r.queryToRemove.length) ex.path = editQuery(ex.path, r.queryToSet, r.queryToRemove);
}

/** An OK answer's response_headers_to_add, applied to the downstream response. */
export function applyToResponse(r: AuthzResult, headers: Headers): void {
  for (const { name, value, action } of r.responseHeaders) {
    if (!editable(name)) continue;
    const cur = headers[name];
    if (action === 'add') addValue(headers, name, value);
    else if (action === 'set') headers[name] = value;
    else if (action === 'add_if_absent') { if (cur === undefined) headers[name] = value; }
    else if (cur !== undefined) headers[name] = value;
  }
}

/** Headers a local reply computes itself: an authorization server's values for them are dropped. */
const REPLY_OWNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'date', 'server']);

/** The headers of a denial's local reply: the answer's headers replace the reply's, repeats kept (several Set-Cookie). */
export function denialHeaders(r: AuthzResult): Headers {
  const out: Headers = {};
  for (const [k, v] of r.headersToSet) if (editable(k) && !REPLY_OWNED.has(k)) addValue(out, k, v);
  return out;
}

/** query_parameters_to_set / _to_remove on a path's query string (keys compared as written). */
export function editQuery(path: string, set: readonly HeaderPair[], remove: readonly string[]): string {
  const q = path.indexOf('?');
  const base = q < 0 ? path : path.slice(0, q);
  const params = q < 0 || q === path.length - 1 ? [] : path.slice(q + 1).split('&').map((p) => {
    const eq = p.indexOf('=');
    return eq < 0 ? [p, undefined] as const : [p.slice(0, eq), p.slice(eq + 1)] as const;
  });
  let out = params.filter(([k]) => !remove.includes(k)) as Array<readonly [string, string | undefined]>;
  for (const [k, v] of set) {
    const i = out.findIndex(([n]) => n === k);
    if (i < 0) out.push([k, v]);
    else { out[i] = [k, v]; out = out.filter(([n], j) => j <= i || n !== k); }
  }
  if (out.length === 0) return base;
  return `${base}?${out.map(([k, v]) => (v === undefined ? k : `${k}=${v}`)).join('&')}`;
}
