/**
 * The HCM's path normalisation (normalize_path, merge_slashes, path_with_escaped_slashes_action),
 * applied once before filters and routing; the normalised path also goes upstream, as in Envoy.
 * normalize_path follows RFC 3986: `\` read as `/`, percent-escapes of unreserved characters
 * decoded and other escapes upper-cased, dot segments removed.
 */

export type EscapedSlashesAction = 'KEEP_UNCHANGED' | 'REJECT_REQUEST' | 'UNESCAPE_AND_REDIRECT' | 'UNESCAPE_AND_FORWARD';

export interface PathNormalization {
  readonly normalize: boolean;
  readonly mergeSlashes: boolean;
  readonly escapedSlashes: EscapedSlashesAction;
}

/** The outcome: the path to use, a redirect to it, or a rejection (400). */
export type NormalizedPath = { kind: 'ok'; path: string } | { kind: 'redirect'; path: string } | { kind: 'reject' };

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const ESCAPED_SLASH = /%(2f|5c)/i;

export function normalizeRequestPath(raw: string, n: PathNormalization): NormalizedPath {
  const q = raw.search(/[?#]/);
  let path = q < 0 ? raw : raw.slice(0, q);
  const rest = q < 0 ? '' : raw.slice(q);
  let redirect = false;
  if (n.escapedSlashes !== 'KEEP_UNCHANGED' && ESCAPED_SLASH.test(path)) {
    if (n.escapedSlashes === 'REJECT_REQUEST') return { kind: 'reject' };
    path = path.replace(/%2f/gi, '/').replace(/%5c/gi, '\\');
    redirect = n.escapedSlashes === 'UNESCAPE_AND_REDIRECT';
  }
  if (n.normalize) {
    const canonical = canonicalPath(path);
    if (canonical === undefined) return { kind: 'reject' };
    path = canonical;
  }
  if (n.mergeSlashes) path = path.replace(/\/{2,}/g, '/');
  const out = path + rest;
  return redirect ? { kind: 'redirect', path: out } : { kind: 'ok', path: out };
}

/** What canonicalPath changes: a backslash, a percent-escape, a `.` or `..` segment. */
const NOT_CANONICAL = /[\\%]|\/\.\.?(?:\/|$)/;

/** RFC 3986 section 6.2.2 normalisation of an origin-form path; undefined when it is not one. */
function canonicalPath(path: string): string | undefined {
  if (!path.startsWith('/') && !path.startsWith('\\')) return undefined;
  // Most paths have none of it: kept as they are, not rebuilt character by character.
  if (!NOT_CANONICAL.test(path)) return path;
  let decoded = '';
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (c === '\\') { decoded += '/'; continue; }
    if (c !== '%') { decoded += c; continue; }
    const hex = path.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
    const ch = String.fromCharCode(parseInt(hex, 16));
    decoded += UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
    i += 2;
  }
  return removeDotSegments(decoded);
}

/** RFC 3986 section 5.2.4 on an absolute path. */
function removeDotSegments(path: string): string {
  const out: string[] = [];
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (s === '.') { if (last) out.push(''); continue; }
    if (s === '..') { out.pop(); if (last) out.push(''); continue; }
    out.push(s);
  }
  return '/' + out.join('/');
}
