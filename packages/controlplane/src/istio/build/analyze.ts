/**
 * istioctl analyze's reference checks over the whole configuration: destinations and subsets that
 * no DestinationRule defines (IST0101), ports a service does not expose (IST0101 host:port) or
 * leaves ambiguous (IST0112), gateways and selectors that match nothing (IST0101), DestinationRules
 * for unknown hosts (IST0174), policies selecting no workload (IST0127), port names Istio cannot
 * read a protocol from (IST0118).
 */
import type { MeshGateway, MeshService, MeshWorkload } from '../../mesh/types.ts';
import type { Destination, VirtualService } from '../types.ts';
import type { IstioConfig } from '../types-k8s.ts';
import { gatewayKey } from './networking.ts';
import { fqdn, selects, type Registry } from './registry.ts';
import type { Report } from './report.ts';

const PROTOCOL_PREFIXES = ['http', 'http2', 'https', 'grpc', 'grpc-web', 'tcp', 'tls', 'mongo', 'mysql', 'redis', 'udp'];

function checkDestination(vs: VirtualService, d: Destination, field: string, what: 'host' | 'mirror', services: ReadonlyMap<string, MeshService>, registry: Registry, report: Report): void {
  const host = registry.resolve(d.host, vs.meta.namespace);
  if (!host) return; // reported as host not found while building the routes
  const s = services.get(host)!;
  if (d.subset && !s.subsets.has(d.subset)) {
    report.notFound(vs.meta, `${field}.subset`, what === 'host' ? 'host+subset in destinationrule' : 'mirror+subset in destinationrule', `${d.host}+${d.subset}`);
  }
  if (d.port !== undefined && !s.ports.some((p) => p.port === d.port)) report.notFound(vs.meta, `${field}.port`, 'host:port', `${d.host}:${d.port}`);
  if (d.port === undefined && s.ports.length > 1) {
    report.add(vs.meta, 'Error', 'IST0112', field,
      `This VirtualService routes to a service ${JSON.stringify(d.host)} that exposes multiple ports [${s.ports.map((p) => p.port).join(' ')}]. Specifying a port in the destination is required to disambiguate.`);
  }
}

export function analyze(cfg: IstioConfig, services: readonly MeshService[], workloads: readonly MeshWorkload[], gateways: readonly MeshGateway[], registry: Registry, report: Report): void {
  const byHost = new Map(services.map((s) => [s.hostname, s] as const));
  for (const vs of cfg.virtualServices) {
    for (const [i, r] of vs.http.entries()) {
      for (const [j, d] of r.route.entries()) checkDestination(vs, d.destination, `spec.http[${i}].route[${j}].destination`, 'host', byHost, registry, report);
      for (const [j, m] of r.mirrors.entries()) checkDestination(vs, m.destination, `spec.http[${i}].mirror${r.mirrors.length > 1 ? `s[${j}].destination` : ''}`, 'mirror', byHost, registry, report);
    }
    for (const [i, t] of vs.tcp.entries()) for (const [j, d] of t.route.entries()) checkDestination(vs, d.destination, `spec.tcp[${i}].route[${j}].destination`, 'host', byHost, registry, report);
    for (const [i, g] of vs.gateways.entries()) {
      if (g === 'mesh') continue;
      const key = gatewayKey(g, vs.meta.namespace);
      if (!gateways.some((x) => x.key === key)) report.notFound(vs.meta, `spec.gateways[${i}]`, 'gateway', key);
    }
  }
  for (const g of cfg.gateways) {
    const sel = Object.entries(g.selector).map(([k, v]) => `${k}=${v}`).join(',');
    if (!workloads.some((w) => w.router && selects(g.selector, w.labels))) report.notFound(g.meta, 'spec.selector', 'selector', sel);
  }
  for (const dr of cfg.destinationRules) {
    const host = fqdn(dr.host, dr.meta.namespace);
    const known = host.startsWith('*') ? services.some((s) => host === '*' || s.hostname.endsWith(host.slice(1))) : registry.resolve(dr.host, dr.meta.namespace) !== undefined;
    if (!known) report.add(dr.meta, 'Warning', 'IST0174', 'spec.host', `The host ${dr.host} defined in the DestinationRule does not match any services in the mesh.`);
  }
  for (const p of [...cfg.authorizationPolicies, ...cfg.peerAuthentications, ...cfg.requestAuthentications]) {
    if (!p.selector || Object.keys(p.selector).length === 0) continue;
    if (!workloads.some((w) => w.namespace === p.meta.namespace && selects(p.selector!, w.labels))) {
      report.add(p.meta, 'Warning', 'IST0127', 'spec.selector', `No matching workloads for this resource with the following labels: ${Object.entries(p.selector).map(([k, v]) => `${k}=${v}`).join(',')}`);
    }
  }
  for (const s of cfg.services) {
    for (const [i, p] of s.ports.entries()) {
      const name = p.appProtocol ?? p.name ?? '';
      if (!PROTOCOL_PREFIXES.includes(name.toLowerCase().split('-')[0]) && !name.startsWith('kubernetes.io/')) {
        report.add(s.meta, 'Info', 'IST0118', `spec.ports[${i}].name`, `Port name ${p.name ?? ''} (port: ${p.port}, targetPort: ${p.targetPort}) doesn't follow the naming convention of Istio port.`);
      }
    }
  }
}
