import { createWriteStream, type WriteStream } from 'node:fs';
import type { Msg } from '../config/fields.ts';
import { compileFormat, compileJsonFormat, DEFAULT_FORMAT, type Formatter } from './format.ts';
import type { LogEntry } from './log-entry.ts';
import { readDataSource } from '../config/data-source.ts';

const STDOUT = 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog';
const STDERR = 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog';
const FILE = 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog';

export interface AccessLogger {
  log(e: LogEntry): void;
}

/** Lines are batched and written once per tick, so logging costs one write per event-loop turn. */
class StreamLogger implements AccessLogger {
  private readonly format: Formatter;
  private readonly out: NodeJS.WritableStream | WriteStream;
  private pending = '';
  private scheduled = false;

  constructor(format: Formatter, out: NodeJS.WritableStream | WriteStream) {
    this.format = format;
    this.out = out;
  }

  log(e: LogEntry): void {
    this.pending += this.format(e);
    if (!this.scheduled) { this.scheduled = true; setImmediate(flush, this); }
  }

  flush(): void {
    this.scheduled = false;
    const data = this.pending;
    this.pending = '';
    if (data) this.out.write(data);
  }
}

function flush(l: StreamLogger): void {
  l.flush();
}

const files = new Map<string, WriteStream>();

function openFile(path: string): WriteStream {
  let s = files.get(path);
  if (!s) { s = createWriteStream(path, { flags: 'a' }); files.set(path, s); }
  return s;
}

function readFormat(m: Msg): Formatter {
  if (m.has('format')) return compileFormat(m.str('format'), m.field('format'));
  const lf = m.msg('log_format');
  if (!lf) return compileFormat(DEFAULT_FORMAT, m.path);
  if (lf.has('formatters')) throw lf.error('formatters', 'formatter extensions are not supported');
  if (lf.has('text_format')) return compileFormat(lf.str('text_format'), lf.field('text_format'));
  if (lf.has('text_format_source')) return compileFormat(readDataSource(lf.requiredMsg('text_format_source')).toString(), lf.field('text_format_source'));
  if (lf.has('json_format')) return compileJsonFormat(lf.requiredMsg('json_format').raw, lf.field('json_format'));
  return compileFormat(DEFAULT_FORMAT, m.path);
}

export function compileAccessLogs(list: Msg[]): AccessLogger[] {
  return list.map((m) => {
    if (m.has('filter')) throw m.error('filter', 'access log filters are not supported yet');
    const tc = m.requiredMsg('typed_config');
    const url = tc.str('@type');
    if (url === STDOUT) return new StreamLogger(readFormat(tc), process.stdout);
    if (url === STDERR) return new StreamLogger(readFormat(tc), process.stderr);
    if (url === FILE) {
      const path = tc.requiredStr('path');
      return new StreamLogger(readFormat(tc), path === '/dev/stdout' ? process.stdout : path === '/dev/stderr' ? process.stderr : openFile(path));
    }
    throw tc.error('@type', `unsupported access logger ${url}`);
  });
}
