/** Envoy's log levels; `-l/--log-level` and /logging set the active one. */
export const LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'critical', 'off'] as const;
export type Level = (typeof LEVELS)[number];

let threshold = LEVELS.indexOf('info');

export function setLogLevel(level: string): boolean {
  const l = level === 'warn' ? 'warning' : level;
  const i = LEVELS.indexOf(l as Level);
  if (i < 0) return false;
  threshold = i;
  return true;
}

export function logLevel(): Level {
  return LEVELS[threshold];
}

function emit(i: number, msg: string): void {
  if (i < threshold) return;
  process.stderr.write(`[${new Date().toISOString()}][${process.pid}][${LEVELS[i]}] ${msg}\n`);
}

export const log = {
  enabled: (level: Level): boolean => LEVELS.indexOf(level) >= threshold,
  trace: (msg: string): void => emit(0, msg),
  debug: (msg: string): void => emit(1, msg),
  info: (msg: string): void => emit(2, msg),
  warn: (msg: string): void => emit(3, msg),
  error: (msg: string): void => emit(4, msg),
};
