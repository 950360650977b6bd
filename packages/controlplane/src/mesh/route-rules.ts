/**
 * One routing rule (a VirtualService http route, an HTTPRoute rule, a mesh-file rule) → Envoy routes
 * as istiod writes them: one route per match (matches are ORed), the action (weighted clusters,
 * redirect, direct response), rewrites, header operations, timeout and retry policy, and per-route
 * fault and CORS configs. Matches that name a port, source labels or gateways only apply there.
 */
import type { CorsPolicy, HeaderOps, HeaderRewrites, Labels } from '../istio/types.ts';
import { clusterName, selects, T } from './names.ts';
import { retryPolicy } from './pieces.ts';
import type { HeaderMatch, HttpRule, Json, MeshRoute, MeshService, MeshWorkload, RouteDestination, RouteMatch } from './types.ts';

/** Where a route config is being built: a sidecar's outbound port or a gateway's server port. */
export interface RouteContext {
  readonly port: number;
  /** `mesh` for sidecars, `namespace/name` on gateways. */
  readonly gateway: string;
  /** The workload whose proxy gets the config (sourceLabels / sourceNamespace matches). */
  readonly source: MeshWorkload;
  readonly services: ReadonlyMap<string, MeshService>;
  /** The cluster a destination (host, port, subset) names; default `outbound|<port>|<subset>|<host>` (a waypoint names its own `inbound-vip` ones). */
  readonly cluster?: (host: string, port: number, subset: string) => string;
}

const GRPC_CODES = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'];

/** A percentage as istiod writes it (per million). */
export function fraction(percent: number): Json {
  return { numerator: Math.round(percent * 10_000), denominator: 'MILLION' };
}

function headerMatcher(h: HeaderMatch): Json {
  const out: Json = h.kind === 'present' ? { name: h.name, present_match: true }
    : h.kind === 'regex' ? { name: h.name, string_match: { safe_regex: { regex: h.value } } }
      : { name: h.name, string_match: { [h.kind]: h.value } };
  if (h.invert) out.invert_match = true;
  return out;
}

function queryMatcher(q: HeaderMatch): Json {
  if (q.kind === 'present') return { name: q.name, present_match: true };
  return { name: q.name, string_match: q.kind === 'regex' ? { safe_regex: { regex: q.value } } : { [q.kind]: q.value } };
}

function routeMatch(m: RouteMatch | undefined): Json {
  const out: Json = {};
  const p = m?.path;
  if (!p) out.prefix = '/';
  else if (p.kind === 'regex') out.safe_regex = { regex: p.value };
  else if (p.kind === 'pathSeparatedPrefix') out.path_separated_prefix = p.value;
  else out[p.kind === 'exact' ? 'path' : 'prefix'] = p.value;
  out.case_sensitive = !m?.ignoreCase;
  if (m && m.headers.length) out.headers = m.headers.map(headerMatcher);
  if (m?.queryParams?.length) out.query_parameters = m.queryParams.map(queryMatcher);
  return out;
}

function applies(m: RouteMatch, ctx: RouteContext): boolean {
  if (m.port !== undefined && m.port !== ctx.port) return false;
  if (m.sourceLabels && !selects(m.sourceLabels as Labels, ctx.source.labels)) return false;
  if (m.sourceNamespace !== undefined && m.sourceNamespace !== ctx.source.namespace) return false;
  if (m.gateways && !m.gateways.includes(ctx.gateway)) return false;
  return true;
}

function headerAdds(ops: HeaderOps | undefined): Json[] {
  if (!ops) return [];
  return [
    ...Object.entries(ops.set).map(([key, value]) => ({ header: { key, value }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' })),
    ...Object.entries(ops.add).map(([key, value]) => ({ header: { key, value }, append_action: 'APPEND_IF_EXISTS_OR_ADD' })),
  ];
}

/** request/response header operations onto a route or weighted cluster. */
function applyHeaders(target: Json, h: HeaderRewrites | undefined): void {
  if (!h) return;
  const reqAdd = headerAdds(h.request), resAdd = headerAdds(h.response);
  if (reqAdd.length) target.request_headers_to_add = reqAdd;
  if (h.request?.remove.length) target.request_headers_to_remove = [...h.request.remove];
  if (resAdd.length) target.response_headers_to_add = resAdd;
  if (h.response?.remove.length) target.response_headers_to_remove = [...h.response.remove];
}

/** The port of `host` a destination reaches: its own, the listener's when the service has it, else the service's first. */
function destinationPort(d: { host?: string; port?: number }, host: string, ctx: RouteContext): number {
  if (d.port !== undefined) return d.port;
  const s = ctx.services.get(host);
  if (!s || s.ports.some((p) => p.port === ctx.port)) return ctx.port;
  return s.ports[0].port;
}

function faultConfig(f: NonNullable<HttpRule['fault']>): Json {
  const out: Json = { '@type': T.fault };
  if (f.delay) out.delay = { fixed_delay: f.delay.fixed, percentage: fraction(f.delay.percent) };
  if (f.abort) {
    out.abort = f.abort.httpStatus !== undefined
      ? { http_status: f.abort.httpStatus, percentage: fraction(f.abort.percent) }
      : { grpc_status: Math.max(0, GRPC_CODES.indexOf(f.abort.grpcStatus ?? 'UNAVAILABLE')), percentage: fraction(f.abort.percent) };
  }
  return out;
}

function corsConfig(c: CorsPolicy): Json {
  const out: Json = {
    '@type': T.corsPolicy,
    allow_origin_string_match: c.allowOrigins.map((o) => (o.kind === 'regex' ? { safe_regex: { regex: o.value } } : { [o.kind]: o.value })),
  };
  if (c.allowMethods.length) out.allow_methods = c.allowMethods.join(',');
  if (c.allowHeaders.length) out.allow_headers = c.allowHeaders.join(',');
  if (c.exposeHeaders.length) out.expose_headers = c.exposeHeaders.join(',');
  if (c.maxAgeMs !== undefined) out.max_age = String(Math.round(c.maxAgeMs / 1000));
  if (c.allowCredentials !== undefined) out.allow_credentials = c.allowCredentials;
  return out;
}

/** Istio's retryOn: Envoy policies, with status codes turned into retriable_status_codes. */
function retry(r: NonNullable<HttpRule['retries']>): Json | undefined {
  if (r.attempts === 0) return undefined;
  if (r.retryOn === undefined) return retryPolicy(r.attempts, undefined, r.perTryTimeout);
  const parts = r.retryOn.split(',').map((s) => s.trim()).filter(Boolean);
  const codes = parts.filter((p) => /^\d{3}$/.test(p)).map(Number);
  const on = parts.filter((p) => !/^\d{3}$/.test(p));
  if (codes.length && !on.includes('retriable-status-codes')) on.push('retriable-status-codes');
  const p = retryPolicy(r.attempts, on.join(','), r.perTryTimeout);
  p.retriable_status_codes = codes.length ? codes : [503];
  return p;
}

function clusterOf(ctx: RouteContext, host: string, port: number, subset: string): string {
  return ctx.cluster ? ctx.cluster(host, port, subset) : clusterName('outbound', port, subset, host);
}

function forward(rule: HttpRule, route: MeshRoute, ctx: RouteContext): Json {
  const dests = rule.destinations.filter((d) => d.weight > 0);
  const cluster = (d: RouteDestination): string => {
    const host = d.host ?? route.host;
    return clusterOf(ctx, host, destinationPort(d, host, ctx), d.subset);
  };
  const a: Json = {};
  if (dests.length === 1 && !dests[0].headers) a.cluster = cluster(dests[0]);
  else {
    a.weighted_clusters = {
      clusters: dests.map((d) => {
        const c: Json = { name: cluster(d), weight: d.weight };
        applyHeaders(c, d.headers);
        return c;
      }),
    };
  }
  a.timeout = rule.timeout ?? '0s';
  const rw = rule.rewrite;
  if (rw?.uri !== undefined || rw?.prefix !== undefined) a.prefix_rewrite = rw.uri ?? rw.prefix;
  if (rw?.regex) a.regex_rewrite = { pattern: { regex: rw.regex.match }, substitution: rw.regex.rewrite };
  if (rw?.authority) a.host_rewrite_literal = rw.authority;
  const rp = rule.retries ? retry(rule.retries) : retryPolicy();
  if (rp) a.retry_policy = rp;
  if (rule.mirrors?.length) {
    a.request_mirror_policies = rule.mirrors.map((m) => {
      const c: Json = { cluster: clusterOf(ctx, m.host, destinationPort(m, m.host, ctx), m.subset ?? '') };
      if (m.percent !== undefined) c.runtime_fraction = { default_value: fraction(m.percent) };
      return c;
    });
  }
  a.max_grpc_timeout = '0s';
  return a;
}

function redirect(r: NonNullable<HttpRule['redirect']>): Json {
  const out: Json = {};
  if (r.uri !== undefined) out.path_redirect = r.uri;
  if (r.prefix !== undefined) out.prefix_rewrite = r.prefix;
  if (r.authority !== undefined) out.host_redirect = r.authority;
  if (r.port !== undefined) out.port_redirect = r.port;
  if (r.scheme !== undefined) out.scheme_redirect = r.scheme;
  const codes: Record<number, string> = { 301: 'MOVED_PERMANENTLY', 302: 'FOUND', 303: 'SEE_OTHER', 307: 'TEMPORARY_REDIRECT', 308: 'PERMANENT_REDIRECT' };
  out.response_code = codes[r.code ?? 301] ?? 'MOVED_PERMANENTLY';
  return out;
}

/** istiod's decorator: the destination `host:port` and the matched path (`/x` exact, `/x*` prefix, `/*` otherwise). */
function decorator(hostPort: string, m: RouteMatch | undefined): Json {
  const p = m?.path;
  const path = p?.kind === 'exact' ? p.value : p?.kind === 'prefix' || p?.kind === 'pathSeparatedPrefix' ? `${p.value}*` : '/*';
  return { operation: `${hostPort}${path}` };
}

/**
 * The Envoy routes of a route's rules in this context (rules whose every match is elsewhere are left
 * out). Decorators name `decoratorHost` (sidecars: the service) or, when undefined, each rule's first destination.
 */
export function ruleRoutes(route: MeshRoute, ctx: RouteContext, decoratorHost?: string): Json[] {
  const out: Json[] = [];
  for (const rule of route.rules) {
    const first = rule.destinations[0];
    const dhost = first?.host ?? route.host;
    const hostPort = decoratorHost !== undefined ? `${decoratorHost}:${ctx.port}` : first ? `${dhost}:${destinationPort(first, dhost, ctx)}` : `${route.host}:${ctx.port}`;
    const base: Json = {};
    if (rule.directResponse) base.direct_response = { status: rule.directResponse.status, ...(rule.directResponse.body !== undefined ? { body: { inline_string: rule.directResponse.body } } : {}) };
    else if (rule.redirect) base.redirect = redirect(rule.redirect);
    else base.route = forward(rule, route, ctx);
    base.metadata = { filter_metadata: { istio: { config: route.configPath ?? `/apis/networking.istio.io/v1alpha3/namespaces/${route.namespace}/virtual-service/${route.name}` } } };
    if (rule.name) base.name = rule.name;
    applyHeaders(base, rule.headers);
    const perFilter: Json = {};
    if (rule.fault) perFilter['envoy.filters.http.fault'] = faultConfig(rule.fault);
    if (rule.cors) perFilter['envoy.filters.http.cors'] = corsConfig(rule.cors);
    if (Object.keys(perFilter).length) base.typed_per_filter_config = perFilter;
    if (rule.matches.length === 0) { out.push({ match: routeMatch(undefined), ...base, decorator: decorator(hostPort, undefined) }); continue; }
    for (const m of rule.matches) if (applies(m, ctx)) out.push({ match: routeMatch(m), ...base, decorator: decorator(hostPort, m) });
  }
  return out;
}
