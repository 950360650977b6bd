/** VirtualService (networking.istio.io): istiod's validation rules, read into a VirtualService record. */
import type { Node } from '../reader.ts';
import type { CorsPolicy, HttpMatch, HttpRoute, HttpRouteDestination, Meta, StringMatch, TcpRoute, VirtualService } from '../types.ts';
import { destination, exportTo, headerRewrites, hostProblem, isDns1123Label, labels, matchMap, port, stringMatch } from './common.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH'];

function gatewayNames(n: Node, key: string): string[] {
  const names = n.strList(key);
  for (const g of names) {
    const parts = g.split('/');
    if (g === 'mesh') continue;
    if (parts.length > 2 || parts.some((p) => p === '')) n.error(key, `config namespace and gateway name cannot be empty`);
    else if (parts.length === 2 && !isDns1123Label(parts[0])) n.error(key, `invalid value for namespace: ${JSON.stringify(parts[0])}`);
    else if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(parts[parts.length - 1])) n.error(key, `invalid value for gateway name: ${JSON.stringify(parts[parts.length - 1])}`);
  }
  return names;
}

/** A percentage value: 0, or 0.0001..100. */
function percent(n: Node | undefined): number | undefined {
  if (!n) return undefined;
  n.known(['value']);
  const v = n.num('value');
  if (v !== undefined && (v < 0 || v > 100 || (v > 0 && v < 0.0001))) n.error('value', `percentage ${v} is neither 0.0, nor in range [0.0001, 100.0]`);
  return v;
}

function httpMatch(m: Node): HttpMatch {
  m.known(['name', 'uri', 'scheme', 'method', 'authority', 'headers', 'withoutHeaders', 'queryParams', 'port', 'sourceLabels', 'sourceNamespace', 'gateways', 'ignoreUriCase', 'statPrefix'],
    { statPrefix: 'per-route stat prefixes are not emitted' });
  const sourceNamespace = m.str('sourceNamespace');
  if (sourceNamespace !== undefined && !isDns1123Label(sourceNamespace)) m.error('sourceNamespace', `sourceNamespace match ${sourceNamespace} is invalid`);
  return {
    name: m.str('name'), uri: stringMatch(m.obj('uri'), 'uri'), scheme: stringMatch(m.obj('scheme'), 'scheme'),
    method: stringMatch(m.obj('method'), 'method'), authority: stringMatch(m.obj('authority'), 'authority'),
    headers: matchMap(m, 'headers', true), withoutHeaders: matchMap(m, 'withoutHeaders', true), queryParams: matchMap(m, 'queryParams', false),
    port: port(m, 'port'), sourceLabels: m.has('sourceLabels') ? labels(m, 'sourceLabels', 'sourceLabels') : undefined, sourceNamespace,
    gateways: gatewayNames(m, 'gateways'), ignoreUriCase: m.bool('ignoreUriCase') ?? false,
  };
}

function routeDestinations(r: Node): HttpRouteDestination[] {
  const out: HttpRouteDestination[] = [];
  let total = 0;
  for (const d of r.list('route')) {
    d.known(['destination', 'weight', 'headers']);
    const dest = destination(d.reqObj('destination'));
    const weight = d.int('weight');
    if (weight !== undefined) {
      if (weight < 0) d.error('weight', `weight ${weight} < 0`);
      else total += weight;
    }
    if (dest) out.push({ destination: dest, weight, headers: headerRewrites(d.obj('headers')) });
  }
  // istiod: weights are optional for one destination; with more, they may not add up to zero (unset is 0).
  if (out.length > 1 && total === 0) r.error('route', 'total destination weight = 0');
  return out;
}

function cors(n: Node | undefined): CorsPolicy | undefined {
  if (!n) return undefined;
  n.known(['allowOrigins', 'allowOrigin', 'allowMethods', 'allowHeaders', 'exposeHeaders', 'maxAge', 'allowCredentials', 'unmatchedPreflights'],
    { unmatchedPreflights: 'preflights are always handled by the CORS filter' });
  if (n.has('allowOrigin')) n.warn('allowOrigin', 'allowOrigin is deprecated, use allowOrigins');
  const allowOrigins: StringMatch[] = n.list('allowOrigins').map((o) => stringMatch(o, 'allowOrigins')).filter((x) => x !== undefined);
  for (const o of n.strList('allowOrigin')) allowOrigins.push(o === '*' ? { kind: 'regex', value: '.*' } : { kind: 'exact', value: o });
  const allowMethods = n.strList('allowMethods');
  for (const m of allowMethods) if (!METHODS.includes(m)) n.error('allowMethods', `${JSON.stringify(m)} is not a supported HTTP method`);
  const maxAgeMs = n.duration('maxAge');
  if (maxAgeMs !== undefined && maxAgeMs % 1000 !== 0) n.error('maxAge', 'max_age duration is accurate only to seconds precision');
  return { allowOrigins, allowMethods, allowHeaders: n.strList('allowHeaders'), exposeHeaders: n.strList('exposeHeaders'), maxAgeMs, allowCredentials: n.bool('allowCredentials') };
}

function fault(n: Node | undefined): HttpRoute['fault'] {
  if (!n) return undefined;
  n.known(['delay', 'abort']);
  const d = n.obj('delay'), a = n.obj('abort');
  if (!d && !a) n.rule('HTTP fault injection must have an abort and/or a delay');
  let delay, abort;
  if (d) {
    d.known(['fixedDelay', 'exponentialDelay', 'percentage', 'percent']);
    if (d.has('exponentialDelay')) d.error('exponentialDelay', 'exponentialDelay not supported yet');
    if (d.has('percent')) d.warn('percent', 'percent is deprecated, use percentage');
    const fixedMs = d.duration('fixedDelay');
    if (fixedMs === undefined && !d.has('fixedDelay')) d.error('fixedDelay', 'Required value');
    const pct = percent(d.obj('percentage')) ?? d.int('percent', 0, 100) ?? 100;
    if (fixedMs !== undefined) delay = { fixedMs, percent: pct };
  }
  if (a) {
    a.known(['httpStatus', 'grpcStatus', 'http2Error', 'percentage']);
    if (a.has('http2Error')) a.error('http2Error', 'HTTP/2 abort fault injection not supported yet');
    const httpStatus = a.int('httpStatus');
    if (httpStatus !== undefined && (httpStatus < 200 || httpStatus > 599)) a.error('httpStatus', `HTTP status ${httpStatus} is not in range 200-599`);
    const grpcStatus = a.str('grpcStatus');
    if (httpStatus === undefined && grpcStatus === undefined && !a.has('http2Error')) a.rule('one of httpStatus, grpcStatus or http2Error is required');
    abort = { httpStatus, grpcStatus, percent: percent(a.obj('percentage')) ?? 100 };
  }
  return { delay, abort };
}

function redirect(n: Node | undefined, matches: readonly HttpMatch[]): HttpRoute['redirect'] {
  if (!n) return undefined;
  n.known(['uri', 'authority', 'port', 'derivePort', 'scheme', 'redirectCode', 'prefixRewrite'], { derivePort: 'the redirect keeps the request port unless port is set' });
  if (n.has('uri') && n.has('prefixRewrite')) n.rule('redirect may only specify one of uri or prefix_rewrite');
  if (n.has('prefixRewrite') && matches.some((m) => m.uri && m.uri.kind !== 'prefix')) n.rule('redirect prefix_rewrite requires all URI matches to use prefix match type');
  if (n.has('prefixRewrite')) n.error('prefixRewrite', 'prefixRewrite redirects are not supported by skua yet; use uri');
  if (!['uri', 'authority', 'scheme', 'port', 'derivePort', 'prefixRewrite'].some((k) => n.has(k))) n.rule('redirect must specify URI, authority, scheme, or port');
  const code = n.int('redirectCode');
  if (code !== undefined && (code < 300 || code > 399)) n.error('redirectCode', `${code} is not a valid redirect code, must be 3xx`);
  const scheme = n.str('scheme');
  if (scheme !== undefined && scheme !== 'http' && scheme !== 'https') n.error('scheme', 'invalid redirect scheme, must be "http" or "https"');
  return { uri: n.str('uri'), authority: n.str('authority'), port: port(n, 'port'), scheme, redirectCode: code };
}

function retries(n: Node | undefined): HttpRoute['retries'] {
  if (!n) return undefined;
  n.known(['attempts', 'perTryTimeout', 'retryOn', 'retryRemoteLocalities', 'retryIgnorePreviousHosts', 'backoff'],
    { retryRemoteLocalities: 'locality-aware retries are not applied', backoff: 'the retry back-off is Envoy\'s default' });
  const attempts = n.int('attempts');
  if (attempts !== undefined && attempts < 0) n.error('attempts', 'attempts cannot be negative');
  const retryOn = n.str('retryOn');
  if (retryOn !== undefined) {
    for (const p of retryOn.split(',').map((s) => s.trim())) {
      if (p === '' || (!/^\d{3}$/.test(p) && !/^[a-z0-9-]+$/.test(p))) n.error('retryOn', `${JSON.stringify(p)} is not a valid retryOn value`);
    }
  }
  return { attempts: attempts ?? 2, perTryTimeoutMs: n.duration('perTryTimeout'), retryOn };
}

function rewrite(n: Node | undefined): HttpRoute['rewrite'] {
  if (!n) return undefined;
  n.known(['uri', 'authority', 'uriRegexRewrite']);
  const rr = n.obj('uriRegexRewrite');
  if (n.has('uri') && rr) n.rule('rewrite may only contain one of URI or UriRegexRewrite');
  if (!n.has('uri') && !rr && !n.has('authority')) n.rule('rewrite must specify at least one of URI, UriRegexRewrite, or authority. Only one of URI or UriRegexRewrite may be specified');
  let regex;
  if (rr) {
    rr.known(['match', 'rewrite']);
    const match = rr.reqStr('match'), to = rr.reqStr('rewrite');
    if (match !== undefined && to !== undefined) regex = { match, rewrite: to };
  }
  return { uri: n.str('uri'), authority: n.str('authority'), regex };
}

function httpRoute(r: Node): HttpRoute {
  r.known(['name', 'match', 'route', 'redirect', 'directResponse', 'delegate', 'rewrite', 'timeout', 'retries', 'fault', 'mirror', 'mirrors', 'mirrorPercentage', 'mirrorPercent', 'mirror_percent', 'corsPolicy', 'headers']);
  if (r.has('delegate')) r.error('delegate', 'VirtualService delegation is not supported by skua yet');
  const match = r.list('match').map(httpMatch);
  const hasRoute = r.rawList('route').length > 0;
  if (r.has('redirect') && hasRoute) r.rule('HTTP route cannot contain both route and redirect');
  if (r.has('redirect') && r.has('fault')) r.rule('HTTP route cannot contain both fault and redirect');
  if (r.has('redirect') && r.has('rewrite')) r.rule('HTTP route rule cannot contain both rewrite and redirect');
  if (!r.has('redirect') && !hasRoute && !r.has('directResponse') && !r.has('delegate')) r.rule('HTTP route, redirect or directResponse is required');
  if (r.has('directResponse') && (hasRoute || r.has('redirect'))) r.rule('directResponse must not be set together with route or redirect');
  let directResponse;
  const dr = r.obj('directResponse');
  if (dr) {
    dr.known(['status', 'body']);
    const status = dr.int('status');
    if (status === undefined) dr.error('status', 'Required value');
    else if (status < 200 || status > 599) dr.error('status', `status ${status} must be in the range 200-599`);
    const b = dr.obj('body');
    b?.known(['string', 'bytes']);
    const body = b?.str('string') ?? (b?.str('bytes') !== undefined ? Buffer.from(b.str('bytes')!, 'base64').toString() : undefined);
    if (body !== undefined && body.length > 1024 * 1024) dr.error('body', 'large direct_responses may impact control plane performance, must be less than 1MB');
    if (status !== undefined) directResponse = { status, body };
  }
  const mirrors: Array<{ destination: NonNullable<ReturnType<typeof destination>>; percent?: number }> = [];
  const single = destination(r.obj('mirror'));
  if (r.has('mirrorPercent') || r.has('mirror_percent')) r.warn('mirrorPercent', 'using deprecated setting "mirrorPercent", use "mirrorPercentage" instead');
  if (single) mirrors.push({ destination: single, percent: percent(r.obj('mirrorPercentage')) ?? r.int('mirrorPercent', 0, 100) });
  for (const m of r.list('mirrors')) {
    m.known(['destination', 'percentage']);
    const d = destination(m.reqObj('destination'));
    if (d) mirrors.push({ destination: d, percent: percent(m.obj('percentage')) });
  }
  return {
    name: r.str('name'), match, route: routeDestinations(r), redirect: redirect(r.obj('redirect'), match), directResponse,
    rewrite: rewrite(r.obj('rewrite')), timeoutMs: r.duration('timeout'), retries: retries(r.obj('retries')), fault: fault(r.obj('fault')),
    mirrors, corsPolicy: cors(r.obj('corsPolicy')), headers: headerRewrites(r.obj('headers')),
  };
}

function tcpRoute(r: Node): TcpRoute {
  r.known(['match', 'route']);
  const match = r.list('match').map((m) => {
    m.known(['port', 'sourceLabels', 'gateways', 'destinationSubnets', 'sourceNamespace', 'sourceSubnet'],
      { destinationSubnets: 'subnet matches need traffic capture', sourceSubnet: 'subnet matches need traffic capture', sourceNamespace: 'source namespace matches are not applied to TCP' });
    return { port: port(m, 'port'), sourceLabels: m.has('sourceLabels') ? labels(m, 'sourceLabels', 'sourceLabels') : undefined, gateways: gatewayNames(m, 'gateways') };
  });
  const route = r.list('route').map((d) => {
    d.known(['destination', 'weight']);
    const weight = d.int('weight');
    if (weight !== undefined && weight < 0) d.error('weight', `weight ${weight} < 0`);
    return { destination: destination(d.reqObj('destination')), weight };
  }).filter((d): d is { destination: NonNullable<typeof d.destination>; weight: number | undefined } => d.destination !== undefined);
  if (route.length === 0) r.error('route', 'TCP route is required');
  return { match, route };
}

export function readVirtualService(meta: Meta, spec: Node): VirtualService {
  spec.known(['hosts', 'gateways', 'http', 'tcp', 'tls', 'exportTo'], { tls: 'TLS (SNI) routes are not translated yet' });
  const hosts = spec.strList('hosts');
  const gateways = gatewayNames(spec, 'gateways');
  const onMesh = gateways.length === 0 || gateways.includes('mesh');
  if (hosts.length === 0) spec.error('hosts', 'virtual service must have at least one host');
  for (const h of hosts) {
    if (h === '*' && onMesh) spec.error('hosts', 'wildcard host * is not allowed for virtual services bound to the mesh gateway');
    else { const p = hostProblem(h); if (p) spec.error('hosts', p); }
  }
  for (let i = 0; i < hosts.length; i++) for (let j = i + 1; j < hosts.length; j++) if (hosts[i] === hosts[j]) spec.error('hosts', `duplicate hosts in virtual service: ${hosts[i]} & ${hosts[j]}`);
  if (!spec.has('http') && !spec.has('tcp') && !spec.has('tls')) spec.rule('http, tcp or tls must be provided in virtual service');
  return { meta, hosts, gateways, exportTo: exportTo(spec), http: spec.list('http').map(httpRoute), tcp: spec.list('tcp').map(tcpRoute) };
}
