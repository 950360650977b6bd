/**
 * Envoy's `--log-format`: an spdlog pattern compiled once into parts, applied to each log line.
 * Flags: %v message, %_ message with C escapes, %j message JSON-escaped (for JSON formats), %l level,
 * %L level letter, %n logger (component), %t thread, %P process id, %Y %y %m %d %H %M %S %e %f %F
 * %T %D %z %s %g %# %@ (no source locations here: empty), %+ spdlog's default, %% a percent sign.
 * Times are UTC.
 */
import { threadId } from 'node:worker_threads';

export interface LogRecord {
  readonly levelName: string;
  readonly letter: string;
  readonly logger: string;
  readonly message: string;
  readonly epochMs: number;
}

type Part = string | ((r: LogRecord, t: Date) => string);

/** Envoy's default, less the source location (`[%g:%#]`) this runtime does not have. */
export const DEFAULT_LOG_FORMAT = '[%Y-%m-%d %T.%e][%t][%l][%n] %v';
/** What pilot-agent hands Envoy (Istio's log style), and its `--log_as_json` form. */
export const ISTIO_LOG_FORMAT = '%Y-%m-%dT%T.%fZ\t%l\tenvoy %n\t%v';
export const ISTIO_JSON_LOG_FORMAT = '{"level":"%l","time":"%Y-%m-%dT%T.%fZ","scope":"envoy %n","msg":"%j"}';

const pad = (n: number, width: number): string => String(n).padStart(width, '0');
const THREAD = String(threadId === 0 ? process.pid : threadId);

/** C-style escapes for control characters (Envoy's --log-format-escaped). */
export function escapeMessage(s: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\x00-\x1f\x7f\\]/.test(s) ? JSON.stringify(s).slice(1, -1).replace(/\\"/g, '"') : s;
}

const jsonEscape = (s: string): string => JSON.stringify(s).slice(1, -1);

const FLAGS: Record<string, (r: LogRecord, t: Date) => string> = {
  v: (r) => r.message,
  _: (r) => escapeMessage(r.message),
  j: (r) => jsonEscape(r.message),
  l: (r) => r.levelName,
  L: (r) => r.letter,
  n: (r) => r.logger,
  t: () => THREAD,
  P: () => String(process.pid),
  Y: (_r, t) => String(t.getUTCFullYear()),
  y: (_r, t) => pad(t.getUTCFullYear() % 100, 2),
  m: (_r, t) => pad(t.getUTCMonth() + 1, 2),
  d: (_r, t) => pad(t.getUTCDate(), 2),
  H: (_r, t) => pad(t.getUTCHours(), 2),
  M: (_r, t) => pad(t.getUTCMinutes(), 2),
  S: (_r, t) => pad(t.getUTCSeconds(), 2),
  e: (_r, t) => pad(t.getUTCMilliseconds(), 3),
  f: (_r, t) => pad(t.getUTCMilliseconds() * 1000, 6),
  F: (_r, t) => pad(t.getUTCMilliseconds() * 1_000_000, 9),
  T: (_r, t) => `${pad(t.getUTCHours(), 2)}:${pad(t.getUTCMinutes(), 2)}:${pad(t.getUTCSeconds(), 2)}`,
  D: (_r, t) => `${pad(t.getUTCMonth() + 1, 2)}/${pad(t.getUTCDate(), 2)}/${pad(t.getUTCFullYear() % 100, 2)}`,
  z: () => '+00:00',
  s: () => '',
  g: () => '',
  '#': () => '',
  '@': () => '',
  '%': () => '%',
};

export type CompiledFormat = readonly Part[];

/** Compiles a pattern; `escaped` makes %v escape control characters (--log-format-escaped). */
export function compileLogFormat(pattern: string, escaped = false): CompiledFormat {
  const expanded = pattern.replaceAll('%+', '[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v');
  const parts: Part[] = [];
  let text = '';
  for (let i = 0; i < expanded.length; i++) {
    const c = expanded[i];
    const next = expanded[i + 1];
    if (c !== '%' || next === undefined || !FLAGS[next]) { text += c; continue; }
    if (text) { parts.push(text); text = ''; }
    parts.push(next === 'v' && escaped ? FLAGS._ : FLAGS[next]);
    i++;
  }
  if (text) parts.push(text);
  return parts;
}

export function formatLine(format: CompiledFormat, r: LogRecord): string {
  const t = new Date(r.epochMs);
  let out = '';
  for (let i = 0; i < format.length; i++) {
    const p = format[i];
    out += typeof p === 'string' ? p : p(r, t);
  }
  return out;
}
