/**
 * LOCAL_XDS_PATH / LOCAL_XDS: ztunnel's local config file (YAML), used instead of (or besides) a
 * control plane: `workloads`, `services`, `policies` in ztunnel's own JSON shapes (camelCase,
 * addresses as `network/ip`, ports as maps, policy rules as nested lists, string matches as
 * `{Exact: ...}` or, as serde_yaml writes enum variants and istio/ztunnel requires, `!Exact ...`). Unknown fields are refused with their path, as ztunnel's deny_unknown_fields.
 */
import { parse } from 'yaml';
import { canonicalIpText, ConfigError, type IstioStringMatch } from '../core.ts';
import {
  workloadIdentity, type Authorization, type AuthorizationMatch, type GatewayAddress, type LoadBalancer, type LoadBalancerScope,
  type NetworkAddress, type NetworkCidr, type Service, type Workload,
} from './model.ts';
import { Reader } from './reader.ts';

export interface LocalConfig {
  readonly workloads: Workload[];
  readonly services: Service[];
  readonly policies: Authorization[];
}

/** `network/ip` (or a bare ip) → NetworkAddress. */
export function parseNetworkAddress(text: unknown, path: string): NetworkAddress {
  if (typeof text !== 'string') throw new ConfigError(path, 'must be a string network/ip');
  const slash = text.indexOf('/');
  const network = slash < 0 ? '' : text.slice(0, slash);
  const ip = canonicalIpText(slash < 0 ? text : text.slice(slash + 1));
  if (ip === undefined) throw new ConfigError(path, `not a network/ip address: ${JSON.stringify(text)}`);
  return { network, address: ip };
}

function portMap(r: Reader | undefined): Map<number, number> {
  const out = new Map<number, number>();
  if (!r) return out;
  for (const k of Object.keys(r.raw)) {
    if (!/^\d+$/.test(k) || Number(k) > 65535) throw r.error(k, 'a port number is expected');
    out.set(Number(k), r.port(k));
  }
  return out;
}

function gateway(r: Reader): GatewayAddress {
  r.only(['destination', 'hboneMtlsPort', 'port']);
  const port = r.has('hboneMtlsPort') ? r.port('hboneMtlsPort') : r.port('port');
  const d = r.raw.destination;
  if (typeof d === 'string') return { destination: { kind: 'address', address: parseNetworkAddress(d, r.at('destination')) }, hboneMtlsPort: port };
  const h = r.msg('destination');
  if (!h) throw r.error('destination', 'is required');
  h.only(['namespace', 'hostname']);
  return { destination: { kind: 'hostname', host: { namespace: h.str('namespace'), hostname: h.str('hostname') } }, hboneMtlsPort: port };
}

const WORKLOAD_FIELDS = ['workloadIps', 'waypoint', 'networkGateway', 'protocol', 'networkMode', 'uid', 'name', 'namespace', 'trustDomain',
  'serviceAccount', 'network', 'workloadName', 'workloadType', 'canonicalName', 'canonicalRevision', 'hostname', 'node', 'nativeTunnel',
  'applicationTunnel', 'authorizationPolicies', 'status', 'clusterId', 'locality', 'services', 'capacity'];

function workload(r: Reader): Workload {
  r.only(WORKLOAD_FIELDS);
  const namespace = r.str('namespace');
  if (!r.has('namespace')) throw r.error('namespace', 'is required');
  const trustDomain = r.str('trustDomain') || 'cluster.local';
  const serviceAccount = r.str('serviceAccount') || 'default';
  const services = new Map<string, Map<number, number>>();
  const sm = r.msg('services');
  if (sm) for (const key of Object.keys(sm.raw)) {
    if (!key.includes('/')) throw sm.error(key, 'a service key is namespace/hostname');
    services.set(key, portMap(sm.msg(key)));
  }
  const at = r.msg('applicationTunnel')?.only(['protocol', 'port']);
  const loc = r.msg('locality')?.only(['region', 'zone', 'subzone']);
  return {
    uid: r.str('uid'), name: r.str('name'), namespace,
    workloadIps: r.list('workloadIps').map((ip, i) => {
      const c = typeof ip === 'string' ? canonicalIpText(ip) : undefined;
      if (c === undefined) throw new ConfigError(`${r.at('workloadIps')}[${i}]`, `not an IP address: ${JSON.stringify(ip)}`);
      return c;
    }),
    waypoint: r.has('waypoint') ? gateway(r.msg('waypoint') as Reader) : undefined,
    networkGateway: r.has('networkGateway') ? gateway(r.msg('networkGateway') as Reader) : undefined,
    protocol: r.oneOf('protocol', ['TCP', 'HBONE']),
    networkMode: r.oneOf('networkMode', ['Standard', 'HostNetwork']),
    trustDomain, serviceAccount, network: r.str('network'), workloadName: r.str('workloadName'),
    workloadType: r.oneOf('workloadType', ['deployment', 'cronjob', 'pod', 'job']),
    canonicalName: r.str('canonicalName'), canonicalRevision: r.str('canonicalRevision'), hostname: r.str('hostname'),
    node: r.str('node'), nativeTunnel: r.bool('nativeTunnel'),
    applicationTunnel: at ? { protocol: at.oneOf('protocol', ['NONE', 'PROXY']), port: at.has('port') ? at.port('port') : undefined } : undefined,
    authorizationPolicies: r.strs('authorizationPolicies'),
    status: r.oneOf('status', ['Healthy', 'Unhealthy']),
    clusterId: r.str('clusterId') || 'Kubernetes',
    locality: { region: loc?.str('region') ?? '', zone: loc?.str('zone') ?? '', subzone: loc?.str('subzone') ?? '' },
    services, capacity: r.int('capacity', 1),
    identity: workloadIdentity(trustDomain, namespace, serviceAccount),
  };
}

const SERVICE_FIELDS = ['name', 'namespace', 'hostname', 'vips', 'cidrVips', 'ports', 'endpoints', 'subjectAltNames', 'waypoint',
  'weightedWaypoints', 'loadBalancer', 'ipFamilies', 'canonical', 'visibility'];
const SCOPES: readonly LoadBalancerScope[] = ['Region', 'Zone', 'Subzone', 'Node', 'Cluster', 'Network'];

function loadBalancer(r: Reader): LoadBalancer {
  r.only(['routingPreferences', 'mode', 'healthPolicy']);
  return {
    routingPreferences: r.list('routingPreferences').map((v, i) => {
      if (!SCOPES.includes(v as LoadBalancerScope)) throw new ConfigError(`${r.at('routingPreferences')}[${i}]`, `must be one of ${SCOPES.join(', ')}`);
      return v as LoadBalancerScope;
    }),
    mode: r.oneOf('mode', ['Standard', 'Strict', 'Failover', 'Passthrough']),
    healthPolicy: r.oneOf('healthPolicy', ['OnlyHealthy', 'AllowAll']),
  };
}

function service(r: Reader): Service {
  r.only(SERVICE_FIELDS);
  if (r.has('endpoints')) throw r.error('endpoints', 'is not supported: list the service under each workload\'s services');
  const lb = r.msg('loadBalancer');
  return {
    name: r.str('name'), namespace: r.str('namespace'), hostname: r.str('hostname'),
    vips: r.list('vips').map((v, i) => parseNetworkAddress(v, `${r.at('vips')}[${i}]`)),
    cidrVips: r.list('cidrVips').map((v, i): NetworkCidr => {
      const path = `${r.at('cidrVips')}[${i}]`;
      const text = typeof v === 'string' ? v : '';
      const cut = text.lastIndexOf('/');
      const len = Number(text.slice(cut + 1));
      const na = parseNetworkAddress(text.slice(0, cut), path);
      if (cut < 0 || !Number.isInteger(len) || len < 0 || len > (na.address.includes(':') ? 128 : 32)) throw new ConfigError(path, 'must be network/ip/length');
      return { network: na.network, address: na.address, length: len };
    }),
    ports: portMap(r.msg('ports')), subjectAltNames: r.strs('subjectAltNames'),
    waypoint: r.has('waypoint') ? gateway(r.msg('waypoint') as Reader) : undefined,
    weightedWaypoints: r.msgs('weightedWaypoints').map((w) => {
      w.only(['destination', 'weight']);
      return { destination: gateway(w.msg('destination') ?? (() => { throw w.error('destination', 'is required'); })()), weight: w.int('weight') };
    }),
    loadBalancer: lb ? loadBalancer(lb) : undefined,
    ipFamilies: r.has('ipFamilies') ? r.oneOf<'Dual' | 'IPv4' | 'IPv6'>('ipFamilies', ['Dual', 'IPv4', 'IPv6']) : undefined,
    canonical: r.bool('canonical'),
    visibility: r.oneOf('visibility', ['Public', 'Namespace']),
  };
}

function stringMatches(r: Reader, key: string): IstioStringMatch[] {
  return r.list(key).map((v, i) => {
    const path = `${r.at(key)}[${i}]`;
    if (v === 'Presence') return { presence: true };
    const m = new Reader(v, path).only(['Exact', 'Prefix', 'Suffix', 'Presence']);
    if (m.has('Exact')) return { exact: m.str('Exact') };
    if (m.has('Prefix')) return { prefix: m.str('Prefix') };
    if (m.has('Suffix')) return { suffix: m.str('Suffix') };
    if ('Presence' in m.raw) return { presence: true };
    throw new ConfigError(path, 'one of Exact, Prefix, Suffix, Presence is required');
  });
}

function cidrs(r: Reader, key: string): string[] {
  return r.list(key).map((v, i) => {
    const path = `${r.at(key)}[${i}]`;
    if (typeof v !== 'string') throw new ConfigError(path, 'must be an ip/length string');
    const cut = v.indexOf('/');
    if (canonicalIpText(cut < 0 ? v : v.slice(0, cut)) === undefined) throw new ConfigError(path, `not a CIDR: ${JSON.stringify(v)}`);
    return v;
  });
}

const MATCH_FIELDS = ['namespaces', 'notNamespaces', 'principals', 'notPrincipals', 'serviceAccounts', 'notServiceAccounts', 'sourceIps',
  'notSourceIps', 'destinationIps', 'notDestinationIps', 'destinationPorts', 'notDestinationPorts'];

function match(r: Reader): AuthorizationMatch {
  r.only(MATCH_FIELDS);
  const sa = (key: string): { namespace: string; serviceAccount: string }[] =>
    r.msgs(key).map((m) => { m.only(['namespace', 'serviceAccount']); return { namespace: m.str('namespace'), serviceAccount: m.str('serviceAccount') }; });
  const ports = (key: string): number[] => r.list(key).map((v, i) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535) throw new ConfigError(`${r.at(key)}[${i}]`, 'must be a port number');
    return v;
  });
  return {
    namespaces: stringMatches(r, 'namespaces'), notNamespaces: stringMatches(r, 'notNamespaces'),
    principals: stringMatches(r, 'principals'), notPrincipals: stringMatches(r, 'notPrincipals'),
    serviceAccounts: sa('serviceAccounts'), notServiceAccounts: sa('notServiceAccounts'),
    sourceIps: cidrs(r, 'sourceIps'), notSourceIps: cidrs(r, 'notSourceIps'),
    destinationIps: cidrs(r, 'destinationIps'), notDestinationIps: cidrs(r, 'notDestinationIps'),
    destinationPorts: ports('destinationPorts'), notDestinationPorts: ports('notDestinationPorts'),
  };
}

function nested(r: Reader, key: string): unknown[][][] {
  return r.list(key).map((rule, i) => {
    if (!Array.isArray(rule)) throw new ConfigError(`${r.at(key)}[${i}]`, 'a rule is a list of clauses');
    return rule.map((clause, j) => {
      if (!Array.isArray(clause)) throw new ConfigError(`${r.at(key)}[${i}][${j}]`, 'a clause is a list of matches');
      return clause;
    });
  });
}

function policy(r: Reader): Authorization {
  r.only(['name', 'namespace', 'scope', 'action', 'rules', 'dryRun']);
  return {
    name: r.str('name'), namespace: r.str('namespace'),
    scope: r.oneOf('scope', ['Global', 'Namespace', 'WorkloadSelector']),
    action: r.oneOf('action', ['Allow', 'Deny']),
    rules: nested(r, 'rules').map((rule, i) => rule.map((clause, j) => clause.map((m, k) => match(new Reader(m, `${r.at('rules')}[${i}][${j}][${k}]`))))),
    dryRun: r.bool('dryRun'),
  };
}

/** serde_yaml's tagged enum variants (`!Exact "spiffe://..."`) read as the map form. */
const MATCH_TAGS = ['Exact', 'Prefix', 'Suffix'].map((v) => ({ tag: `!${v}`, resolve: (value: string) => ({ [v]: value }) }));

/** Parses the file's text; errors name the field (`workloads[1].protocol: must be one of TCP, HBONE`). */
export function parseLocalConfig(text: string): LocalConfig {
  let doc: unknown;
  try {
    doc = parse(text, { customTags: MATCH_TAGS });
  } catch (e) {
    throw new ConfigError('', `not valid YAML: ${(e as Error).message}`);
  }
  const r = new Reader(doc ?? {}, '').only(['workloads', 'services', 'policies']);
  return {
    workloads: r.msgs('workloads').map(workload),
    services: r.msgs('services').map(service),
    policies: r.msgs('policies').map(policy),
  };
}
