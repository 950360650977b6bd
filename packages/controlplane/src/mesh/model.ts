/**
 * The compact mesh description (README "Mesh files"): services, workloads, routes, L4 policies
 * and the mesh-wide mTLS mode, read once into plain validated records. Every refusal is a
 * ConfigError naming the field path (`workloads[2].services[0]: unknown service "x"`).
 */
import { isIP } from 'node:net';
import { Msg, ConfigError } from '@skua/proxy/core';

import type { Capture, HeaderMatch, HttpRule, Mesh, MeshPolicy, MeshRoute, MeshService, MeshWaypoint, MeshWorkload, MtlsMode, PortProtocol, RouteDestination, RouteMatch, ServicePort } from './types.ts';

export type * from './types.ts';

const PROTOCOLS: readonly PortProtocol[] = ['http', 'http2', 'grpc', 'tcp'];
const DURATION = /^\d+(\.\d+)?s$/;

function port(m: Msg, key: string, fallback?: number): number {
  const n = fallback === undefined ? m.num(key, NaN) : m.num(key, fallback);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw m.error(key, Number.isNaN(n) ? 'is required' : 'must be a port number (1-65535)');
  return n;
}

function ip(m: Msg, key: string): string {
  const v = m.requiredStr(key);
  if (!isIP(v)) throw m.error(key, `${JSON.stringify(v)} is not an IP address`);
  return v;
}

function labels(m: Msg, key: string): Record<string, string> {
  const l = m.msg(key);
  const out: Record<string, string> = {};
  if (l) for (const k of Object.keys(l.raw)) out[k] = String(l.raw[k]);
  return out;
}

function duration(m: Msg, key: string): string | undefined {
  const v = m.str(key);
  if (v === '') return undefined;
  if (!DURATION.test(v)) throw m.error(key, `expected a duration like "1.5s", got ${JSON.stringify(v)}`);
  return v;
}

function requiredDuration(m: Msg, key: string): string {
  const d = duration(m, key);
  if (d === undefined) throw m.error(key, 'is required');
  return d;
}

function percent(m: Msg, key: string): number {
  const p = m.num(key, 100);
  if (p < 0 || p > 100) throw m.error(key, 'must be between 0 and 100');
  return p;
}

function parseService(m: Msg, domain: string): MeshService {
  m.onlyFields(['name', 'namespace', 'vip', 'ports', 'subsets', 'waypoint']);
  const name = m.requiredStr('name');
  const namespace = m.str('namespace', 'default');
  const ports = m.list('ports').map((p): ServicePort => {
    p.onlyFields(['port', 'protocol', 'target_port', 'name']);
    const n = port(p, 'port');
    const protocol = p.str('protocol', 'http') as PortProtocol;
    if (!PROTOCOLS.includes(protocol)) throw p.error('protocol', `unknown protocol ${JSON.stringify(protocol)}; expected one of ${PROTOCOLS.join(', ')}`);
    return { port: n, protocol, targetPort: port(p, 'target_port', n), name: p.str('name', `${protocol}-${n}`) };
  });
  if (ports.length === 0) throw m.error('ports', 'at least one port is required');
  const subsets = new Map<string, Record<string, string>>();
  const sm = m.msg('subsets');
  if (sm) for (const k of Object.keys(sm.raw)) subsets.set(k, labels(sm, k));
  const wp = m.str('waypoint');
  const waypoint = wp === '' ? undefined : wp.includes('/') ? wp : `${namespace}/${wp}`;
  return { name, namespace, hostname: `${name}.${namespace}.svc.${domain}`, vip: ip(m, 'vip'), ports, subsets, waypoint };
}

interface ParsedWaypoint { readonly waypoint: MeshWaypoint; readonly service: MeshService; readonly pod: MeshWorkload }

/** A waypoint and the one pod that runs it (node id waypoint~<ip>~<name>.<ns>~...), with the Service ztunnels find it by. */
function parseWaypoint(m: Msg, domain: string): ParsedWaypoint {
  m.onlyFields(['name', 'namespace', 'vip', 'ip', 'service_account', 'node', 'port']);
  const name = m.requiredStr('name');
  const namespace = m.str('namespace', 'default');
  const port = m.has('port') ? m.num('port', 15008) : 15008;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw m.error('port', 'must be a port number (1-65535)');
  const key = `${namespace}/${name}`;
  const hostname = `${name}.${namespace}.svc.${domain}`;
  const service: MeshService = {
    name, namespace, hostname, vip: ip(m, 'vip'), subsets: new Map(),
    ports: [{ port: 15021, protocol: 'tcp', targetPort: 15021, name: 'status-port' }, { port, protocol: 'tcp', targetPort: port, name: 'mesh' }],
  };
  const pod: MeshWorkload = {
    name, namespace, workloadName: name, serviceAccount: m.str('service_account', name), ip: ip(m, 'ip'), node: m.str('node', ''),
    labels: { 'gateway.networking.k8s.io/gateway-name': name }, services: [hostname], sidecar: false, ambient: false, outboundIp: '', app: new Map(), waypointProxy: key,
  };
  return { waypoint: { key, name, namespace, hostname, port, security: new Map() }, service, pod };
}

function parseWorkload(m: Msg, services: ReadonlyMap<string, MeshService>, capture: Capture): MeshWorkload {
  m.onlyFields(['name', 'namespace', 'workload_name', 'service_account', 'ip', 'node', 'labels', 'services', 'sidecar', 'ambient', 'outbound_ip', 'app', 'terminating']);
  const name = m.requiredStr('name');
  const namespace = m.str('namespace', 'default');
  const hostnames = m.strList('services').map((s, i) => {
    const key = s.includes('/') ? s : `${namespace}/${s}`;
    const svc = services.get(key);
    if (!svc) throw m.error(`services[${i}]`, `unknown service ${JSON.stringify(s)}`);
    return svc.hostname;
  });
  const sidecar = m.bool('sidecar', true);
  const outboundIp = m.has('outbound_ip') ? ip(m, 'outbound_ip') : '';
  if (capture === 'none' && sidecar && outboundIp === '') throw m.error('outbound_ip', 'is required for sidecars when mesh.capture is none (outbound listeners bind there)');
  const app = new Map<number, { address: string; port: number }>();
  const am = m.msg('app');
  if (am) {
    for (const k of Object.keys(am.raw)) {
      const target = Number(k);
      const v = am.str(k);
      const hp = /^(.+):(\d+)$/.exec(v);
      if (!Number.isInteger(target) || !hp || !isIP(hp[1])) throw am.error(k, `expected "<target port>: <ip>:<port>", got ${JSON.stringify(v)}`);
      app.set(target, { address: hp[1], port: Number(hp[2]) });
    }
  }
  return {
    name, namespace, workloadName: m.str('workload_name', name), serviceAccount: m.str('service_account', 'default'), ip: ip(m, 'ip'),
    node: m.str('node', ''), labels: labels(m, 'labels'), services: hostnames, sidecar, ambient: m.bool('ambient'), outboundIp, app,
    terminating: m.bool('terminating'),
  };
}

function parseMatch(m: Msg): RouteMatch {
  m.onlyFields(['uri', 'headers']);
  let path: RouteMatch['path'];
  const u = m.msg('uri');
  if (u) {
    u.onlyFields(['exact', 'prefix', 'regex']);
    const kind = (['exact', 'prefix', 'regex'] as const).find((k) => u.has(k));
    if (!kind) throw m.error('uri', 'one of exact, prefix, regex is required');
    path = { kind, value: u.str(kind) };
  }
  const headers: HeaderMatch[] = [];
  const h = m.msg('headers');
  if (h) {
    for (const name of Object.keys(h.raw)) {
      const hm = h.requiredMsg(name);
      hm.onlyFields(['exact', 'prefix', 'regex', 'present']);
      const kind = (['exact', 'prefix', 'regex', 'present'] as const).find((k) => hm.has(k));
      if (!kind) throw h.error(name, 'one of exact, prefix, regex, present is required');
      headers.push({ name: name.toLowerCase(), kind, value: kind === 'present' ? '' : hm.str(kind) });
    }
  }
  return { path, headers };
}

function parseRule(m: Msg, svc: MeshService, i: number): HttpRule {
  m.onlyFields(['name', 'match', 'route', 'retries', 'timeout', 'fault']);
  const destinations = m.list('route').map((d): RouteDestination => {
    d.onlyFields(['subset', 'weight']);
    const subset = d.str('subset');
    if (subset && !svc.subsets.has(subset)) throw d.error('subset', `unknown subset ${JSON.stringify(subset)} of ${svc.name}`);
    const weight = d.num('weight', 100);
    if (!Number.isInteger(weight) || weight < 0) throw d.error('weight', 'must be a non-negative integer');
    return { subset, weight };
  });
  if (destinations.length === 0) throw m.error('route', 'at least one destination is required');
  if (destinations.every((d) => d.weight === 0)) throw m.error('route', 'the weights add up to 0');
  const r = m.msg('retries');
  r?.onlyFields(['attempts', 'per_try_timeout', 'retry_on']);
  const f = m.msg('fault');
  f?.onlyFields(['delay', 'abort']);
  const delay = f?.msg('delay');
  delay?.onlyFields(['fixed', 'percent']);
  const abort = f?.msg('abort');
  abort?.onlyFields(['http_status', 'percent']);
  return {
    name: m.str('name', i === 0 ? 'default' : `rule-${i}`),
    matches: m.list('match').map(parseMatch),
    destinations,
    retries: r ? { attempts: r.num('attempts', 2), perTryTimeout: duration(r, 'per_try_timeout'), retryOn: r.str('retry_on') || undefined } : undefined,
    timeout: duration(m, 'timeout'),
    fault: f ? {
      delay: delay ? { fixed: requiredDuration(delay, 'fixed'), percent: percent(delay, 'percent') } : undefined,
      abort: abort ? { httpStatus: port(abort, 'http_status'), percent: percent(abort, 'percent') } : undefined,
    } : undefined,
  };
}

function parseRoute(m: Msg, services: ReadonlyMap<string, MeshService>): MeshRoute {
  m.onlyFields(['name', 'namespace', 'host', 'http']);
  const namespace = m.str('namespace', 'default');
  const host = m.requiredStr('host');
  const svc = services.get(host.includes('/') ? host : `${namespace}/${host}`);
  if (!svc) throw m.error('host', `unknown service ${JSON.stringify(host)}`);
  if (svc.ports.every((p) => p.protocol === 'tcp')) throw m.error('host', `${svc.name} has no HTTP port to route`);
  const rules = m.list('http').map((r, i) => parseRule(r, svc, i));
  if (rules.length === 0) throw m.error('http', 'at least one rule is required');
  return { name: m.str('name', svc.name), namespace, host: svc.hostname, rules };
}

function parsePolicy(m: Msg): MeshPolicy {
  m.onlyFields(['name', 'namespace', 'action', 'selector', 'from', 'ports']);
  const action = m.str('action', 'ALLOW');
  if (action !== 'ALLOW' && action !== 'DENY') throw m.error('action', 'must be ALLOW or DENY');
  return {
    name: m.requiredStr('name'), namespace: m.str('namespace', 'default'), action,
    selector: m.has('selector') ? labels(m, 'selector') : undefined,
    from: m.list('from').map((f) => {
      f.onlyFields(['principals', 'namespaces', 'service_accounts']);
      const serviceAccounts = f.strList('service_accounts');
      for (const [i, sa] of serviceAccounts.entries()) if (!/^[^/]+\/[^/]+$/.test(sa)) throw f.error(`service_accounts[${i}]`, 'expected "namespace/name"');
      return { principals: f.strList('principals'), namespaces: f.strList('namespaces'), serviceAccounts };
    }),
    ports: m.rawList('ports').map((v, i) => {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535) throw m.error(`ports[${i}]`, 'must be a port number (1-65535)');
      return v;
    }),
  };
}

/** Reads a parsed mesh document. Throws ConfigError naming the field. */
export function parseMesh(doc: unknown): Mesh {
  const m = new Msg(doc, '');
  m.onlyFields(['mesh', 'services', 'workloads', 'routes', 'policies', 'waypoints']);
  const g = m.msg('mesh') ?? new Msg({}, 'mesh');
  g.onlyFields(['trust_domain', 'domain', 'cluster_id', 'mtls', 'capture']);
  const mtls = g.str('mtls', 'PERMISSIVE') as MtlsMode;
  if (!['PERMISSIVE', 'STRICT', 'DISABLE'].includes(mtls)) throw g.error('mtls', 'must be PERMISSIVE, STRICT or DISABLE');
  const capture = g.str('capture', 'iptables') as Capture;
  if (capture !== 'iptables' && capture !== 'none') throw g.error('capture', 'must be iptables or none');
  const domain = g.str('domain', 'cluster.local');
  const services = new Map<string, MeshService>();
  for (const s of m.list('services')) {
    const svc = parseService(s, domain);
    const key = `${svc.namespace}/${svc.name}`;
    if (services.has(key)) throw s.error('name', `service ${key} is declared twice`);
    services.set(key, svc);
  }
  const waypoints = m.list('waypoints').map((w) => parseWaypoint(w, domain));
  for (const [i, s] of [...services.values()].entries()) {
    if (s.waypoint && !waypoints.some((w) => w.waypoint.key === s.waypoint)) throw new ConfigError(`services[${i}].waypoint`, `unknown waypoint ${JSON.stringify(s.waypoint)}`);
  }
  for (const [i, w] of waypoints.entries()) {
    const key = `${w.service.namespace}/${w.service.name}`;
    if (services.has(key)) throw new ConfigError(`waypoints[${i}].name`, `${key} is also a service`);
    services.set(key, w.service);
  }
  const workloads = [...m.list('workloads').map((w) => parseWorkload(w, services, capture)), ...waypoints.map((w) => w.pod)];
  const seen = new Set<string>();
  for (const [i, w] of workloads.entries()) {
    const key = `${w.namespace}/${w.name}`;
    if (seen.has(key)) throw new ConfigError(`workloads[${i}].name`, `workload ${key} is declared twice`);
    seen.add(key);
  }
  const routes = m.list('routes').map((r) => parseRoute(r, services));
  const hosts = new Set<string>();
  for (const [i, r] of routes.entries()) {
    if (hosts.has(r.host)) throw new ConfigError(`routes[${i}].host`, `${r.host} already has routes`);
    hosts.add(r.host);
  }
  return {
    trustDomain: g.str('trust_domain', 'cluster.local'), domain, clusterId: g.str('cluster_id', 'Kubernetes'), mtls, capture,
    services: [...services.values()], workloads, routes, policies: m.list('policies').map(parsePolicy),
    waypoints: waypoints.map((w) => w.waypoint),
  };
}
