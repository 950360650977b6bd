/**
 * Application logs as Envoy has them: one logger per component (Envoy's names: `upstream`, `http`,
 * `connection`, `config`, ...), each with its own level. `-l/--log-level` and /logging?level= set
 * all of them; `--component-log-level upstream:debug,http:trace` and /logging?<name>=<level> set
 * some. Lines go to stderr in the `--log-format` pattern (core/log-format.ts). Hot paths test the
 * `debugOn` / `traceOn` fields before building a message.
 */
import { compileLogFormat, DEFAULT_LOG_FORMAT, formatLine, type CompiledFormat } from './log-format.ts';

/** Envoy's log levels; `-l/--log-level` and /logging set the active one. */
export const LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'critical', 'off'] as const;
export type Level = (typeof LEVELS)[number];
const LETTERS = ['T', 'D', 'I', 'W', 'E', 'C', 'O'];

/** Envoy's logger names (source/common/common/logger.h), so its --component-log-level lines work here. */
export const COMPONENTS = [
  'admin', 'alternate_protocols_cache', 'aws', 'assert', 'backtrace', 'basic_auth', 'cache_filter', 'client', 'config',
  'connection', 'conn_handler', 'compression', 'credential_injector', 'decompression', 'dns', 'dubbo', 'envoy_bug',
  'ext_authz', 'ext_proc', 'rocketmq', 'file', 'filter', 'forward_proxy', 'geolocation', 'grpc', 'happy_eyeballs', 'hc',
  'health_checker', 'http', 'http2', 'hystrix', 'init', 'io', 'jwt', 'kafka', 'key_value_store', 'lua', 'main', 'matcher',
  'misc', 'mongo', 'multi_connection', 'oauth2', 'quic', 'quic_stream', 'pool', 'rate_limit_quota', 'rbac', 'rds',
  'redis', 'router', 'runtime', 'stats', 'secret', 'tap', 'testing', 'thrift', 'tracing', 'upstream', 'udp', 'wasm',
  'websocket', 'golang',
] as const;
export type Component = (typeof COMPONENTS)[number];

const INFO = 2;

/** Parses a level name (`warn` is accepted for `warning`); -1 when unknown. */
export function levelIndex(level: string): number {
  return LEVELS.indexOf((level === 'warn' ? 'warning' : level) as Level);
}

let format: CompiledFormat = compileLogFormat(DEFAULT_LOG_FORMAT);
let sink = (line: string): void => { process.stderr.write(line); };

export class Logger {
  readonly name: string;
  threshold = INFO;
  /** Cheap guards for hot paths (kept in step with threshold). */
  traceOn = false;
  debugOn = false;

  constructor(name: string) {
    this.name = name;
  }

  setThreshold(i: number): void {
    this.threshold = i;
    this.traceOn = i <= 0;
    this.debugOn = i <= 1;
  }

  level(): Level { return LEVELS[this.threshold]; }
  enabled(level: Level): boolean { return LEVELS.indexOf(level) >= this.threshold; }
  trace(msg: string): void { if (this.threshold <= 0) emit(this, 0, msg); }
  debug(msg: string): void { if (this.threshold <= 1) emit(this, 1, msg); }
  info(msg: string): void { if (this.threshold <= 2) emit(this, 2, msg); }
  warn(msg: string): void { if (this.threshold <= 3) emit(this, 3, msg); }
  error(msg: string): void { if (this.threshold <= 4) emit(this, 4, msg); }
  critical(msg: string): void { if (this.threshold <= 5) emit(this, 5, msg); }
}

function emit(l: Logger, i: number, message: string): void {
  sink(`${formatLine(format, { levelName: LEVELS[i], letter: LETTERS[i], logger: l.name, message, epochMs: Date.now() })}\n`);
}

const loggers = new Map<string, Logger>();
let defaultThreshold = INFO;

/** The logger of one component (made on first use, at the level `-l` set). */
export function logger(name: Component): Logger {
  let l = loggers.get(name);
  if (!l) {
    l = new Logger(name);
    l.setThreshold(defaultThreshold);
    loggers.set(name, l);
  }
  return l;
}

/** The `main` logger: messages that belong to no narrower component. */
export const log = logger('main');

/** `-l`: every logger, present and future. False for an unknown level. */
export function setLogLevel(level: string): boolean {
  const i = levelIndex(level);
  if (i < 0) return false;
  defaultThreshold = i;
  for (const name of COMPONENTS) logger(name).setThreshold(i);
  return true;
}

/** The level -l set (loggers set one by one may differ). */
export function logLevel(): Level {
  return LEVELS[defaultThreshold];
}

/**
 * `--component-log-level upstream:debug,connection:trace`. Returns Envoy's error text for a bad
 * entry (nothing is changed then), or undefined.
 */
export function setComponentLogLevels(spec: string): string | undefined {
  const changes: Array<[Logger, number]> = [];
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const colon = entry.indexOf(':');
    if (colon < 0) return `error: component log level not correctly specified '${entry}'`;
    const name = entry.slice(0, colon);
    const level = levelIndex(entry.slice(colon + 1));
    if (!(COMPONENTS as readonly string[]).includes(name)) return `error: invalid component specified '${name}'`;
    if (level < 0) return `error: invalid log level specified '${entry.slice(colon + 1)}'`;
    changes.push([logger(name as Component), level]);
  }
  for (const [l, i] of changes) l.setThreshold(i);
  return undefined;
}

/** Where lines go (tests); returns the previous sink. */
export function setLogSink(next: (line: string) => void): (line: string) => void {
  const prev = sink;
  sink = next;
  return prev;
}

/** Every logger and its level, in Envoy's order (admin /logging). */
export function loggerLevels(): Array<[string, Level]> {
  return COMPONENTS.map((name) => [name, logger(name).level()]);
}

/** What worker threads need to log as the main thread does. */
export interface LogSettings {
  readonly levels: Array<[string, number]>;
  readonly defaultThreshold: number;
  readonly pattern: string;
  readonly escaped: boolean;
}

let current = { pattern: DEFAULT_LOG_FORMAT, escaped: false };

/** -l, --component-log-level and --log-format together; returns what is wrong with them, if anything. */
export function applyLogFlags(f: { logLevel: string; componentLogLevel?: string; logFormat?: string; logFormatEscaped?: boolean }): string | undefined {
  if (!setLogLevel(f.logLevel)) return `error: invalid log level specified '${f.logLevel}'`;
  if (f.componentLogLevel) {
    const err = setComponentLogLevels(f.componentLogLevel);
    if (err) return err;
  }
  if (f.logFormat) setLogFormat(f.logFormat, f.logFormatEscaped);
  return undefined;
}

/** `--log-format` (and --log-format-escaped). */
export function setLogFormat(pattern: string, escaped = false): void {
  current = { pattern, escaped };
  format = compileLogFormat(pattern, escaped);
}

export function logSettings(): LogSettings {
  return { levels: [...loggers].map(([n, l]) => [n, l.threshold]), defaultThreshold, pattern: current.pattern, escaped: current.escaped };
}

export function applyLogSettings(s: LogSettings): void {
  defaultThreshold = s.defaultThreshold;
  for (const [name, i] of s.levels) logger(name as Component).setThreshold(i);
  setLogFormat(s.pattern, s.escaped);
}

/**
 * Envoy's POST /logging: `?level=L` sets every logger, `?<component>=L` one, `?paths=a:L,b:L` several.
 * Returns the status and body (the active loggers, or what was wrong).
 */
export function adminLogging(query: URLSearchParams): { status: number; body: string } {
  const level = query.get('level');
  if (level !== null && !setLogLevel(level)) return { status: 404, body: `error: unknown logger level\n` };
  const paths = query.get('paths');
  if (paths !== null) {
    const err = setComponentLogLevels(paths);
    if (err) return { status: 404, body: `${err}\n` };
  }
  const single: string[] = [];
  for (const [k, v] of query) if (k !== 'level' && k !== 'paths') single.push(`${k}:${v}`);
  if (single.length) {
    const err = setComponentLogLevels(single.join(','));
    if (err) return { status: 404, body: `${err}\n` };
  }
  return { status: 200, body: `active loggers:\n${loggerLevels().map(([n, l]) => `  ${n}: ${l}`).join('\n')}\n` };
}
