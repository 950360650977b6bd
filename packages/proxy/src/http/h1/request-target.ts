/**
 * Absolute-form request targets (RFC 9112 §3.2.2), what a client talking to a forward proxy
 * sends (`GET http://host/path HTTP/1.1`, `curl -x`). As Envoy does (allow_absolute_url), the
 * request is routed by the URL's authority, which replaces Host, and its path and query.
 */
export interface AbsoluteTarget {
  readonly scheme: string;
  readonly authority: string;
  /** Path and query; `/` when the URL has neither. */
  readonly path: string;
}

/** `http(s)://authority[/path][?query]`, or undefined when the target is not one (the caller answers 400). */
export function absoluteForm(target: string): AbsoluteTarget | undefined {
  const sep = target.indexOf('://');
  if (sep <= 0) return undefined;
  const scheme = target.slice(0, sep).toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') return undefined;
  const start = sep + 3;
  let end = start;
  for (; end < target.length; end++) {
    const c = target.charCodeAt(end);
    if (c === 47 /* / */ || c === 63 /* ? */) break;
  }
  const authority = target.slice(start, end);
  // userinfo in an http(s) URI is deprecated (RFC 9110 §4.2.4) and a classic host-confusion vector.
  if (authority === '' || authority.includes('@')) return undefined;
  const rest = target.slice(end);
  return { scheme, authority, path: rest === '' ? '/' : rest.charCodeAt(0) === 47 ? rest : `/${rest}` };
}
