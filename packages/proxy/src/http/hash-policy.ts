import type { Msg } from '../config/fields.ts';
import { xxHash64Into } from '../upstream/lb-hash.ts';
import { canonicalIp } from '../core/canonical-ip.ts';
import { compileRe2Global } from '../matchers/regex.ts';

/**
 * RouteAction.hash_policy compiled once, evaluated per request into the 64-bit hash that
 * RING_HASH / MAGLEV pick by (Envoy's Http::HashPolicyImpl). Each policy hashes its value
 * with xxHash64; results combine as hash = rotl(hash, 1) ^ next; a `terminal` policy that
 * produced a hash ends the walk. No regex is compiled and nothing but the final bigint (and a
 * generated cookie) is allocated per request.
 */

type Headers = Record<string, string | string[] | undefined>;

// Request strings are hashed as 'wire' data: Node and Skua decode header bytes as latin1, so
// each char is the byte Envoy would hash. A regex_rewrite result mixes in config text and is
// hashed as 'latin1' (chars above U+00FF as UTF-8).

/** The request fields hash policies read. An Exchange / RequestView satisfies it. */
export interface HashRequest {
  /** Request headers without pseudo-headers. */
  readonly headers: Headers;
  /** :path, query included. */
  readonly path: string;
  readonly authority?: string;
  readonly method?: string;
  readonly scheme?: string;
}

/** The downstream connection (ConnInfo satisfies it). */
export interface HashConnection {
  /** Envoy's downstream remoteAddress(): pass the XFF-derived client address when the HCM trusts XFF. */
  readonly remoteAddress: string;
  readonly remotePort?: number;
  readonly localAddress?: string;
  readonly localPort?: number;
}

type MethodKind = 'header' | 'cookie' | 'source_ip' | 'query_parameter';

/** One compiled hash method. One class, so the evaluation loop stays monomorphic. */
export class HashMethod {
  readonly kind: MethodKind;
  readonly terminal: boolean;
  /** Header name (lower case), cookie name or query parameter name. */
  readonly name: string;
  /** header: regex_rewrite applied to each value before hashing (global replace). */
  readonly rewrite: RegExp | undefined;
  readonly substitution: string;
  /** cookie: ttl in whole seconds; undefined when unset (then a missing cookie yields no hash). */
  readonly ttlSeconds: number | undefined;
  /** cookie: what follows `name="value` in a generated Set-Cookie (Max-Age, Path, attributes, HttpOnly). */
  readonly setCookieSuffix: string;

  constructor(kind: MethodKind, terminal: boolean, name: string, opts: { rewrite?: RegExp; substitution?: string; ttlSeconds?: number; setCookieSuffix?: string } = {}) {
    this.kind = kind;
    this.terminal = terminal;
    this.name = name;
    this.rewrite = opts.rewrite;
    this.substitution = opts.substitution ?? '';
    this.ttlSeconds = opts.ttlSeconds;
    this.setCookieSuffix = opts.setCookieSuffix ?? '';
  }
}

/** A route's compiled hash_policy list. */
export interface HashPolicies {
  readonly methods: readonly HashMethod[];
  /** Some cookie policy has a ttl: a request without the cookie gets one generated (pass `setCookies`). */
  readonly generatesCookies: boolean;
}

const SPECIFIERS = ['header', 'cookie', 'connection_properties', 'query_parameter', 'filter_state'] as const;

/**
 * RouteAction.hash_policy (the list's items). Undefined when the list is empty or holds only
 * connection_properties without source_ip (which Envoy skips). Errors name the field.
 */
export function compileHashPolicies(list: readonly Msg[]): HashPolicies | undefined {
  const methods: HashMethod[] = [];
  let generatesCookies = false;
  for (const m of list) {
    m.onlyFields([...SPECIFIERS, 'terminal']);
    const set = SPECIFIERS.filter((s) => m.has(s));
    if (set.length === 0) throw m.error('', `one of ${SPECIFIERS.join(', ')} is required`);
    if (set.length > 1) throw m.error(set[1], `only one of ${SPECIFIERS.join(', ')} may be set (${set[0]} is)`);
    const terminal = m.bool('terminal');
    switch (set[0]) {
      case 'header': methods.push(compileHeader(m.requiredMsg('header'), terminal)); break;
      case 'cookie': {
        const c = compileCookie(m.requiredMsg('cookie'), terminal);
        if (c.ttlSeconds !== undefined) generatesCookies = true;
        methods.push(c);
        break;
      }
      case 'connection_properties': {
        const cp = m.requiredMsg('connection_properties');
        cp.onlyFields(['source_ip']);
        if (cp.bool('source_ip')) methods.push(new HashMethod('source_ip', terminal, ''));
        break;
      }
      case 'query_parameter': {
        const q = m.requiredMsg('query_parameter');
        q.onlyFields(['name']);
        methods.push(new HashMethod('query_parameter', terminal, q.requiredStr('name')));
        break;
      }
      case 'filter_state':
        throw m.error('filter_state', 'is not supported: there are no filter state objects to hash');
    }
  }
  return methods.length ? { methods, generatesCookies } : undefined;
}

const HEADER_NAME = /^:?[!#$%&'*+\-.^_`|~0-9a-zA-Z]+$/;

function compileHeader(h: Msg, terminal: boolean): HashMethod {
  h.onlyFields(['header_name', 'regex_rewrite']);
  const name = h.requiredStr('header_name');
  if (!HEADER_NAME.test(name)) throw h.error('header_name', `invalid header name ${JSON.stringify(name)}`);
  const rr = h.msg('regex_rewrite');
  if (!rr) return new HashMethod('header', terminal, name.toLowerCase());
  const pattern = rr.requiredMsg('pattern');
  const re = compileRe2Global(pattern);
  const groups = (new RegExp(`${re.source}|`).exec('')?.length ?? 1) - 1;
  const substitution = re2Substitution(rr, rr.str('substitution'), groups);
  return new HashMethod('header', terminal, name.toLowerCase(), { rewrite: re, substitution });
}

/** RE2 rewrite syntax (\0..\9, \\) to String.prototype.replace syntax ($&, $1.., literal $ as $$). */
function re2Substitution(m: Msg, s: string, groups: number): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '$') { out += '$$'; continue; }
    if (c !== '\\') { out += c; continue; }
    const d = s[++i];
    if (d === '\\') { out += '\\'; continue; }
    if (d === undefined || d < '0' || d > '9') throw m.error('substitution', `invalid rewrite pattern ${JSON.stringify(s)}: \\ must be followed by a digit or \\`);
    const g = d.charCodeAt(0) - 48;
    if (g > groups) throw m.error('substitution', `rewrite ${JSON.stringify(s)} uses \\${g} but the pattern has ${groups} capture group(s)`);
    // Two-digit form, so a literal digit after the group stays literal.
    out += g === 0 ? '$&' : `$0${g}`;
  }
  return out;
}

function compileCookie(c: Msg, terminal: boolean): HashMethod {
  c.onlyFields(['name', 'ttl', 'path', 'attributes']);
  const name = c.requiredStr('name');
  if (/[\s;,="]/.test(name)) throw c.error('name', `invalid cookie name ${JSON.stringify(name)}`);
  // Envoy keeps the whole seconds of the Duration.
  const ttlSeconds = c.has('ttl') ? Math.trunc(c.durationMs('ttl', 0) / 1000) : undefined;
  const path = c.str('path');
  if (/[\0-\x1f;]/.test(path)) throw c.error('path', 'must not contain control characters or ;');
  let suffix = '"';
  // A zero ttl makes a session cookie (no Max-Age).
  if (ttlSeconds) suffix += `; Max-Age=${ttlSeconds}`;
  if (path) suffix += `; Path=${path}`;
  for (const a of c.list('attributes')) {
    a.onlyFields(['name', 'value']);
    const an = a.requiredStr('name');
    const av = a.str('value');
    if (/[\0-\x1f;=]/.test(an)) throw a.error('name', `invalid cookie attribute name ${JSON.stringify(an)}`);
    if (/[\0-\x1f;]/.test(av)) throw a.error('value', 'must not contain control characters or ;');
    suffix += av ? `; ${an}=${av}` : `; ${an}`;
  }
  suffix += '; HttpOnly';
  return new HashMethod('cookie', terminal, name, { ttlSeconds, setCookieSuffix: suffix });
}

// ---------------------------------------------------------------------------------------------
// Evaluation

const NEXT = new Uint32Array(2);
const OUT64 = new BigUint64Array(1);
const OUT32 = new Uint32Array(OUT64.buffer);
/** Bounds of the value a method found in its source string (set by findCookie / findQueryParameter). */
let valueStart = 0;
let valueEnd = 0;

/**
 * The request's hash, or undefined when no policy produced a value (Envoy then picks at
 * random). Call it only when the cluster balances by hash (RING_HASH, MAGLEV), as Envoy
 * computes the hash only for those. `setCookies`: where a cookie policy with ttl puts the
 * Set-Cookie value it generated; add each to the response's set-cookie headers.
 */
export function computeRequestHash(policies: HashPolicies, req: HashRequest, conn?: HashConnection, setCookies?: string[]): bigint | undefined {
  return computeRequestHashInto(policies, req, conn, setCookies, OUT32) ? OUT64[0] : undefined;
}

/** computeRequestHash without the bigint: the hash goes to out[0] (low 32 bits) and out[1] (high). */
export function computeRequestHashInto(policies: HashPolicies, req: HashRequest, conn: HashConnection | undefined, setCookies: string[] | undefined, out: Uint32Array): boolean {
  const methods = policies.methods;
  let have = false;
  let hh = 0, hl = 0;
  for (let i = 0; i < methods.length; i++) {
    const m = methods[i];
    if (evaluate(m, req, conn, setCookies)) {
      if (have) {
        // Rotating the old value keeps duplicate policies from cancelling out.
        const rh = ((hh << 1) | (hl >>> 31)) >>> 0;
        const rl = ((hl << 1) | (hh >>> 31)) >>> 0;
        hh = (rh ^ NEXT[1]) >>> 0;
        hl = (rl ^ NEXT[0]) >>> 0;
      } else {
        hh = NEXT[1];
        hl = NEXT[0];
        have = true;
      }
    }
    if (m.terminal && have) break;
  }
  if (have) { out[0] = hl; out[1] = hh; }
  return have;
}

/** Hashes the method's value into NEXT; false when the request has none. */
function evaluate(m: HashMethod, req: HashRequest, conn: HashConnection | undefined, setCookies: string[] | undefined): boolean {
  switch (m.kind) {
    case 'header': return hashHeader(m, req);
    case 'cookie': return hashCookie(m, req, conn, setCookies);
    case 'source_ip': {
      const a = conn?.remoteAddress;
      if (!a) return false;
      // Envoy sees an IPv4-mapped peer on a dual-stack socket as IPv4.
      const ip = canonicalIp(a);
      xxHash64Into(NEXT, ip, 0, ip.length, 'wire');
      return true;
    }
    case 'query_parameter':
      if (!findQueryParameter(req.path, m.name)) return false;
      xxHash64Into(NEXT, req.path, valueStart, valueEnd, 'wire');
      return true;
  }
}

function headerValue(req: HashRequest, name: string): string | string[] | undefined {
  if (name.charCodeAt(0) === 58 /* : */) {
    switch (name) {
      case ':authority': return req.authority ?? req.headers.host;
      case ':path': return req.path;
      case ':method': return req.method;
      case ':scheme': return req.scheme;
      default: return undefined;
    }
  }
  if (name === 'host') return req.headers.host ?? req.authority;
  return req.headers[name];
}

function hashHeader(m: HashMethod, req: HashRequest): boolean {
  const v = headerValue(req, m.name);
  if (v === undefined) return false;
  if (typeof v === 'string') {
    if (m.rewrite === undefined) {
      xxHash64Into(NEXT, v, 0, v.length, 'wire');
      return true;
    }
    const s = v.replace(m.rewrite, m.substitution);
    xxHash64Into(NEXT, s, 0, s.length, 'latin1');
    return true;
  }
  if (v.length === 0) return false;
  // Several values: hash them sorted (order-independent), each seeded with the previous hash.
  const values = m.rewrite ? v.map((x) => x.replace(m.rewrite!, m.substitution)) : v.slice();
  values.sort(byBytes);
  NEXT[0] = 0; NEXT[1] = 0;
  const enc = m.rewrite ? 'latin1' : 'wire';
  for (const s of values) xxHash64Into(NEXT, s, 0, s.length, enc, NEXT[1], NEXT[0]);
  return true;
}

const byBytes = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function hashCookie(m: HashMethod, req: HashRequest, conn: HashConnection | undefined, setCookies: string[] | undefined): boolean {
  const header = req.headers.cookie;
  if (header !== undefined) {
    const src = typeof header === 'string' ? (findCookie(header, m.name) ? header : undefined) : findCookieIn(header, m.name);
    if (src !== undefined && valueEnd > valueStart) {
      xxHash64Into(NEXT, src, valueStart, valueEnd, 'wire');
      return true;
    }
  }
  if (m.ttlSeconds === undefined || !conn || !conn.localAddress) return false;
  // Envoy: the value is hex(xxHash64(remote ip:port + local ip:port)), the same for every stream of a connection.
  const seed = hostPort(conn.remoteAddress, conn.remotePort ?? 0) + hostPort(conn.localAddress, conn.localPort ?? 0);
  xxHash64Into(NEXT, seed, 0, seed.length, 'wire');
  const value = hex64(NEXT[1], NEXT[0]);
  if (setCookies) setCookies.push(`${m.name}="${value}${m.setCookieSuffix}`);
  xxHash64Into(NEXT, value, 0, value.length, 'wire');
  return true;
}

function hostPort(address: string, port: number): string {
  const a = canonicalIp(address);
  return a.includes(':') ? `[${a}]:${port}` : `${a}:${port}`;
}

function hex64(hi: number, lo: number): string {
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}

function findCookieIn(headers: readonly string[], name: string): string | undefined {
  for (const h of headers) if (findCookie(h, name)) return h;
  return undefined;
}

/**
 * Envoy's cookie parsing: `;`-separated pairs, leading spaces skipped, the first pair named
 * `name` wins, a value in double quotes loses them. Sets valueStart/valueEnd.
 */
function findCookie(s: string, name: string): boolean {
  const n = s.length;
  let i = 0;
  while (i <= n) {
    let end = s.indexOf(';', i);
    if (end < 0) end = n;
    let k = i;
    while (k < end && s.charCodeAt(k) === 32) k++;
    const eq = s.indexOf('=', i);
    if (eq >= 0 && eq < end && eq - k === name.length && s.startsWith(name, k)) {
      let vs = eq + 1, ve = end;
      if (ve - vs >= 2 && s.charCodeAt(vs) === 34 && s.charCodeAt(ve - 1) === 34) { vs++; ve--; }
      valueStart = vs;
      valueEnd = ve;
      return true;
    }
    i = end + 1;
  }
  return false;
}

/** The first `name` parameter of the query (undecoded, as Envoy's parseQueryString). Sets valueStart/valueEnd. */
function findQueryParameter(path: string, name: string): boolean {
  const q = path.indexOf('?');
  if (q < 0) return false;
  const n = path.length;
  let i = q + 1;
  while (i < n) {
    let end = path.indexOf('&', i);
    if (end < 0) end = n;
    let eq = path.indexOf('=', i);
    if (eq < 0 || eq > end) eq = end;
    if (eq - i === name.length && path.startsWith(name, i)) {
      valueStart = eq < end ? eq + 1 : end;
      valueEnd = end;
      return true;
    }
    i = end + 1;
  }
  return false;
}

/** Adds generated Set-Cookie values to response headers (keeping any the upstream set). */
export function applySetCookies(headers: Headers, cookies: readonly string[]): void {
  if (cookies.length === 0) return;
  const cur = headers['set-cookie'];
  headers['set-cookie'] = cur === undefined ? [...cookies] : Array.isArray(cur) ? [...cur, ...cookies] : [cur, ...cookies];
}
