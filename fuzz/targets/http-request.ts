/**
 * The header normaliser: what turns a parsed request into what the router sees and what goes
 * upstream. Path normalisation (every normalize_path / merge_slashes / escaped-slashes setting),
 * route matching over every matcher kind, header additions with formatters, the query-string and
 * grpc-timeout readers, and the upstream request head.
 * Invariants: nothing throws; a normalised path is canonical (origin-form, no dot segments or
 * backslashes, upper-case escapes, no escaped unreserved characters) and normalising it again
 * changes nothing; header edits keep values free of CR/LF/NUL; the upstream head parses back.
 */
import { findHeadEnd, parseHead, type Head } from '../../packages/proxy/src/http/h1/parse.ts';
import { requestHead } from '../../packages/proxy/src/http/h1/wire.ts';
import { normalizeRequestPath, type EscapedSlashesAction, type PathNormalization } from '../../packages/proxy/src/http/path-normalize.ts';
import { RouteTable } from '../../packages/proxy/src/http/route-config.ts';
import { queryParameter } from '../../packages/proxy/src/http/route-match.ts';
import { parseGrpcTimeout } from '../../packages/proxy/src/http/router.ts';
import { Msg } from '../../packages/proxy/src/config/fields.ts';
import { fail } from './invariant.ts';

const ACTIONS: readonly EscapedSlashesAction[] = ['KEEP_UNCHANGED', 'REJECT_REQUEST', 'UNESCAPE_AND_REDIRECT', 'UNESCAPE_AND_FORWARD'];
const SETTINGS: PathNormalization[] = [];
for (const normalize of [false, true]) for (const mergeSlashes of [false, true]) for (const escapedSlashes of ACTIONS) SETTINGS.push({ normalize, mergeSlashes, escapedSlashes });

const hdr = (key: string, value: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ header: { key, value }, ...extra });

/** One route table with every matcher kind the route compiler knows, and formatted header additions. */
const ROUTES = new RouteTable(new Msg({
  name: 'fuzz',
  request_headers_to_add: [hdr('x-from-req', '%REQ(x-a)%-%REQ(:path)%'), hdr('x-peer', '%DOWNSTREAM_REMOTE_ADDRESS%')],
  request_headers_to_remove: ['x-remove-me'],
  virtual_hosts: [
    {
      name: 'exact', domains: ['exact.example.com', 'exact.example.com:8080'],
      routes: [
        { match: { path: '/exact' }, direct_response: { status: 200 } },
        { match: { safe_regex: { regex: '/re/[a-z]+/(\\d{1,4})' } }, route: { cluster: 'c', regex_rewrite: { pattern: { regex: '/re/([a-z]+)' }, substitution: '/\\1' } } },
        { match: { path_separated_prefix: '/sep' }, route: { cluster: 'c' } },
        { match: { prefix: '/CASE', case_sensitive: false }, route: { cluster: 'c', prefix_rewrite: '/case' } },
        { match: { prefix: '/', headers: [{ name: 'x-a', string_match: { prefix: 'v' } }, { name: 'x-b', present_match: true }, { name: 'x-n', range_match: { start: 1, end: 100 } }] }, route: { cluster: 'c' } },
        { match: { prefix: '/', query_parameters: [{ name: 'q', string_match: { safe_regex: { regex: '^[0-9]+$' } } }, { name: 'flag', present_match: true }] }, route: { cluster: 'c' } },
        { match: { prefix: '/', grpc: {} }, route: { cluster: 'c', max_stream_duration: { grpc_timeout_header_max: '5s' } } },
        { match: { prefix: '/', headers: [{ name: ':method', string_match: { exact: 'POST' } }, { name: 'x-c', string_match: { contains: 'z', ignore_case: true }, invert_match: true }] }, route: { cluster: 'c' } },
      ],
      request_headers_to_add: [hdr('x-vh', '%REQ(x-b)%', { append_action: 'ADD_IF_ABSENT' })],
    },
    { name: 'suffix', domains: ['*.example.com'], routes: [{ match: { prefix: '/' }, redirect: { path_redirect: '/moved', strip_query: true } }] },
    { name: 'prefix', domains: ['example.*'], routes: [{ match: { prefix: '/p' }, route: { cluster: 'c' } }] },
    { name: 'any', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'c' }, request_headers_to_add: [hdr('x-route', 'r-%REQ(host)%', { append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' })] }] },
  ],
}, 'route_config'));

const CANONICAL_ESCAPE = /%(?![0-9A-F]{2})|%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2D|2E|5F|7E)/;

export function fuzz(data: Buffer): void {
  const end = findHeadEnd(data, 0);
  const head = end > 0 ? parseHead(data, 0, end - 4, true, 100) : undefined;
  const path = typeof head === 'object' ? head.target : data.toString('latin1', 0, Math.min(data.length, 2048));
  for (const s of SETTINGS) checkPath(path, s);
  queryParameter(path, 'q');
  queryParameter(path, data.toString('latin1', 0, 8));
  if (typeof head === 'object') checkRequest(head);
}

function checkPath(raw: string, s: PathNormalization): void {
  const r = normalizeRequestPath(raw, s);
  if (r.kind === 'reject') return;
  const q = r.path.search(/[?#]/);
  const p = q < 0 ? r.path : r.path.slice(0, q);
  if (raw.slice(raw.search(/[?#]|$/)) !== r.path.slice(p.length)) fail('the query changed', { raw, s, out: r.path });
  if (s.normalize) {
    if (!p.startsWith('/')) fail('normalised path is not origin-form', { raw, s, out: r.path });
    if (p.includes('\\')) fail('normalised path has a backslash', { raw, s, out: r.path });
    if (/\/\.\.?(\/|$)/.test(p)) fail('normalised path has a dot segment', { raw, s, out: r.path });
    if (CANONICAL_ESCAPE.test(p)) fail('normalised path has a non-canonical escape', { raw, s, out: r.path });
  }
  if (s.mergeSlashes && p.includes('//')) fail('merged path has //', { raw, s, out: r.path });
  if (s.escapedSlashes !== 'KEEP_UNCHANGED' && /%(2f|5c)/i.test(p)) fail('escaped slash survived', { raw, s, out: r.path });
  // Normalising the result again is a no-op (a redirect's target is served, not redirected again).
  const again = normalizeRequestPath(r.path, s);
  if (again.kind !== 'ok' || again.path !== r.path) fail('normalisation is not idempotent', { raw, s, first: r.path, again });
}

function checkRequest(head: Head): void {
  const headers = { ...head.headers };
  const authority = typeof headers.host === 'string' ? headers.host : '';
  const view = { method: head.method, path: head.target, authority, scheme: 'http', headers };
  const matched = ROUTES.route(authority, view, head.method === 'CONNECT');
  parseGrpcTimeout(headers['grpc-timeout']);
  if (!matched) return;
  matched.route.requestHeaders.apply(headers);
  matched.vhost.requestHeaders.apply(headers);
  ROUTES.requestHeaders.apply(headers);
  for (const [k, v] of Object.entries(headers)) {
    for (const x of Array.isArray(v) ? v : [v]) if (x !== undefined && /[\0\r\n]/.test(String(x))) fail('header edit made a value with CR/LF/NUL', { k, v });
  }
  if (head.versionMinor !== 1) return;
  const wire = requestHead(head.method, head.target, headers, '');
  const again = parseHead(wire, 0, wire.length - 4, true, 1000);
  if (typeof again !== 'object') fail('upstream head does not parse', { error: again, wire: wire.toString('latin1') });
}
