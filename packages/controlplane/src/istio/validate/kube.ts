/**
 * Kubernetes objects: Service, the light Pod form (README "Workloads"), and the mesh ConfigMap
 * (`istio` in the root namespace, `data.mesh` holding MeshConfig YAML).
 */
import { isIP } from 'node:net';
import { parse } from 'yaml';
import { Node, type Findings } from '../reader.ts';
import type { Meta } from '../types.ts';
import type { KubeService, KubeServicePort, MeshConfig, Pod, PodPort } from '../types-k8s.ts';
import { isDns1123Label, labels, port } from './common.ts';

export const DEFAULT_MESH: MeshConfig = { trustDomain: 'cluster.local', rootNamespace: 'istio-system', outboundAllowAny: true, clusterId: 'Kubernetes' };

export function readService(meta: Meta, spec: Node): KubeService {
  spec.known(['selector', 'ports', 'clusterIP', 'clusterIPs', 'type', 'sessionAffinity', 'ipFamilies', 'ipFamilyPolicy', 'externalName', 'internalTrafficPolicy', 'externalTrafficPolicy', 'publishNotReadyAddresses', 'loadBalancerIP', 'externalIPs', 'trafficDistribution'],
    { sessionAffinity: 'use a DestinationRule consistentHash', ipFamilies: 'one address family per service', ipFamilyPolicy: 'one address family per service', internalTrafficPolicy: 'there is one node', externalTrafficPolicy: 'there is one node', publishNotReadyAddresses: 'every declared pod is ready', loadBalancerIP: 'no load balancer here', externalIPs: 'no external IPs here', trafficDistribution: 'there is one zone' });
  const type = spec.oneOf('type', ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'] as const) ?? 'ClusterIP';
  if (type === 'ExternalName') spec.error('type', 'ExternalName services are not supported by skua yet; use a ServiceEntry with resolution DNS');
  let clusterIP = spec.str('clusterIP');
  if (clusterIP === 'None') { spec.notApplied('clusterIP', 'headless services get a virtual IP here like any other'); clusterIP = undefined; }
  else if (clusterIP !== undefined && clusterIP !== '' && !isIP(clusterIP)) spec.invalid('clusterIP', clusterIP, 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)');
  const names = new Set<string>();
  const ports: KubeServicePort[] = [];
  const list = spec.list('ports');
  if (list.length === 0) spec.error('ports', 'Required value');
  for (const p of list) {
    p.known(['name', 'port', 'targetPort', 'protocol', 'appProtocol', 'nodePort'], { nodePort: 'no node ports here' });
    const name = p.str('name');
    if (list.length > 1 && !name) p.error('name', 'Required value');
    if (name !== undefined && names.has(name)) p.error('name', `Duplicate value: ${JSON.stringify(name)}`);
    if (name) names.add(name);
    const number = port(p, 'port');
    if (number === undefined && !p.has('port')) p.error('port', 'Required value');
    const protocol = p.oneOf('protocol', ['TCP', 'UDP', 'SCTP'] as const) ?? 'TCP';
    if (protocol !== 'TCP') p.notApplied('protocol', `${protocol} is not proxied`);
    const rawTarget = p.raw.targetPort;
    let targetPort: number | string = number ?? 0;
    if (typeof rawTarget === 'number') targetPort = port(p, 'targetPort') ?? targetPort;
    else if (typeof rawTarget === 'string') {
      if (/^\d+$/.test(rawTarget)) targetPort = Number(rawTarget);
      else if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(rawTarget) || rawTarget.length > 15) p.invalid('targetPort', rawTarget, 'must be a valid port name or number');
      else targetPort = rawTarget;
    } else if (rawTarget !== undefined) p.invalid('targetPort', rawTarget, 'must be a port number or name');
    if (number !== undefined) ports.push({ name, port: number, targetPort, protocol, appProtocol: p.str('appProtocol') });
  }
  const selector = spec.has('selector') ? labels(spec, 'selector') : undefined;
  return { meta, selector, ports, clusterIP: clusterIP || undefined };
}

const TRUE = ['true', 'True', 'TRUE', '1', 'yes', 'enabled'];

function annotationBool(meta: Meta, key: string, fallback: boolean): boolean {
  const v = meta.annotations[key] ?? meta.labels[key];
  return v === undefined ? fallback : TRUE.includes(v);
}

export function readPod(meta: Meta, spec: Node, status: Node | undefined, f: Findings): Pod {
  spec.known(['serviceAccountName', 'serviceAccount', 'containers', 'nodeName', 'hostname', 'initContainers', 'volumes', 'restartPolicy', 'securityContext'],
    { initContainers: 'containers are not run here', volumes: 'containers are not run here', restartPolicy: 'containers are not run here', securityContext: 'containers are not run here', hostname: 'pods are named by metadata.name' });
  const ports: PodPort[] = [];
  for (const c of spec.list('containers')) {
    c.known(['name', 'image', 'ports', 'env', 'args', 'command', 'resources', 'readinessProbe', 'livenessProbe', 'imagePullPolicy', 'securityContext', 'volumeMounts'],
      { image: 'containers are not run here: start the app yourself', env: 'containers are not run here', args: 'containers are not run here', command: 'containers are not run here', resources: 'containers are not run here', readinessProbe: 'probes are not run', livenessProbe: 'probes are not run', imagePullPolicy: 'containers are not run here', securityContext: 'containers are not run here', volumeMounts: 'containers are not run here' });
    for (const p of c.list('ports')) {
      p.known(['name', 'containerPort', 'hostIP', 'hostPort', 'protocol']);
      const containerPort = port(p, 'containerPort');
      if (containerPort === undefined && !p.has('containerPort')) p.error('containerPort', 'Required value');
      const hostIP = p.str('hostIP');
      if (hostIP !== undefined && !isIP(hostIP)) p.invalid('hostIP', hostIP, 'must be a valid IP address');
      const hostPort = port(p, 'hostPort');
      if ((hostIP === undefined) !== (hostPort === undefined)) p.rule('hostIP and hostPort go together: where the app listens on this machine');
      if (containerPort !== undefined) ports.push({ name: p.str('name'), containerPort, hostIP, hostPort });
    }
  }
  status?.known(['podIP', 'podIPs', 'phase', 'hostIP', 'conditions'], { phase: 'declared pods are running', hostIP: 'there is one node', conditions: 'declared pods are ready' });
  const ip = status?.str('podIP') ?? '';
  if (!status || !status.has('podIP')) f.error('status.podIP', 'Required value: the pod\'s address (a loopback address of its own works: 127.0.20.11)');
  else if (!isIP(ip)) status.invalid('podIP', ip, 'must be a valid IP address');
  const interception = meta.annotations['sidecar.istio.io/interceptionMode'] ?? 'REDIRECT';
  if (interception !== 'REDIRECT' && interception !== 'NONE') f.error('metadata.annotations[sidecar.istio.io/interceptionMode]', `Unsupported value: ${JSON.stringify(interception)}: supported values: "REDIRECT", "NONE"`);
  const outboundIp = meta.annotations['sidecar.skua.io/outboundIP'];
  if (outboundIp !== undefined && !isIP(outboundIp)) f.error('metadata.annotations[sidecar.skua.io/outboundIP]', `Invalid value: ${JSON.stringify(outboundIp)}: must be a valid IP address`);
  const sidecar = annotationBool(meta, 'sidecar.istio.io/inject', true);
  const router = (meta.annotations['inject.istio.io/templates'] ?? '').split(',').includes('gateway') || meta.labels['gateway.networking.k8s.io/gateway-name'] !== undefined;
  if (sidecar && !router && interception === 'NONE' && outboundIp === undefined) {
    f.error('metadata.annotations[sidecar.skua.io/outboundIP]', 'Required value: with interceptionMode NONE the sidecar\'s outbound listeners bind this address');
  }
  const serviceAccount = spec.str('serviceAccountName') ?? spec.str('serviceAccount') ?? 'default';
  if (!isDns1123Label(serviceAccount) && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(serviceAccount)) spec.invalid('serviceAccountName', serviceAccount, 'must be a DNS subdomain');
  return {
    meta, serviceAccount, ip, ports, sidecar, interception: interception === 'NONE' ? 'NONE' : 'REDIRECT', outboundIp,
    ambient: (meta.labels['istio.io/dataplane-mode'] ?? meta.annotations['istio.io/dataplane-mode']) === 'ambient', nodeName: spec.str('nodeName'), router,
  };
}

/** The `istio` ConfigMap's `data.mesh` (MeshConfig as YAML). */
export function readMeshConfig(meta: Meta, data: Node | undefined, f: Findings): MeshConfig {
  const text = data?.str('mesh');
  if (text === undefined) return { ...DEFAULT_MESH, meta };
  let doc: unknown;
  try { doc = parse(text); } catch (err) { f.error('data.mesh', `invalid MeshConfig YAML: ${(err as Error).message}`); return { ...DEFAULT_MESH, meta }; }
  const m = Node.of(doc ?? {}, 'data.mesh', f);
  if (!m) return { ...DEFAULT_MESH, meta };
  m.known(['trustDomain', 'rootNamespace', 'outboundTrafficPolicy', 'defaultConfig', 'enableAutoMtls', 'accessLogFile', 'trustDomainAliases', 'meshMTLS', 'defaultProviders', 'extensionProviders'],
    { defaultConfig: 'proxies take their ProxyConfig from pilot-agent\'s environment', accessLogFile: 'access logs are set on the proxies', trustDomainAliases: 'one trust domain', meshMTLS: 'TLS versions use skua-proxy defaults', defaultProviders: 'telemetry providers are not configured here', extensionProviders: 'extension providers are not configured here' });
  if (m.bool('enableAutoMtls') === false) m.error('enableAutoMtls', 'auto mTLS is always on here');
  const otp = m.obj('outboundTrafficPolicy');
  otp?.known(['mode']);
  const mode = otp?.oneOf('mode', ['ALLOW_ANY', 'REGISTRY_ONLY'] as const) ?? 'ALLOW_ANY';
  const rootNamespace = m.str('rootNamespace') ?? DEFAULT_MESH.rootNamespace;
  return { meta, trustDomain: m.str('trustDomain') ?? DEFAULT_MESH.trustDomain, rootNamespace, outboundAllowAny: mode === 'ALLOW_ANY', clusterId: DEFAULT_MESH.clusterId };
}
