import { hostname } from 'node:os';
import { formatHostPort } from '../config/address.ts';
import type { LogEntry } from './log-entry.ts';
import { ConfigError } from '../core/errors.ts';
import { parseIpPort } from '../core/filter-state.ts';

/** Envoy's default access log format. */
export const DEFAULT_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" ' +
  '"%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n';

type Part = string | ((e: LogEntry) => string);
export type Formatter = (e: LogEntry) => string;
/** One command operator compiled: its raw value (undefined or '' when there is none). */
export type CommandFn = (e: LogEntry) => string | number | undefined;

const dash = (v: string | number | undefined): string => (v === undefined || v === '' ? '-' : String(v));

/** `X?Y` of %REQ(X?Y)% / %RESP(X?Y)%: the header names, lower-cased. */
export function headerCommandNames(kind: string, arg: string, path: string): { main: string; alt: string | undefined } {
  const q = arg.indexOf('?');
  const main = (q < 0 ? arg : arg.slice(0, q)).trim().toLowerCase();
  const alt = q < 0 ? undefined : arg.slice(q + 1).trim().toLowerCase() || undefined;
  if (!main) throw new ConfigError(path, `%${kind}()% needs a header name`);
  return { main, alt };
}

function headerCommand(kind: 'REQ' | 'RESP', arg: string, path: string): CommandFn {
  const { main, alt } = headerCommandNames(kind, arg, path);
  if (kind === 'REQ') return alt ? (e) => e.requestHeader(main) ?? e.requestHeader(alt) : (e) => e.requestHeader(main);
  return alt ? (e) => e.responseHeader(main) ?? e.responseHeader(alt) : (e) => e.responseHeader(main);
}

/** The host part of `host:port` / `[v6]:port`. */
export function hostWithoutPort(hostPort: string): string {
  if (hostPort.charCodeAt(0) === 91 /* [ */) { const end = hostPort.indexOf(']'); return end < 0 ? hostPort : hostPort.slice(1, end); }
  const colon = hostPort.lastIndexOf(':');
  return colon < 0 || hostPort.indexOf(':') !== colon ? hostPort : hostPort.slice(0, colon);
}

function portOf(hostPort: string): string | undefined {
  const colon = hostPort.lastIndexOf(':');
  if (colon < 0 || (hostPort.charCodeAt(0) !== 91 && hostPort.indexOf(':') !== colon)) return undefined;
  return hostPort.slice(colon + 1) || undefined;
}

const HOSTNAME = hostname();

const SIMPLE: Record<string, CommandFn> = {
  START_TIME: (e) => new Date(e.startTime).toISOString(),
  PROTOCOL: (e) => e.protocol,
  RESPONSE_CODE: (e) => e.status,
  RESPONSE_FLAGS: (e) => e.flags,
  RESPONSE_CODE_DETAILS: (e) => e.details,
  CONNECTION_TERMINATION_DETAILS: (e) => e.conn.terminationDetails,
  BYTES_RECEIVED: (e) => e.bytesReceived,
  BYTES_SENT: (e) => e.bytesSent,
  DURATION: (e) => Math.floor(e.durationMs),
  UPSTREAM_HOST: (e) => e.upstreamHost,
  UPSTREAM_REMOTE_ADDRESS: (e) => e.upstreamHost,
  UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: (e) => (e.upstreamHost ? hostWithoutPort(e.upstreamHost) : undefined),
  UPSTREAM_REMOTE_PORT: (e) => portOf(e.upstreamHost),
  UPSTREAM_CLUSTER: (e) => e.upstreamCluster,
  UPSTREAM_LOCAL_ADDRESS: (e) => e.upstreamLocalAddress,
  UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: (e) => (e.upstreamLocalAddress ? hostWithoutPort(e.upstreamLocalAddress) : undefined),
  UPSTREAM_LOCAL_PORT: (e) => portOf(e.upstreamLocalAddress),
  ROUTE_NAME: (e) => e.routeName,
  UPSTREAM_TRANSPORT_FAILURE_REASON: () => undefined,
  DOWNSTREAM_REMOTE_ADDRESS: (e) => formatHostPort(e.conn.remoteAddress, e.conn.remotePort),
  DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: (e) => e.conn.remoteAddress,
  DOWNSTREAM_REMOTE_PORT: (e) => e.conn.remotePort,
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS: (e) => formatHostPort(e.conn.remoteAddress, e.conn.remotePort),
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT: (e) => e.conn.remoteAddress,
  DOWNSTREAM_LOCAL_ADDRESS: (e) => formatHostPort(e.conn.localAddress, e.conn.localPort),
  DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: (e) => e.conn.localAddress,
  DOWNSTREAM_LOCAL_PORT: (e) => e.conn.localPort,
  REQUESTED_SERVER_NAME: (e) => e.conn.serverName,
  DOWNSTREAM_PEER_URI_SAN: (e) => e.conn.peerUriSans.join(','),
  DOWNSTREAM_LOCAL_URI_SAN: (e) => e.conn.localUriSans?.join(','),
  CONNECTION_ID: (e) => e.conn.id,
  HOSTNAME: () => HOSTNAME,
  LOCAL_REPLY_BODY: (e) => e.localReplyBody,
};

/**
 * A command operator compiled once, or undefined when Skua does not know it (each caller
 * words its own error). %REQ%/%RESP% read through the entry; %START_TIME(fmt)% takes a
 * strftime-style format.
 */
export function compileCommand(command: string, arg: string | undefined, path: string): CommandFn | undefined {
  if (command === 'REQ' || command === 'RESP') return headerCommand(command, arg ?? '', path);
  if (command === 'FILTER_STATE') return filterStateCommand(arg ?? '', path);
  if (command === 'START_TIME' && arg) {
    const f = compileTimeFormat(arg, path);
    return (e) => f(e.startTime);
  }
  return SIMPLE[command];
}

/** The object a request or connection has under `key`: the request's own first, then its connection's. */
function lookupFilterState(e: LogEntry, key: string): unknown {
  const v = e.filterState?.get(key);
  return v !== undefined ? v : e.conn.filterState?.get(key);
}

/**
 * %FILTER_STATE(KEY:PLAIN|TYPED)% and %FILTER_STATE(KEY:FIELD:NAME)%. Objects here serialise as
 * strings: PLAIN is the string, TYPED (Envoy's default) its JSON form; FIELD reads `ip` / `port`
 * of the address-valued well-known objects.
 */
function filterStateCommand(arg: string, path: string): CommandFn {
  const parts = arg.split(':');
  const key = parts[0];
  if (!key) throw new ConfigError(path, '%FILTER_STATE()% needs a key');
  const mode = parts[1] ?? 'TYPED';
  if (mode === 'PLAIN' && parts.length === 2) return (e) => { const v = lookupFilterState(e, key); return v === undefined ? undefined : String(v); };
  if (mode === 'TYPED' && parts.length <= 2) return (e) => { const v = lookupFilterState(e, key); return v === undefined ? undefined : JSON.stringify(String(v)); };
  if (mode === 'FIELD' && parts.length === 3 && (parts[2] === 'ip' || parts[2] === 'port')) {
    const field = parts[2];
    return (e) => {
      const v = lookupFilterState(e, key);
      const a = v === undefined ? undefined : parseIpPort(String(v));
      return a === undefined ? undefined : field === 'ip' ? a.address : a.port;
    };
  }
  throw new ConfigError(path, `unsupported %FILTER_STATE(${arg})%: expected KEY, KEY:PLAIN, KEY:TYPED or KEY:FIELD:ip|port`);
}


/** One piece of a format string: literal text (with %% already unescaped) or a command operator. */
export type FormatToken = string | { readonly command: string; readonly arg: string | undefined; readonly maxLength: number };

const COMMAND_AT = /%([A-Z0-9_]+)(?:\(([^)]*)\))?(?::(\d+))?%/y;

/**
 * Envoy's substitution format grammar: `%%` is a literal percent sign, every other `%` must start a
 * `%COMMAND%`, `%COMMAND(arg)%` or `%COMMAND(arg):N%` (Envoy refuses a stray `%` the same way).
 */
export function parseFormatString(format: string, path: string): FormatToken[] {
  const out: FormatToken[] = [];
  let literal = '';
  let pos = 0;
  while (pos < format.length) {
    const pct = format.indexOf('%', pos);
    if (pct < 0) { literal += format.slice(pos); break; }
    if (pct > pos) literal += format.slice(pos, pct);
    if (format.charCodeAt(pct + 1) === 37) { literal += '%'; pos = pct + 2; continue; }
    COMMAND_AT.lastIndex = pct;
    const m = COMMAND_AT.exec(format);
    if (!m) throw new ConfigError(path, `invalid format ${JSON.stringify(format)}: no %COMMAND% at position ${pct} (write %% for a literal percent sign)`);
    if (literal) { out.push(literal); literal = ''; }
    out.push({ command: m[1], arg: m[2], maxLength: m[3] ? Number(m[3]) : 0 });
    pos = COMMAND_AT.lastIndex;
  }
  if (literal) out.push(literal);
  return out;
}

/** Compiles an Envoy format string once into a list of literal and command parts. */
export function compileFormat(format: string, path: string): Formatter {
  const parts: Part[] = [];
  for (const t of parseFormatString(format, path)) {
    if (typeof t === 'string') { parts.push(t); continue; }
    const fn = compileCommand(t.command, t.arg, path);
    if (!fn) throw new ConfigError(path, `unsupported access log command %${t.command}%`);
    const limit = t.maxLength;
    parts.push(limit ? (e) => dash(fn(e)).slice(0, limit) : (e) => dash(fn(e)));
  }
  return (e) => {
    let out = '';
    for (let i = 0; i < parts.length; i++) { const p = parts[i]; out += typeof p === 'string' ? p : p(e); }
    return out;
  };
}

const pad = (n: number, w: number): string => String(n).padStart(w, '0');

/**
 * %START_TIME(...)%'s format: the strftime subset Envoy users write (UTC), plus Envoy's
 * %f / %<N>f (fractional seconds) and %E<N>S (seconds with N fractional digits). Skua keeps
 * milliseconds, so digits past the third are zeros.
 */
export function compileTimeFormat(spec: string, path: string): (ms: number) => string {
  type TimePart = string | ((d: Date, ms: number) => string);
  const parts: TimePart[] = [];
  const frac = (d: Date, n: number): string => (pad(d.getUTCMilliseconds(), 3) + '000000').slice(0, n);
  for (let i = 0; i < spec.length; i++) {
    const c = spec[i];
    if (c !== '%') { parts.push(c); continue; }
    const d = spec[++i];
    switch (d) {
      case 'Y': parts.push((t) => pad(t.getUTCFullYear(), 4)); break;
      case 'y': parts.push((t) => pad(t.getUTCFullYear() % 100, 2)); break;
      case 'm': parts.push((t) => pad(t.getUTCMonth() + 1, 2)); break;
      case 'd': parts.push((t) => pad(t.getUTCDate(), 2)); break;
      case 'H': parts.push((t) => pad(t.getUTCHours(), 2)); break;
      case 'M': parts.push((t) => pad(t.getUTCMinutes(), 2)); break;
      case 'S': parts.push((t) => pad(t.getUTCSeconds(), 2)); break;
      case 'F': parts.push((t) => `${pad(t.getUTCFullYear(), 4)}-${pad(t.getUTCMonth() + 1, 2)}-${pad(t.getUTCDate(), 2)}`); break;
      case 'T': parts.push((t) => `${pad(t.getUTCHours(), 2)}:${pad(t.getUTCMinutes(), 2)}:${pad(t.getUTCSeconds(), 2)}`); break;
      case 's': parts.push((_t, ms) => String(Math.floor(ms / 1000))); break;
      case 'z': parts.push('+0000'); break;
      case 'Z': parts.push('UTC'); break;
      case 'f': parts.push((t) => frac(t, 9)); break;
      case '%': parts.push('%'); break;
      case 'E': {
        const m = /^(\d)S/.exec(spec.slice(i + 1));
        if (!m) throw new ConfigError(path, `unsupported time format %E${spec.slice(i + 1, i + 3)} in ${JSON.stringify(spec)}`);
        const n = Number(m[1]);
        parts.push((t) => pad(t.getUTCSeconds(), 2) + (n ? '.' + frac(t, n) : ''));
        i += 2;
        break;
      }
      default: {
        if (d !== undefined && d >= '1' && d <= '9' && spec[i + 1] === 'f') {
          const n = Number(d);
          parts.push((t) => frac(t, n));
          i++;
          break;
        }
        throw new ConfigError(path, `unsupported time format %${d ?? ''} in ${JSON.stringify(spec)}`);
      }
    }
  }
  return (ms) => {
    const t = new Date(ms);
    let out = '';
    for (let i = 0; i < parts.length; i++) { const p = parts[i]; out += typeof p === 'string' ? p : p(t, ms); }
    return out;
  };
}

const SINGLE = /^%([A-Z_]+)%$/;

/**
 * json_format: each value is a format string; the line is one JSON object.
 * A value that is exactly one command keeps its type (numbers stay numbers), as in Envoy.
 */
export function compileJsonFormat(fields: Record<string, unknown>, path: string): Formatter {
  const entries = Object.entries(fields).map(([k, v]) => {
    if (typeof v !== 'string') throw new ConfigError(`${path}.${k}`, 'nested or non-string json_format values are not supported');
    const single = SINGLE.exec(v);
    if (single && SIMPLE[single[1]]) {
      const fn = SIMPLE[single[1]];
      return [k, (e: LogEntry) => { const x = fn(e); return x === undefined || x === '' ? null : x; }] as const;
    }
    const f = compileFormat(v, `${path}.${k}`);
    return [k, (e: LogEntry) => { const x = f(e); return x === '-' ? null : x; }] as const;
  });
  return (e) => {
    const o: Record<string, string | number | null> = {};
    for (const [k, f] of entries) o[k] = f(e);
    return JSON.stringify(o) + '\n';
  };
}
