/**
 * Kubernetes downward-API files the Istio injector mounts under ./etc/istio/pod/
 * (`labels`, `annotations`): one `key="value"` per line, the value quoted as Go's `%q`.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../core/errors.ts';

export const POD_LABELS_PATH = './etc/istio/pod/labels';
export const POD_ANNOTATIONS_PATH = './etc/istio/pod/annotations';

/** Reads a downward-API file; undefined when it does not exist (as pilot-agent, which only logs that). */
export function readDownwardApiFile(path: string): Record<string, string> | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ConfigError('', `cannot read ${path}: ${(err as Error).message}`);
  }
  return parseDownwardApi(text, path);
}

/** Lines without `=` are skipped; a value that is not a valid quoted string fails the whole file. */
export function parseDownwardApi(text: string, where = 'downward API'): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const value = unquoteGo(line.slice(eq + 1));
    if (value === undefined) throw new ConfigError('', `${where}: failed to unquote ${line.slice(eq + 1)}`);
    out[line.slice(0, eq)] = value;
  }
  return out;
}

const SIMPLE_ESCAPES: Record<string, string> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', '"': '"', "'": "'" };

/** Go's strconv.Unquote for "double-quoted" and `raw` strings; undefined when malformed. */
export function unquoteGo(s: string): string | undefined {
  if (s.length >= 2 && s[0] === '`' && s[s.length - 1] === '`') {
    const body = s.slice(1, -1);
    return body.includes('`') ? undefined : body.replaceAll('\r', '');
  }
  if (s.length < 2 || s[0] !== '"' || s[s.length - 1] !== '"') return undefined;
  const body = s.slice(1, -1);
  const bytes: number[] = [];
  const pushText = (t: string): void => { for (const b of Buffer.from(t, 'utf8')) bytes.push(b); };
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '"' || c === '\n') return undefined;
    if (c !== '\\') { pushText(c); continue; }
    const e = body[++i];
    if (e === undefined) return undefined;
    if (e in SIMPLE_ESCAPES) { pushText(SIMPLE_ESCAPES[e]); continue; }
    const hexLen = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hexLen) {
      const hex = body.slice(i + 1, i + 1 + hexLen);
      if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== hexLen) return undefined;
      const v = parseInt(hex, 16);
      if (e === 'x') bytes.push(v); // \x is one raw byte
      else if (v > 0x10ffff) return undefined;
      else pushText(String.fromCodePoint(v));
      i += hexLen;
      continue;
    }
    if (e >= '0' && e <= '7') {
      const oct = body.slice(i, i + 3);
      if (!/^[0-7]{3}$/.test(oct) || parseInt(oct, 8) > 255) return undefined;
      bytes.push(parseInt(oct, 8));
      i += 2;
      continue;
    }
    return undefined;
  }
  return Buffer.from(bytes).toString('utf8');
}
