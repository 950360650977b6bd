/**
 * The service registry: Kubernetes Services and ServiceEntries become services (FQDN, VIP, ports
 * with Istio's protocol selection), Pods and WorkloadEntries (and a ServiceEntry's inline endpoints)
 * become workloads backing them.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { selects } from '../../mesh/names.ts';
import type { MeshService, MeshWorkload, PortProtocol, ServicePort } from '../../mesh/types.ts';
import type { Labels, Meta, ServiceEntry, WorkloadEntrySpec } from '../types.ts';
import type { IstioConfig, KubeService, KubeServicePort, Pod } from '../types-k8s.ts';
import type { Report } from './report.ts';

export const DOMAIN = 'cluster.local';

export { selects };

/** Istio's protocol selection: appProtocol, else the port name's prefix (`http-web` → http); unnamed ports are sniffed as HTTP. */
export function protocolOf(name: string | undefined, appProtocol?: string): PortProtocol {
  const p = (appProtocol ?? name ?? '').toLowerCase();
  const prefix = p.split('-')[0];
  if (p === 'kubernetes.io/h2c' || prefix === 'http2') return 'http2';
  if (prefix === 'grpc' && p !== 'grpc-web') return 'grpc';
  if (prefix === 'http' || p === 'grpc-web' || p === 'kubernetes.io/ws' || p === 'kubernetes.io/wss') return 'http';
  if (['tcp', 'tls', 'https', 'mongo', 'mysql', 'redis', 'udp'].includes(prefix)) return 'tcp';
  return 'http';
}

/** A stable address for services without one (istiod allocates ServiceEntry VIPs from 240.240.0.0/16). */
function allocator(): (host: string) => string {
  const used = new Set<string>();
  return (host) => {
    let n = createHash('sha256').update(host).digest().readUInt16BE(0);
    for (;;) {
      const ip = `240.240.${(n >> 8) & 255}.${Math.max(1, n & 255)}`;
      if (!used.has(ip)) { used.add(ip); return ip; }
      n = (n + 1) & 0xffff;
    }
  };
}

export interface Registry {
  readonly services: MeshService[];
  readonly workloads: MeshWorkload[];
  /** FQDN → service. */
  readonly byHost: ReadonlyMap<string, MeshService>;
  /** A host as written in `namespace` (short name, FQDN, ServiceEntry host) → FQDN of a known service, or undefined. */
  resolve(host: string, namespace: string): string | undefined;
}

interface Member { readonly workload: MeshWorkload; readonly ports: ReadonlyMap<string, number>; readonly labels: Labels; readonly namespace: string }

function targetPortOf(p: KubeServicePort, pods: readonly Pod[]): number {
  if (typeof p.targetPort === 'number') return p.targetPort;
  for (const pod of pods) for (const cp of pod.ports) if (cp.name === p.targetPort) return cp.containerPort;
  return p.port;
}

/** The Deployment a pod's name came from (`reviews-v1-5d8f9c7b6-x2x9k` → `reviews-v1`), else the pod name. */
function workloadNameOf(pod: string): string {
  return /^(.+)-[a-z0-9]{6,10}-[a-z0-9]{5}$/.exec(pod)?.[1] ?? pod;
}

function podWorkload(pod: Pod): MeshWorkload {
  const app = new Map<number, { address: string; port: number }>();
  for (const p of pod.ports) if (p.hostIP && p.hostPort) app.set(p.containerPort, { address: p.hostIP, port: p.hostPort });
  return {
    name: pod.meta.name, namespace: pod.meta.namespace, workloadName: workloadNameOf(pod.meta.name),
    serviceAccount: pod.serviceAccount, ip: pod.ip, node: pod.nodeName ?? '', labels: { ...pod.meta.labels, ...(pod.sidecar && !pod.router ? { 'security.istio.io/tlsMode': 'istio' } : {}) },
    services: [], sidecar: pod.sidecar && !pod.router, ambient: pod.ambient, outboundIp: pod.outboundIp ?? '', app, router: pod.router,
  };
}

function entryWorkload(meta: Meta, name: string, e: WorkloadEntrySpec): MeshWorkload {
  const sidecar = e.labels['security.istio.io/tlsMode'] === 'istio';
  return {
    name, namespace: meta.namespace, workloadName: name, serviceAccount: e.serviceAccount ?? 'default', ip: e.address, node: '', labels: e.labels,
    services: [], sidecar, ambient: false, outboundIp: '', app: new Map(), weight: e.weight,
  };
}

export function buildRegistry(cfg: IstioConfig, report: Report): Registry {
  const allocate = allocator();
  const services: MeshService[] = [];
  const byHost = new Map<string, MeshService>();
  const workloads: MeshWorkload[] = [];
  const members: Member[] = [];
  const add = (s: MeshService, meta: Meta): void => {
    if (byHost.has(s.hostname)) { report.warn(meta, 'spec.hosts', `host ${s.hostname} is already declared by another Service or ServiceEntry; the first one wins`, 'IST0109'); return; }
    byHost.set(s.hostname, s);
    services.push(s);
  };
  for (const pod of cfg.pods) {
    const w = podWorkload(pod);
    workloads.push(w);
    members.push({ workload: w, labels: pod.meta.labels, namespace: pod.meta.namespace, ports: new Map(pod.ports.filter((p) => p.name).map((p) => [p.name!, p.containerPort])) });
  }
  for (const we of cfg.workloadEntries) {
    const w = entryWorkload(we.meta, we.meta.name, we.spec);
    if (!isIP(w.ip)) { report.error(we.meta, 'spec.address', 'WorkloadEntries need an IP address here'); continue; }
    workloads.push(w);
    members.push({ workload: w, labels: we.spec.labels, namespace: we.meta.namespace, ports: new Map(Object.entries(we.spec.ports)) });
  }
  const backs = new Map<MeshWorkload, Set<string>>();
  const link = (w: MeshWorkload, host: string): void => { let s = backs.get(w); if (!s) { s = new Set(); backs.set(w, s); } s.add(host); };

  for (const svc of cfg.services) addKubeService(svc);
  function addKubeService(svc: KubeService): void {
    const selected = svc.selector ? members.filter((m) => m.namespace === svc.meta.namespace && Object.keys(svc.selector!).length > 0 && selects(svc.selector!, m.labels)) : [];
    const pods = cfg.pods.filter((p) => svc.selector && p.meta.namespace === svc.meta.namespace && selects(svc.selector, p.meta.labels));
    const ports: ServicePort[] = svc.ports.map((p) => ({ port: p.port, protocol: protocolOf(p.name, p.appProtocol), targetPort: targetPortOf(p, pods), name: p.name ?? `port-${p.port}` }));
    const hostname = `${svc.meta.name}.${svc.meta.namespace}.svc.${DOMAIN}`;
    add({ name: svc.meta.name, namespace: svc.meta.namespace, hostname, vip: svc.clusterIP ?? allocate(hostname), ports, subsets: new Map() }, svc.meta);
    for (const m of selected) link(m.workload, hostname);
  }

  for (const se of cfg.serviceEntries) addServiceEntry(se);
  function addServiceEntry(se: ServiceEntry): void {
    const ports: ServicePort[] = se.ports.map((p) => ({ port: p.number, protocol: protocolOf(p.protocol.toLowerCase()), targetPort: p.targetPort ?? p.number, name: p.name }));
    const dns = se.resolution === 'DNS' || se.resolution === 'DNS_ROUND_ROBIN';
    const inline: MeshWorkload[] = [];
    if (se.resolution === 'STATIC') {
      for (const [i, e] of se.endpoints.entries()) {
        if (e.address.startsWith('unix://')) continue;
        const w = entryWorkload(se.meta, `${se.meta.name}-${i}`, e);
        // Inline endpoints listen on their own ports; the app map says where, per target port.
        const app = new Map<number, { address: string; port: number }>();
        for (const p of se.ports) app.set(p.targetPort ?? p.number, { address: e.address, port: e.ports[p.name] ?? p.targetPort ?? p.number });
        const wl = { ...w, app };
        inline.push(wl);
        workloads.push(wl);
      }
    }
    const selected = se.workloadSelector ? members.filter((m) => m.namespace === se.meta.namespace && selects(se.workloadSelector!, m.labels)) : [];
    for (const [i, host] of se.hosts.entries()) {
      const address = se.addresses[i] ?? se.addresses[0];
      const vip = address && !address.includes('/') ? address : address?.endsWith('/32') ? address.slice(0, -3) : allocate(host);
      const dnsEndpoints = dns
        ? (se.endpoints.length ? se.endpoints : [{ address: host, ports: {}, labels: {} } as WorkloadEntrySpec]).map((e) => ({
          host: e.address, ports: new Map(se.ports.map((p) => [p.number, e.ports[p.name] ?? p.targetPort ?? p.number] as const)),
        }))
        : undefined;
      add({
        name: se.meta.name, namespace: se.meta.namespace, hostname: host, vip, ports, subsets: new Map(), dnsEndpoints,
        passthrough: se.resolution === 'NONE' || undefined, external: se.location === 'MESH_EXTERNAL' || undefined, exportTo: se.exportTo.length ? se.exportTo : undefined,
      }, se.meta);
      for (const w of inline) link(w, host);
      for (const m of selected) link(m.workload, host);
    }
  }

  const out = workloads.map((w) => ({ ...w, services: [...(backs.get(w) ?? [])] }));
  const resolve = (host: string, namespace: string): string | undefined => {
    if (byHost.has(host)) return host;
    const parts = host.split('.');
    const candidates = parts.length === 1 ? [`${host}.${namespace}.svc.${DOMAIN}`] : parts.length === 2 ? [`${host}.svc.${DOMAIN}`] : parts.length === 3 && parts[2] === 'svc' ? [`${host}.${DOMAIN}`] : [];
    return candidates.find((c) => byHost.has(c));
  };
  return { services, workloads: out, byHost, resolve };
}

/** A host as written in `namespace` → the FQDN Istio reads it as (short names are namespace-relative). */
export function fqdn(host: string, namespace: string): string {
  if (host.includes('*') || host.includes('.')) return host;
  return `${host}.${namespace}.svc.${DOMAIN}`;
}
