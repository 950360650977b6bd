/**
 * DestinationRules onto services (subsets, traffic policies) and VirtualServices into routes, the
 * way istiod reads them: short hosts are relative to the resource's namespace, a service takes the
 * DestinationRule of its own namespace first, then the root namespace's, exact hosts before wildcards.
 */
import type { HeaderMatch, HttpRule, MeshRoute, MeshService, RouteDestination, RouteMatch, TcpRule } from '../../mesh/types.ts';
import { protoDuration } from '../reader.ts';
import type { Destination, DestinationRule, HttpMatch, HttpRoute, StringMatch, TrafficPolicy, VirtualService } from '../types.ts';
import type { MeshConfig } from '../types-k8s.ts';
import { fqdn, type Registry } from './registry.ts';
import type { Report } from './report.ts';

function hostMatches(pattern: string, host: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1));
  return pattern === host;
}

function visible(exportTo: readonly string[], from: string, to: string): boolean {
  if (exportTo.length === 0 || exportTo.includes('*')) return true;
  return exportTo.includes(to) || (exportTo.includes('.') && from === to);
}

/** Services with their DestinationRule applied (subsets, policies); the DR each took. */
export function applyDestinationRules(services: readonly MeshService[], rules: readonly DestinationRule[], mesh: MeshConfig): MeshService[] {
  return services.map((s) => {
    const candidates = rules.filter((r) => hostMatches(fqdn(r.host, r.meta.namespace), s.hostname) && visible(r.exportTo, r.meta.namespace, s.namespace));
    const rank = (r: DestinationRule): number => (fqdn(r.host, r.meta.namespace) === s.hostname ? 0 : 3)
      + (r.meta.namespace === s.namespace ? 0 : r.meta.namespace === mesh.rootNamespace ? 1 : 2);
    const dr = candidates.sort((a, b) => rank(a) - rank(b))[0];
    if (!dr) return s;
    const subsets = new Map(dr.subsets.map((x) => [x.name, x.labels] as const));
    const subsetPolicies = new Map<string, TrafficPolicy>();
    for (const x of dr.subsets) if (x.trafficPolicy) subsetPolicies.set(x.name, x.trafficPolicy);
    return { ...s, subsets, subsetPolicies, trafficPolicy: dr.trafficPolicy, destinationRule: { name: dr.meta.name, namespace: dr.meta.namespace } };
  });
}

function stringToHeader(name: string, m: StringMatch | undefined, invert = false): HeaderMatch {
  return m ? { name, kind: m.kind, value: m.value, invert: invert || undefined } : { name, kind: 'present', value: '', invert: invert || undefined };
}

function routeMatch(m: HttpMatch, namespace: string): RouteMatch {
  const headers: HeaderMatch[] = [];
  if (m.method) headers.push(stringToHeader(':method', m.method));
  if (m.authority) headers.push(stringToHeader(':authority', m.authority));
  if (m.scheme) headers.push(stringToHeader(':scheme', m.scheme));
  for (const [name, v] of m.headers) headers.push(stringToHeader(name, v));
  for (const [name, v] of m.withoutHeaders) headers.push(stringToHeader(name, v, true));
  return {
    path: m.uri, ignoreCase: m.ignoreUriCase || undefined, headers, queryParams: m.queryParams.map(([n, v]) => stringToHeader(n, v)),
    port: m.port, sourceLabels: m.sourceLabels, sourceNamespace: m.sourceNamespace, gateways: m.gateways.length ? m.gateways.map((g) => gatewayKey(g, namespace)) : undefined,
  };
}

/** `mesh`, `name` (the resource's namespace) or `namespace/name`. */
export function gatewayKey(name: string, namespace: string): string {
  return name === 'mesh' || name.includes('/') ? name : `${namespace}/${name}`;
}

function resolveDestination(d: Destination, vs: VirtualService, registry: Registry, report: Report, field: string): string {
  const host = registry.resolve(d.host, vs.meta.namespace);
  if (host) return host;
  report.notFound(vs.meta, field, 'host', d.host);
  return fqdn(d.host, vs.meta.namespace);
}

function weights<T extends { weight?: number }>(list: readonly T[]): number[] {
  if (list.length === 1) return [list[0].weight ?? 100];
  if (list.every((d) => d.weight === undefined)) return list.map(() => 1);
  return list.map((d) => d.weight ?? 0);
}

function httpRule(r: HttpRoute, i: number, vs: VirtualService, registry: Registry, report: Report): HttpRule {
  const w = weights(r.route);
  const destinations: RouteDestination[] = r.route.map((d, j) => ({
    host: resolveDestination(d.destination, vs, registry, report, `spec.http[${i}].route[${j}].destination.host`),
    subset: d.destination.subset ?? '', port: d.destination.port, weight: w[j], headers: d.headers,
  }));
  const ms = (x: number | undefined): string | undefined => (x === undefined ? undefined : protoDuration(x));
  return {
    name: r.name ?? '', matches: r.match.map((m) => routeMatch(m, vs.meta.namespace)), destinations,
    retries: r.retries ? { attempts: r.retries.attempts, perTryTimeout: ms(r.retries.perTryTimeoutMs), retryOn: r.retries.retryOn } : undefined,
    timeout: ms(r.timeoutMs),
    fault: r.fault ? {
      delay: r.fault.delay ? { fixed: protoDuration(r.fault.delay.fixedMs), percent: r.fault.delay.percent } : undefined,
      abort: r.fault.abort,
    } : undefined,
    redirect: r.redirect ? { uri: r.redirect.uri, authority: r.redirect.authority, port: r.redirect.port, scheme: r.redirect.scheme, code: r.redirect.redirectCode } : undefined,
    directResponse: r.directResponse, rewrite: r.rewrite,
    mirrors: r.mirrors.map((m, j) => ({
      host: resolveDestination(m.destination, vs, registry, report, `spec.http[${i}].mirror${r.mirrors.length > 1 ? `s[${j}].destination` : ''}.host`),
      subset: m.destination.subset, port: m.destination.port, percent: m.percent,
    })),
    cors: r.corsPolicy, headers: r.headers,
  };
}

function tcpRules(vs: VirtualService, registry: Registry, report: Report): TcpRule[] {
  const out: TcpRule[] = [];
  for (const [i, t] of vs.tcp.entries()) {
    const w = weights(t.route);
    const destinations = t.route.map((d, j) => ({
      host: resolveDestination(d.destination, vs, registry, report, `spec.tcp[${i}].route[${j}].destination.host`), subset: d.destination.subset ?? '', port: d.destination.port, weight: w[j],
    }));
    const matches = t.match.length ? t.match : [{ port: undefined, sourceLabels: undefined, gateways: [] }];
    for (const m of matches) out.push({ port: m.port, sourceLabels: m.sourceLabels, destinations });
  }
  return out;
}

/** One MeshRoute per VirtualService host; the first VirtualService for a host on a gateway wins (istiod keeps the oldest). */
export function virtualServiceRoutes(list: readonly VirtualService[], registry: Registry, report: Report): MeshRoute[] {
  const out: MeshRoute[] = [];
  const taken = new Map<string, VirtualService>();
  for (const vs of list) {
    const gateways = (vs.gateways.length ? vs.gateways : ['mesh']).map((g) => gatewayKey(g, vs.meta.namespace));
    const rules = vs.http.map((r, i) => httpRule(r, i, vs, registry, report));
    const tcp = tcpRules(vs, registry, report);
    for (const h of vs.hosts) {
      const host = gateways.includes('mesh') ? registry.resolve(h, vs.meta.namespace) ?? fqdn(h, vs.meta.namespace) : fqdn(h, vs.meta.namespace);
      for (const g of gateways) {
        const prev = taken.get(`${g} ${host}`);
        if (prev) {
          report.add(vs.meta, 'Error', g === 'mesh' ? 'IST0109' : 'SKUA0002', 'spec.hosts',
            `The VirtualServices ${prev.meta.namespace}/${prev.meta.name},${vs.meta.namespace}/${vs.meta.name} associated with ${g === 'mesh' ? 'mesh' : `gateway ${g}`} define the same host ${host} which can lead to undefined behavior; ${prev.meta.name} is used`);
        }
      }
      const free = gateways.filter((g) => !taken.has(`${g} ${host}`));
      for (const g of free) taken.set(`${g} ${host}`, vs);
      if (free.length === 0) continue;
      out.push({
        name: vs.meta.name, namespace: vs.meta.namespace, host, rules, tcp: tcp.length ? tcp : undefined, gateways: free,
        configPath: `/apis/networking.istio.io/v1/namespaces/${vs.meta.namespace}/virtual-service/${vs.meta.name}`, exportTo: vs.exportTo.length ? vs.exportTo : undefined,
      });
    }
  }
  return out;
}
