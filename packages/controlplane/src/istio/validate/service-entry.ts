/** ServiceEntry, WorkloadEntry, Sidecar and (Istio) Gateway: the CRD's and istiod's rules. */
import { isIP } from 'node:net';
import type { Node } from '../reader.ts';
import type { GatewayServer, IstioGateway, Meta, ServiceEntry, ServicePortSpec, ServerTls, Sidecar, WorkloadEntry, WorkloadEntrySpec } from '../types.ts';
import { cidrProblem, exportTo, hostProblem, labels, port } from './common.ts';

export const PROTOCOLS = ['HTTP', 'HTTPS', 'GRPC', 'GRPC-WEB', 'HTTP2', 'MONGO', 'MYSQL', 'REDIS', 'TCP', 'TLS', 'UDP', 'HBONE'];
const PORT_NAME = /^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$/;

/** Istio port protocol: a known name, case-insensitive. */
export function checkProtocol(n: Node, key: string, protocol: string): void {
  if (!PROTOCOLS.includes(protocol.toUpperCase())) n.error(key, `unsupported protocol: ${protocol}`);
}

function workloadEntrySpec(n: Node, fqdnAllowed: boolean, portNames?: ReadonlySet<string>): WorkloadEntrySpec | undefined {
  n.known(['address', 'ports', 'labels', 'network', 'locality', 'weight', 'serviceAccount'],
    { network: 'there is one network on this machine', locality: 'there is one locality on this machine' });
  if (!n.has('address') && !n.has('network')) n.rule('Address is required');
  const address = n.str('address') ?? '';
  const ports: Record<string, number> = {};
  const pm = n.obj('ports');
  if (pm) {
    for (const [name, v] of Object.entries(pm.raw)) {
      if (!PORT_NAME.test(name) || name.length >= 63) pm.rule('port name must be valid');
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535) pm.invalid(name, v, 'port must be between 1-65535');
      else ports[name] = v;
      if (portNames && !portNames.has(name)) pm.error(name, `endpoint port ${name} is not defined by the service entry`);
    }
  }
  if (address.startsWith('unix://')) {
    n.notApplied('address', 'unix domain socket endpoints are not supported by skua yet');
  } else if (address !== '' && !isIP(address)) {
    if (!fqdnAllowed) n.error('address', `endpoint address ${JSON.stringify(address)} is not a valid IP address`);
    else if (hostProblem(address)) n.error('address', `endpoint address ${JSON.stringify(address)} is not a valid FQDN or an IP address`);
  }
  const weight = n.int('weight', 0);
  return { address, ports, labels: labels(n, 'labels', 'labels'), serviceAccount: n.str('serviceAccount'), network: n.str('network'), locality: n.str('locality'), weight };
}

export function readWorkloadEntry(meta: Meta, spec: Node): WorkloadEntry {
  return { meta, spec: workloadEntrySpec(spec, true) ?? { address: '', ports: {}, labels: {} } };
}

export function readServiceEntry(meta: Meta, spec: Node): ServiceEntry {
  spec.known(['hosts', 'addresses', 'ports', 'location', 'resolution', 'endpoints', 'workloadSelector', 'exportTo', 'subjectAltNames'],
    { subjectAltNames: 'peer SANs come from the backing service accounts' });
  const hosts = spec.strList('hosts');
  if (hosts.length === 0) spec.error('hosts', 'service entry must have at least one host');
  for (const h of hosts) {
    if (h === '*') spec.error('hosts', 'hostname cannot be wildcard');
    else if (hostProblem(h)) spec.error('hosts', `invalid host ${h}`);
  }
  const resolution = spec.oneOf('resolution', ['NONE', 'STATIC', 'DNS', 'DNS_ROUND_ROBIN', 'DYNAMIC_DNS'] as const) ?? 'NONE';
  if (resolution === 'DYNAMIC_DNS') spec.error('resolution', 'DYNAMIC_DNS is not supported by skua yet');
  const location = spec.oneOf('location', ['MESH_EXTERNAL', 'MESH_INTERNAL'] as const) ?? 'MESH_EXTERNAL';
  const addresses = spec.strList('addresses');
  for (const a of addresses) {
    const p = cidrProblem(a);
    if (p) spec.error('addresses', p);
    else if (a.includes('/') && resolution !== 'NONE' && resolution !== 'STATIC') spec.rule('CIDR addresses are allowed only for NONE/STATIC resolution types');
  }
  const names = new Set<string>(), numbers = new Set<number>();
  const ports: ServicePortSpec[] = [];
  for (const p of spec.list('ports')) {
    p.known(['number', 'name', 'protocol', 'targetPort']);
    const number = port(p, 'number'), name = p.reqStr('name') ?? '', protocol = p.str('protocol') ?? '';
    if (protocol) checkProtocol(p, 'protocol', protocol);
    if (names.has(name)) p.error('name', `service entry port name ${JSON.stringify(name)} already defined`);
    if (number !== undefined && numbers.has(number)) spec.rule('port number cannot be duplicated');
    names.add(name);
    if (number !== undefined) numbers.add(number);
    if (number !== undefined) ports.push({ number, name, protocol: protocol.toUpperCase() || 'TCP', targetPort: port(p, 'targetPort') });
  }
  if (spec.has('workloadSelector') && spec.has('endpoints')) spec.rule('only one of WorkloadSelector or Endpoints can be set');
  const endpoints: WorkloadEntrySpec[] = [];
  for (const e of spec.list('endpoints')) { const w = workloadEntrySpec(e, resolution === 'DNS' || resolution === 'DNS_ROUND_ROBIN', names); if (w) endpoints.push(w); }
  if (resolution === 'NONE' && endpoints.length) spec.error('endpoints', 'no endpoints should be provided for resolution type none');
  if (resolution === 'DNS_ROUND_ROBIN' && endpoints.length > 1) spec.rule('DNS_ROUND_ROBIN mode cannot have multiple endpoints');
  if (resolution === 'STATIC' && !spec.has('workloadSelector')) for (const e of endpoints) if (e.address && !e.address.startsWith('unix://') && !isIP(e.address)) spec.error('endpoints', `endpoint address ${JSON.stringify(e.address)} is not a valid IP address`);
  if ((resolution === 'DNS' || resolution === 'DNS_ROUND_ROBIN') && endpoints.length === 0) {
    for (const h of hosts) if (h.startsWith('*')) spec.error('hosts', `hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode ${resolution}`);
  }
  const ws = spec.obj('workloadSelector');
  ws?.known(['labels']);
  return {
    meta, hosts, addresses, ports, location, resolution, endpoints, workloadSelector: ws ? labels(ws, 'labels') : undefined, exportTo: exportTo(spec),
  };
}

export function readSidecar(meta: Meta, spec: Node): Sidecar {
  spec.known(['workloadSelector', 'ingress', 'egress', 'outboundTrafficPolicy', 'inboundConnectionPool'],
    { ingress: 'inbound listeners come from the services a workload backs', inboundConnectionPool: 'inbound pools use skua-proxy defaults' });
  const ws = spec.obj('workloadSelector');
  ws?.known(['labels']);
  if (!spec.has('ingress') && !spec.has('egress') && !spec.has('outboundTrafficPolicy') && !spec.has('inboundConnectionPool')) spec.rule('sidecar: empty configuration provided');
  const egressHosts: string[] = [];
  const egress = spec.list('egress');
  for (const [i, e] of egress.entries()) {
    e.known(['port', 'bind', 'captureMode', 'hosts'], { bind: 'egress listeners bind the sidecar\'s outbound address', captureMode: 'capture follows the pod\'s interception mode' });
    if (e.has('port')) e.notApplied('port', 'egress listeners per port are not built; the hosts apply to every port');
    else if (i !== egress.length - 1) e.error('port', 'sidecar: the egress listener with empty port should be the last listener in the list');
    const hosts = e.strList('hosts');
    if (hosts.length === 0) e.error('hosts', 'sidecar: egress listener must contain at least one host');
    for (const h of hosts) {
      const parts = h.split('/');
      if (parts.length !== 2 || parts[0] === '' || parts[1] === '') e.error('hosts', `host must be of form namespace/dnsName, got ${JSON.stringify(h)}`);
      else if (parts[1] !== '*' && hostProblem(parts[1])) e.error('hosts', hostProblem(parts[1])!);
      egressHosts.push(h);
    }
  }
  const otp = spec.obj('outboundTrafficPolicy');
  otp?.known(['mode', 'egressProxy'], { egressProxy: 'egress proxies are not translated' });
  return { meta, workloadSelector: ws ? labels(ws, 'labels') : undefined, egressHosts, outboundTrafficPolicy: otp?.oneOf('mode', ['REGISTRY_ONLY', 'ALLOW_ANY'] as const) };
}

function serverTls(n: Node | undefined, protocol: string): ServerTls | undefined {
  if (!n) return undefined;
  n.known(['httpsRedirect', 'mode', 'serverCertificate', 'privateKey', 'caCertificates', 'credentialName', 'credentialNames', 'tlsCertificates', 'subjectAltNames', 'verifyCertificateSpki', 'verifyCertificateHash', 'minProtocolVersion', 'maxProtocolVersion', 'cipherSuites', 'caCrl', 'ecdhCurves', 'insecureSkipVerify', 'caCertCredentialName'],
    { minProtocolVersion: 'TLS versions use skua-proxy defaults', maxProtocolVersion: 'TLS versions use skua-proxy defaults', cipherSuites: 'cipher suites use skua-proxy defaults', ecdhCurves: 'curves use skua-proxy defaults' });
  const mode = n.oneOf('mode', ['PASSTHROUGH', 'SIMPLE', 'MUTUAL', 'AUTO_PASSTHROUGH', 'ISTIO_MUTUAL', 'OPTIONAL_MUTUAL'] as const) ?? 'PASSTHROUGH';
  const httpsRedirect = n.bool('httpsRedirect') ?? false;
  if (httpsRedirect && protocol !== 'HTTP') n.warn('httpsRedirect', 'tls.httpsRedirect should only be used with http servers');
  if ((mode === 'SIMPLE' || mode === 'MUTUAL') && !httpsRedirect) {
    if (n.has('credentialName') || n.has('credentialNames') || n.has('tlsCertificates')) n.error('credentialName', 'credentials from Kubernetes secrets are not supported by skua; give serverCertificate and privateKey file paths');
    else {
      if (!n.has('serverCertificate')) n.error('serverCertificate', `${mode} TLS requires a server certificate`);
      if (!n.has('privateKey')) n.error('privateKey', `${mode} TLS requires a private key`);
    }
    if (mode === 'MUTUAL' && !n.has('caCertificates')) n.error('caCertificates', 'MUTUAL TLS requires a client CA bundle');
  }
  if (mode === 'ISTIO_MUTUAL') for (const k of ['serverCertificate', 'privateKey', 'caCertificates', 'credentialName']) if (n.has(k)) n.error(k, `ISTIO_MUTUAL TLS cannot have associated ${k}`);
  if (['PASSTHROUGH', 'AUTO_PASSTHROUGH', 'OPTIONAL_MUTUAL'].includes(mode)) n.error('mode', `${mode} gateway servers are not supported by skua yet`);
  return { mode, httpsRedirect, serverCertificate: n.str('serverCertificate'), privateKey: n.str('privateKey'), caCertificates: n.str('caCertificates'), credentialName: n.str('credentialName') };
}

export function readIstioGateway(meta: Meta, spec: Node): IstioGateway {
  spec.known(['servers', 'selector']);
  const servers: GatewayServer[] = [];
  const portNames = new Set<string>();
  const list = spec.list('servers');
  if (list.length === 0) spec.error('servers', 'gateway must have at least one server');
  for (const s of list) {
    s.known(['port', 'bind', 'hosts', 'tls', 'defaultEndpoint', 'name'], { bind: 'gateway listeners bind the gateway pod\'s address', defaultEndpoint: 'not applied to gateways' });
    const p = s.reqObj('port');
    let number: number | undefined, name = '', protocol = '';
    if (p) {
      p.known(['number', 'protocol', 'name', 'targetPort']);
      number = port(p, 'number');
      protocol = (p.reqStr('protocol') ?? '').toUpperCase();
      name = p.str('name') ?? '';
      if (!p.has('name')) p.error('name', 'port name must be set');
      if (p.has('targetPort')) p.warn('targetPort', 'targetPort has no impact on Gateways');
      if (protocol && !['HTTP', 'HTTPS', 'GRPC', 'GRPC-WEB', 'HTTP2', 'MONGO', 'REDIS', 'MYSQL', 'TCP', 'TLS'].includes(protocol)) {
        p.error('protocol', `invalid protocol ${JSON.stringify(protocol)}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP`);
      }
      if (name && portNames.has(name)) p.error('name', `port names in servers must be unique: duplicate name ${name}`);
      portNames.add(name);
    }
    const hosts = s.strList('hosts');
    if (hosts.length === 0) s.error('hosts', 'server config must contain at least one host');
    for (const h of hosts) {
      const [ns, host] = h.includes('/') ? h.split('/', 2) : ['', h];
      if (ns !== '' && ns !== '*' && ns !== '.' && ns !== '~' && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns)) s.error('hosts', `invalid namespace value ${JSON.stringify(ns)} in host ${h}`);
      const hp = hostProblem(host);
      if (hp) s.error('hosts', hp);
    }
    const tlsNode = s.obj('tls');
    const tls = serverTls(tlsNode, protocol);
    if ((protocol === 'HTTPS' || protocol === 'TLS') && !tls) s.error('tls', 'server must have TLS settings for HTTPS/TLS protocols');
    if (tls && protocol !== 'HTTPS' && protocol !== 'TLS' && !(protocol === 'HTTP' && tls.httpsRedirect)) s.error('tls', 'server cannot have TLS settings for plain text HTTP ports');
    if (protocol === 'TCP' || protocol === 'TLS' || ['MONGO', 'REDIS', 'MYSQL'].includes(protocol)) s.error('port', `${protocol} gateway servers are not supported by skua yet (HTTP, HTTPS, HTTP2, GRPC are)`);
    if (number !== undefined) servers.push({ port: { number, name, protocol }, hosts, tls, name: s.str('name') });
  }
  const selector = labels(spec, 'selector');
  return { meta, selector, servers };
}
