/** Gateway API (gateway.networking.k8s.io): Gateway and HTTPRoute, with the CRD's rules. */
import type { Node } from '../reader.ts';
import type { Meta } from '../types.ts';
import type { BackendRef, HeaderModifier, HttpRoute, HttpRouteFilter, HttpRouteHeaderMatch, HttpRouteMatch, HttpRouteRule, K8sGateway, ParentRef } from '../types-k8s.ts';
import { checkRegex, hostProblem, port } from './common.ts';

function parentRef(n: Node): ParentRef {
  n.known(['group', 'kind', 'name', 'namespace', 'port', 'sectionName']);
  const group = n.str('group') ?? 'gateway.networking.k8s.io';
  const kind = n.str('kind') ?? 'Gateway';
  if (!((group === 'gateway.networking.k8s.io' && kind === 'Gateway') || ((group === '' || group === 'core') && kind === 'Service'))) {
    n.error('kind', `parentRef ${group}/${kind} is not supported: a Gateway or a Service`);
  }
  return { group, kind, name: n.reqStr('name') ?? '', namespace: n.str('namespace'), port: port(n, 'port'), sectionName: n.str('sectionName') };
}

function backendRef(n: Node, extra: readonly string[] = []): BackendRef | undefined {
  n.known(['group', 'kind', 'name', 'namespace', 'port', 'weight', ...extra]);
  const group = n.str('group') ?? '', kind = n.str('kind') ?? 'Service';
  if (!(group === '' && kind === 'Service') && !(group === 'networking.istio.io' && kind === 'Hostname')) n.error('kind', `backendRef ${group}/${kind} is not supported: a Service`);
  const p = port(n, 'port');
  if (p === undefined && kind === 'Service') n.rule('Must have port for Service reference');
  const weight = n.int('weight', 0, 1000000) ?? 1;
  const name = n.reqStr('name') ?? '';
  return { group, kind, name, namespace: n.str('namespace'), port: p, weight };
}

function headerMatches(n: Node, key: string): HttpRouteHeaderMatch[] {
  return n.list(key).map((h) => {
    h.known(['type', 'name', 'value']);
    const type = h.oneOf('type', ['Exact', 'RegularExpression'] as const) ?? 'Exact';
    const value = h.reqStr('value') ?? '';
    if (type === 'RegularExpression') checkRegex(h, 'value', value);
    return { type, name: (h.reqStr('name') ?? '').toLowerCase(), value };
  });
}

function match(n: Node): HttpRouteMatch {
  n.known(['path', 'headers', 'queryParams', 'method']);
  const p = n.obj('path');
  let path: HttpRouteMatch['path'];
  if (p) {
    p.known(['type', 'value']);
    const type = p.oneOf('type', ['Exact', 'PathPrefix', 'RegularExpression'] as const) ?? 'PathPrefix';
    const value = p.str('value') ?? '/';
    if (type === 'RegularExpression') checkRegex(p, 'value', value);
    else if (!value.startsWith('/')) p.rule('value must be an absolute path and start with \'/\' when type one of [\'Exact\', \'PathPrefix\']');
    else if (value.includes('//')) p.rule('must not contain \'//\' when type one of [\'Exact\', \'PathPrefix\']');
    path = { type, value };
  }
  const method = n.oneOf('method', ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH'] as const);
  return { path: path ?? { type: 'PathPrefix', value: '/' }, headers: headerMatches(n, 'headers'), queryParams: headerMatches(n, 'queryParams'), method };
}

function headerModifier(n: Node | undefined): HeaderModifier | undefined {
  if (!n) return undefined;
  n.known(['set', 'add', 'remove']);
  const pairs = (k: string): Array<{ name: string; value: string }> => n.list(k).map((h) => { h.known(['name', 'value']); return { name: h.reqStr('name') ?? '', value: h.reqStr('value') ?? '' }; });
  return { set: pairs('set'), add: pairs('add'), remove: n.strList('remove') };
}

function pathModifier(n: Node | undefined): { type: 'ReplaceFullPath' | 'ReplacePrefixMatch'; value: string } | undefined {
  if (!n) return undefined;
  n.known(['type', 'replaceFullPath', 'replacePrefixMatch']);
  const type = n.oneOf('type', ['ReplaceFullPath', 'ReplacePrefixMatch'] as const);
  if (!type) { n.error('type', 'Required value'); return undefined; }
  const value = n.str(type === 'ReplaceFullPath' ? 'replaceFullPath' : 'replacePrefixMatch');
  if (value === undefined) { n.rule(`${type === 'ReplaceFullPath' ? 'replaceFullPath' : 'replacePrefixMatch'} must be specified when type is set to '${type}'`); return undefined; }
  return { type, value };
}

function filter(n: Node): HttpRouteFilter | undefined {
  n.known(['type', 'requestHeaderModifier', 'responseHeaderModifier', 'requestRedirect', 'urlRewrite', 'requestMirror', 'extensionRef', 'cors']);
  const type = n.oneOf('type', ['RequestHeaderModifier', 'ResponseHeaderModifier', 'RequestRedirect', 'URLRewrite', 'RequestMirror', 'ExtensionRef', 'CORS'] as const);
  if (!type) { if (!n.has('type')) n.error('type', 'Required value'); return undefined; }
  if (type === 'ExtensionRef' || type === 'CORS') { n.error('type', `${type} filters are not supported by skua yet`); return undefined; }
  if (type === 'RequestHeaderModifier' || type === 'ResponseHeaderModifier') {
    const key = type === 'RequestHeaderModifier' ? 'requestHeaderModifier' : 'responseHeaderModifier';
    if (!n.has(key)) n.rule(`filter.${key} must be specified for ${type} filter.type`);
    return { type, headers: headerModifier(n.obj(key)) };
  }
  if (type === 'RequestRedirect') {
    const r = n.obj('requestRedirect');
    if (!r) { n.rule('filter.requestRedirect must be specified for RequestRedirect filter.type'); return undefined; }
    r.known(['scheme', 'hostname', 'path', 'port', 'statusCode']);
    const statusCode = r.int('statusCode');
    if (statusCode !== undefined && statusCode !== 301 && statusCode !== 302) r.error('statusCode', `Unsupported value: ${statusCode}: supported values: "301", "302"`);
    return { type, redirect: { scheme: r.oneOf('scheme', ['http', 'https'] as const), hostname: r.str('hostname'), port: port(r, 'port'), statusCode, path: pathModifier(r.obj('path')) } };
  }
  if (type === 'URLRewrite') {
    const r = n.obj('urlRewrite');
    if (!r) { n.rule('filter.urlRewrite must be specified for URLRewrite filter.type'); return undefined; }
    r.known(['hostname', 'path']);
    return { type, rewrite: { hostname: r.str('hostname'), path: pathModifier(r.obj('path')) } };
  }
  const m = n.obj('requestMirror');
  if (!m) { n.rule('filter.requestMirror must be specified for RequestMirror filter.type'); return undefined; }
  m.known(['backendRef', 'percent', 'fraction']);
  const ref = m.obj('backendRef');
  const mirror = ref ? backendRef(ref) : undefined;
  if (!ref) m.error('backendRef', 'Required value');
  return mirror ? { type, mirror: { ...mirror, weight: m.int('percent', 0, 100) ?? 100 } } : undefined;
}

function rule(n: Node): HttpRouteRule {
  n.known(['name', 'matches', 'filters', 'backendRefs', 'timeouts', 'retry', 'sessionPersistence'],
    { retry: 'Gateway API retries are experimental and not applied', sessionPersistence: 'session persistence is not applied' });
  const filters = n.list('filters').map(filter).filter((x) => x !== undefined);
  if (filters.some((x) => x.type === 'RequestRedirect') && filters.some((x) => x.type === 'URLRewrite')) n.rule('May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both');
  const backendRefs = n.list('backendRefs').map((b) => {
    const ref = backendRef(b, ['filters']);
    if (b.has('filters')) b.notApplied('filters', 'per-backend filters are not applied');
    return ref;
  }).filter((x) => x !== undefined);
  if (backendRefs.length > 16) n.error('backendRefs', `Too many: ${backendRefs.length}: must have at most 16 items`);
  const t = n.obj('timeouts');
  t?.known(['request', 'backendRequest'], { backendRequest: 'the request timeout covers the backend request' });
  const matches = n.list('matches').map(match);
  return { name: n.str('name'), matches: matches.length ? matches : [{ path: { type: 'PathPrefix', value: '/' }, headers: [], queryParams: [] }], filters, backendRefs, timeoutMs: t?.duration('request') };
}

export function readHttpRoute(meta: Meta, spec: Node): HttpRoute {
  spec.known(['parentRefs', 'hostnames', 'rules']);
  const hostnames = spec.strList('hostnames');
  for (const h of hostnames) { const p = hostProblem(h); if (p || h === '*') spec.error('hostnames', p ?? 'hostname cannot be *'); }
  const parentRefs = spec.list('parentRefs').map(parentRef);
  if (parentRefs.length === 0) spec.error('parentRefs', 'Required value: an HTTPRoute attaches to a Gateway or a Service');
  const rules = spec.list('rules').map(rule);
  return { meta, parentRefs, hostnames, rules: rules.length ? rules : [{ matches: [{ path: { type: 'PathPrefix', value: '/' }, headers: [], queryParams: [] }], filters: [], backendRefs: [] }] };
}

export function readK8sGateway(meta: Meta, spec: Node): K8sGateway {
  spec.known(['gatewayClassName', 'listeners', 'addresses', 'infrastructure', 'backendTLS', 'allowedListeners'],
    { addresses: 'the gateway binds its pod\'s address', infrastructure: 'the gateway pod is declared by you', backendTLS: 'backend TLS is not applied', allowedListeners: 'listener sets are not applied' });
  const gatewayClassName = spec.reqStr('gatewayClassName') ?? '';
  if (gatewayClassName && gatewayClassName !== 'istio' && gatewayClassName !== 'istio-waypoint') spec.error('gatewayClassName', `gateway class ${JSON.stringify(gatewayClassName)} is not Istio's (istio, istio-waypoint)`);
  const names = new Set<string>();
  const listeners = spec.list('listeners').map((l) => {
    l.known(['name', 'hostname', 'port', 'protocol', 'tls', 'allowedRoutes'], { allowedRoutes: 'routes from any namespace attach' });
    const name = l.reqStr('name') ?? '';
    if (names.has(name)) l.error('name', `Duplicate value: ${JSON.stringify(name)}`);
    names.add(name);
    const protocol = l.reqStr('protocol') ?? '';
    if (gatewayClassName === 'istio' && protocol !== 'HTTP') l.error('protocol', `${protocol} listeners are not supported by skua yet (HTTP is)`);
    if (gatewayClassName === 'istio-waypoint' && protocol !== 'HBONE') l.error('protocol', `${protocol} listeners are not supported on waypoints by skua yet (HBONE is)`);
    if (l.has('tls')) l.error('tls', 'TLS listeners are not supported by skua yet');
    const hostname = l.str('hostname');
    if (hostname !== undefined) { const p = hostProblem(hostname); if (p) l.error('hostname', p); }
    return { name, port: port(l, 'port') ?? 0, protocol, hostname };
  });
  if (listeners.length === 0) spec.error('listeners', 'Required value');
  return { meta, gatewayClassName, listeners };
}
