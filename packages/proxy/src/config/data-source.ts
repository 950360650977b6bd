import { readFileSync } from 'node:fs';
import type { Msg } from './fields.ts';

/** envoy.config.core.v3.DataSource: filename, inline_bytes (base64), inline_string, environment_variable. */
export function readDataSource(m: Msg): Buffer {
  if (m.has('filename')) {
    const file = m.str('filename');
    try {
      return readFileSync(file);
    } catch (err) {
      throw m.error('filename', `cannot read ${file}: ${(err as Error).message}`);
    }
  }
  if (m.has('inline_bytes')) return Buffer.from(m.str('inline_bytes'), 'base64');
  if (m.has('inline_string')) return Buffer.from(m.str('inline_string'));
  if (m.has('environment_variable')) {
    const name = m.str('environment_variable');
    const v = process.env[name];
    if (v === undefined) throw m.error('environment_variable', `${name} is not set`);
    return Buffer.from(v);
  }
  throw m.error('', 'one of filename, inline_bytes, inline_string, environment_variable is required');
}
