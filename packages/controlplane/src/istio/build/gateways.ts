/**
 * Ingress: Istio Gateways and Gateway API Gateways → which router pods listen on what; Gateway API
 * HTTPRoutes → routes for a Gateway (ingress) or a Service (GAMMA: the sidecars' outbound routes),
 * as istiod converts them (route names `<namespace>.<name>.<rule>`, PathPrefix as a segment prefix).
 */
import type { HeaderMatch, HttpRule, MeshGateway, MeshRoute, RouteMatch } from '../../mesh/types.ts';
import type { HeaderOps, IstioGateway } from '../types.ts';
import type { BackendRef, HeaderModifier, HttpRoute, HttpRouteRule, K8sGateway } from '../types-k8s.ts';
import { DOMAIN, type Registry } from './registry.ts';
import type { Report } from './report.ts';

export function istioGateway(g: IstioGateway): MeshGateway {
  return {
    key: `${g.meta.namespace}/${g.meta.name}`, namespace: g.meta.namespace, selector: g.selector,
    servers: g.servers.map((s) => ({ port: s.port.number, portName: s.port.name, protocol: s.port.protocol, hosts: s.hosts, tls: s.tls })),
  };
}

export function k8sGateway(g: K8sGateway): MeshGateway | undefined {
  if (g.gatewayClassName !== 'istio') return undefined;
  return {
    key: `${g.meta.namespace}/${g.meta.name}`, namespace: g.meta.namespace, selector: { 'gateway.networking.k8s.io/gateway-name': g.meta.name }, sameNamespace: true,
    servers: g.listeners.map((l) => ({ port: l.port, portName: l.name, protocol: l.protocol, hosts: [l.hostname ?? '*'] })),
  };
}

function ops(m: HeaderModifier | undefined): HeaderOps | undefined {
  if (!m) return undefined;
  const pairs = (l: HeaderModifier['set']): Record<string, string> => Object.fromEntries(l.map((h) => [h.name, h.value]));
  return { set: pairs(m.set), add: pairs(m.add), remove: m.remove };
}

function backendHost(b: BackendRef, namespace: string): string {
  return b.kind === 'Hostname' ? b.name : `${b.name}.${b.namespace ?? namespace}.svc.${DOMAIN}`;
}

function rule(r: HttpRouteRule, i: number, route: HttpRoute, registry: Registry, report: Report): HttpRule {
  const ns = route.meta.namespace;
  const matches: RouteMatch[] = r.matches.map((m) => {
    const headers: HeaderMatch[] = m.headers.map((h) => ({ name: h.name, kind: h.type === 'Exact' ? 'exact' : 'regex', value: h.value }));
    if (m.method) headers.unshift({ name: ':method', kind: 'exact', value: m.method });
    const p = m.path;
    const path: RouteMatch['path'] = !p ? undefined : p.type === 'Exact' ? { kind: 'exact', value: p.value } : p.type === 'RegularExpression' ? { kind: 'regex', value: p.value }
      : p.value === '/' ? { kind: 'prefix', value: '/' } : { kind: 'pathSeparatedPrefix', value: p.value.replace(/\/$/, '') };
    return { path, headers, queryParams: m.queryParams.map((q) => ({ name: q.name, kind: q.type === 'Exact' ? 'exact' : 'regex', value: q.value })) };
  });
  const destinations = r.backendRefs.map((b, j) => {
    const host = backendHost(b, ns);
    if (b.kind === 'Service' && !registry.byHost.has(host)) report.notFound(route.meta, `spec.rules[${i}].backendRefs[${j}].name`, 'host', host);
    return { host, subset: '', port: b.port, weight: b.weight };
  });
  const f = (t: string) => r.filters.find((x) => x.type === t);
  const rd = f('RequestRedirect')?.redirect, rw = f('URLRewrite')?.rewrite, mirror = f('RequestMirror')?.mirror;
  return {
    name: `${ns}.${route.meta.name}.${i}`, matches, destinations: destinations.filter((d) => d.weight > 0 || destinations.length === 1),
    timeout: r.timeoutMs === undefined ? undefined : `${r.timeoutMs / 1000}s`,
    headers: { request: ops(f('RequestHeaderModifier')?.headers), response: ops(f('ResponseHeaderModifier')?.headers) },
    redirect: rd ? {
      scheme: rd.scheme, authority: rd.hostname, port: rd.port, code: rd.statusCode,
      uri: rd.path?.type === 'ReplaceFullPath' ? rd.path.value : undefined, prefix: rd.path?.type === 'ReplacePrefixMatch' ? rd.path.value : undefined,
    } : undefined,
    rewrite: rw ? { authority: rw.hostname, uri: rw.path?.type === 'ReplaceFullPath' ? rw.path.value : undefined, prefix: rw.path?.type === 'ReplacePrefixMatch' ? rw.path.value : undefined } : undefined,
    mirrors: mirror ? [{ host: backendHost(mirror, ns), port: mirror.port, percent: mirror.weight }] : undefined,
    // Gateway API: a rule with no usable backend answers 500.
    directResponse: !rd && destinations.every((d) => d.weight === 0) ? { status: 500 } : undefined,
  };
}

/** HTTPRoutes → MeshRoutes: one per (parent, hostname). */
export function httpRouteRoutes(list: readonly HttpRoute[], gateways: readonly MeshGateway[], registry: Registry, report: Report): MeshRoute[] {
  const out: MeshRoute[] = [];
  for (const route of list) {
    const ns = route.meta.namespace;
    const rules = route.rules.map((r, i) => rule(r, i, route, registry, report));
    const configPath = `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/httproute/${route.meta.name}`;
    for (const [i, p] of route.parentRefs.entries()) {
      const pns = p.namespace ?? ns;
      if (p.kind === 'Service') {
        const host = `${p.name}.${pns}.svc.${DOMAIN}`;
        if (!registry.byHost.has(host)) { report.notFound(route.meta, `spec.parentRefs[${i}]`, 'parentRef Service', `${pns}/${p.name}`); continue; }
        const portRules = p.port === undefined ? rules : rules.map((r) => ({ ...r, matches: (r.matches.length ? r.matches : [{ headers: [] }]).map((m) => ({ ...m, port: p.port })) }));
        out.push({ name: route.meta.name, namespace: ns, host, rules: portRules, gateways: ['mesh'], configPath });
        continue;
      }
      const key = `${pns}/${p.name}`;
      if (!gateways.some((g) => g.key === key)) { report.notFound(route.meta, `spec.parentRefs[${i}]`, 'parentRef Gateway', key); continue; }
      for (const h of route.hostnames.length ? route.hostnames : ['*']) out.push({ name: route.meta.name, namespace: ns, host: h, rules, gateways: [key], configPath });
    }
  }
  return out;
}
