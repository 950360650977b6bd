import { hostname } from 'node:os';
import { formatHostPort } from '../config/address.ts';
import type { LogEntry } from './log-entry.ts';
import { ConfigError } from '../core/errors.ts';

/** Envoy's default access log format. */
export const DEFAULT_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" ' +
  '"%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n';

type Part = string | ((e: LogEntry) => string);
export type Formatter = (e: LogEntry) => string;

const dash = (v: string | number | undefined): string => (v === undefined || v === '' ? '-' : String(v));

function reqHeader(e: LogEntry, name: string): string | undefined {
  return e.requestHeader(name);
}

function headerCommand(kind: 'REQ' | 'RESP', arg: string, path: string): (e: LogEntry) => string | undefined {
  const [main, alt] = arg.toLowerCase().split('?');
  if (!main) throw new ConfigError(path, `%${kind}()% needs a header name`);
  const get = kind === 'REQ' ? reqHeader : (e: LogEntry, n: string) => e.responseHeader(n);
  return alt ? (e) => get(e, main) ?? get(e, alt) : (e) => get(e, main);
}

const SIMPLE: Record<string, (e: LogEntry) => string | number | undefined> = {
  START_TIME: (e) => new Date(e.startTime).toISOString(),
  PROTOCOL: (e) => e.protocol,
  RESPONSE_CODE: (e) => e.status,
  RESPONSE_FLAGS: (e) => e.flags,
  RESPONSE_CODE_DETAILS: (e) => e.details,
  BYTES_RECEIVED: (e) => e.bytesReceived,
  BYTES_SENT: (e) => e.bytesSent,
  DURATION: (e) => Math.floor(e.durationMs),
  UPSTREAM_HOST: (e) => e.upstreamHost,
  UPSTREAM_CLUSTER: (e) => e.upstreamCluster,
  ROUTE_NAME: (e) => e.routeName,
  UPSTREAM_TRANSPORT_FAILURE_REASON: () => undefined,
  DOWNSTREAM_REMOTE_ADDRESS: (e) => formatHostPort(e.conn.remoteAddress, e.conn.remotePort),
  DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: (e) => e.conn.remoteAddress,
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS: (e) => formatHostPort(e.conn.remoteAddress, e.conn.remotePort),
  DOWNSTREAM_LOCAL_ADDRESS: (e) => formatHostPort(e.conn.localAddress, e.conn.localPort),
  DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: (e) => e.conn.localAddress,
  REQUESTED_SERVER_NAME: (e) => e.conn.serverName,
  CONNECTION_ID: (e) => e.conn.id,
  HOSTNAME: () => hostname(),
  LOCAL_REPLY_BODY: (e) => e.localReplyBody,
};

const COMMAND = /%([A-Z_]+)(?:\(([^)]*)\))?(?::(\d+))?%/g;

/** Compiles an Envoy format string once into a list of literal and command parts. */
export function compileFormat(format: string, path: string): Formatter {
  const parts: Part[] = [];
  let last = 0;
  for (const m of format.matchAll(COMMAND)) {
    if (m.index > last) parts.push(format.slice(last, m.index));
    last = m.index + m[0].length;
    const [, cmd, arg, max] = m;
    let fn: (e: LogEntry) => string | number | undefined;
    if (cmd === 'REQ' || cmd === 'RESP') fn = headerCommand(cmd, arg ?? '', path);
    else if (SIMPLE[cmd]) fn = SIMPLE[cmd];
    else throw new ConfigError(path, `unsupported access log command %${cmd}%`);
    const limit = max ? Number(max) : 0;
    parts.push(limit ? (e) => dash(fn(e)).slice(0, limit) : (e) => dash(fn(e)));
  }
  if (last < format.length) parts.push(format.slice(last).replace(/%%/g, '%'));
  return (e) => {
    let out = '';
    for (let i = 0; i < parts.length; i++) { const p = parts[i]; out += typeof p === 'string' ? p : p(e); }
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
