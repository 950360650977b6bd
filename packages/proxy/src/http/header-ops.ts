import type { Msg } from '../config/fields.ts';
import { ConfigError } from '../core/errors.ts';
import { compileCommand, headerCommandNames, parseFormatString, type CommandFn } from '../telemetry/format.ts';
import type { LogEntry } from '../telemetry/log-entry.ts';

type HeaderMap = Record<string, string | string[] | number | undefined>;

const APPEND_ACTIONS = ['APPEND_IF_EXISTS_OR_ADD', 'ADD_IF_ABSENT', 'OVERWRITE_IF_EXISTS_OR_ADD', 'OVERWRITE_IF_EXISTS'] as const;
type AppendAction = (typeof APPEND_ACTIONS)[number];

/**
 * Which header map the ops edit. It decides what %REQ(x)% and %RESP(x)% read: the map being
 * edited for its own side, the request record for the request on the response side.
 */
export type HeaderSide = 'request' | 'response';

/**
 * What header value formatters read besides the map being edited: the request's record
 * (RequestRecord implements it). Optional: without it, formatters that need it give ''.
 */
export type HeaderFormatContext = LogEntry;

/** A formatted value: evaluated per request against the map being edited and the context. */
type ValueFormatter = (headers: HeaderMap, ctx: HeaderFormatContext | undefined) => string;

interface HeaderAdd {
  readonly key: string;
  /** The literal value (with %% unescaped); the raw format string when `format` is set. */
  readonly value: string;
  /** Set only for values with %COMMAND% operators: literal-only adds never call a function. */
  readonly format: ValueFormatter | undefined;
  readonly action: AppendAction;
  readonly keepEmpty: boolean;
}

/** Header additions and removals compiled once (request_headers_to_add / _to_remove and friends). */
export class HeaderOps {
  readonly adds: readonly HeaderAdd[];
  readonly removes: readonly string[];
  readonly empty: boolean;
  /** True when some value has a formatter (the caller should pass a context to `apply`). */
  readonly dynamic: boolean;

  constructor(adds: readonly HeaderAdd[], removes: readonly string[]) {
    this.adds = adds;
    this.removes = removes;
    this.empty = adds.length === 0 && removes.length === 0;
    this.dynamic = adds.some((a) => a.format !== undefined);
  }

  /**
   * Edits `headers` in place. `ctx` (the request's record) feeds formatters such as
   * %DOWNSTREAM_REMOTE_ADDRESS%; literal-only ops never read it.
   */
  apply(headers: HeaderMap, ctx?: HeaderFormatContext): void {
    for (let i = 0; i < this.removes.length; i++) delete headers[this.removes[i]];
    for (let i = 0; i < this.adds.length; i++) {
      const a = this.adds[i];
      const value = a.format === undefined ? a.value : a.format(headers, ctx);
      if (value === '' && !a.keepEmpty) continue;
      const cur = headers[a.key];
      switch (a.action) {
        case 'APPEND_IF_EXISTS_OR_ADD':
          headers[a.key] = cur === undefined ? value : Array.isArray(cur) ? [...cur, value] : [String(cur), value];
          break;
        case 'ADD_IF_ABSENT':
          if (cur === undefined) headers[a.key] = value;
          break;
        case 'OVERWRITE_IF_EXISTS_OR_ADD':
          headers[a.key] = value;
          break;
        case 'OVERWRITE_IF_EXISTS':
          if (cur !== undefined) headers[a.key] = value;
          break;
      }
    }
  }
}

export const NO_HEADER_OPS = new HeaderOps([], []);

const FIELDS = {
  request: ['request_headers_to_add', 'request_headers_to_remove'],
  response: ['response_headers_to_add', 'response_headers_to_remove'],
} as const;

/** Reads `<prefix>_headers_to_add` / `<prefix>_headers_to_remove` from a route config level. */
export function compileHeaderOps(m: Msg, prefix: HeaderSide): HeaderOps {
  return compileHeaderOpsFrom(m, FIELDS[prefix][0], FIELDS[prefix][1], prefix);
}

/** Header ops from any pair of fields (local reply mappers use `headers_to_add`, response side). */
export function compileHeaderOpsFrom(m: Msg, addField: string, removeField: string, side: HeaderSide = 'response'): HeaderOps {
  // Most route levels have neither (four checks per route of a 5,000-route table).
  if (!m.has(addField) && !m.has(removeField)) return NO_HEADER_OPS;
  const adds = m.list(addField).map((a) => compileAdd(a, side));
  const removes = m.strList(removeField).map((h) => h.toLowerCase());
  return adds.length || removes.length ? new HeaderOps(adds, removes) : NO_HEADER_OPS;
}

function compileAdd(m: Msg, side: HeaderSide): HeaderAdd {
  const h = m.requiredMsg('header');
  const key = h.requiredStr('key').toLowerCase();
  const raw = h.has('raw_value') ? Buffer.from(h.str('raw_value'), 'base64').toString('latin1') : h.str('value');
  let action: AppendAction = 'APPEND_IF_EXISTS_OR_ADD';
  if (m.has('append_action')) action = m.enumOf('append_action', APPEND_ACTIONS);
  if (m.has('append')) {
    if (action !== 'APPEND_IF_EXISTS_OR_ADD') throw m.error('append', 'both append and append_action are set');
    action = m.bool('append') ? 'APPEND_IF_EXISTS_OR_ADD' : 'OVERWRITE_IF_EXISTS_OR_ADD';
  }
  const { literal, format } = compileHeaderValue(raw, side, h.field('value'));
  return { key, value: format ? raw : literal, format, action, keepEmpty: m.bool('keep_empty_value') };
}

// ------------------------------------------------------------------ header value formatters

/**
 * Commands that describe the upstream: Envoy formats request headers before it picks the
 * upstream host, so on the request side they are empty.
 */
const UPSTREAM_HOST_COMMANDS = new Set(['UPSTREAM_HOST', 'UPSTREAM_REMOTE_ADDRESS', 'UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT', 'UPSTREAM_REMOTE_PORT']);

/** Commands Envoy has and Skua refuses clearly (they need metadata or filter state Skua does not keep). */
const REFUSED = new Set(['UPSTREAM_METADATA', 'DYNAMIC_METADATA', 'CLUSTER_METADATA', 'ROUTE_METADATA', 'UPSTREAM_PEER_URI_SAN',
  'PER_REQUEST_STATE', 'UPSTREAM_FILTER_STATE']);

/**
 * A header value compiled the way Envoy's HeaderParser does (a substitution format string with
 * empty values omitted): `%%` is a literal percent, `%COMMAND%` is evaluated per request, a missing
 * value formats as '' (so the header is skipped unless keep_empty_value). A value without commands
 * compiles to `literal` only.
 */
export function compileHeaderValue(value: string, side: HeaderSide, path: string): { literal: string; format: ValueFormatter | undefined } {
  if (value.indexOf('%') < 0) return { literal: value, format: undefined };
  const tokens = parseFormatString(value, path);
  if (tokens.every((t) => typeof t === 'string')) return { literal: tokens.join(''), format: undefined };
  const parts: Array<string | ValueFormatter> = tokens.map((t) => {
    if (typeof t === 'string') return t;
    const fn = compileHeaderCommand(t.command, t.arg, side, value, path);
    const limit = t.maxLength;
    return limit ? (h: HeaderMap, c: HeaderFormatContext | undefined) => fn(h, c).slice(0, limit) : fn;
  });
  if (parts.length === 1) return { literal: '', format: parts[0] as ValueFormatter };
  return {
    literal: '',
    format: (h, c) => {
      let out = '';
      for (let i = 0; i < parts.length; i++) { const p = parts[i]; out += typeof p === 'string' ? p : p(h, c); }
      return out;
    },
  };
}

function first(v: string | string[] | number | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (Array.isArray(v)) return v[0];
  return typeof v === 'number' ? String(v) : v;
}

/** A header of the map being edited; pseudo-headers (and anything on a request without a map entry) via the context. */
function ownHeader(h: HeaderMap, c: HeaderFormatContext | undefined, name: string): string | undefined {
  if (name.charCodeAt(0) === 58 /* : */) return c?.requestHeader(name);
  return first(h[name]);
}

function compileHeaderCommand(command: string, arg: string | undefined, side: HeaderSide, value: string, path: string): ValueFormatter {
  if (command === 'REQ' || command === 'RESP') {
    const { main, alt } = headerCommandNames(command, arg ?? '', path);
    if (command === 'RESP' && side === 'request') return () => '';
    if (command === 'REQ' && side === 'response') {
      return alt ? (_h, c) => c?.requestHeader(main) ?? c?.requestHeader(alt) ?? '' : (_h, c) => c?.requestHeader(main) ?? '';
    }
    // The side's own map: %REQ(x)% on request headers, %RESP(x)% on response headers.
    const pseudoOk = command === 'REQ';
    const get = (h: HeaderMap, c: HeaderFormatContext | undefined, n: string): string | undefined =>
      pseudoOk ? ownHeader(h, c, n) : first(h[n]);
    return alt ? (h, c) => get(h, c, main) ?? get(h, c, alt) ?? '' : (h, c) => get(h, c, main) ?? '';
  }
  if (REFUSED.has(command)) {
    throw new ConfigError(path, `header value formatters: %${command}% in '${value}' is not supported`);
  }
  const fn: CommandFn | undefined = compileCommand(command, arg, path);
  if (!fn) throw new ConfigError(path, `header value formatters: %${command}% in '${value}' is not supported`);
  if (side === 'request' && UPSTREAM_HOST_COMMANDS.has(command)) return () => '';
  return (_h, c) => {
    if (c === undefined) return '';
    const v = fn(c);
    return v === undefined ? '' : typeof v === 'string' ? v : String(v);
  };
}
