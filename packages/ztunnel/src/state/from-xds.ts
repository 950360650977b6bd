/**
 * WDS resources (decoded proto-JSON: snake_case fields, enums by name, bytes as base64, defaults
 * omitted) → the state's records, as ztunnel converts them: empty trust domain → cluster.local,
 * empty service account → default, empty cluster id → Kubernetes, capacity defaults to 1.
 * A resource it cannot use throws a ConfigError naming the field; the resource is then NACKed.
 */
import { ConfigError } from '../core.ts';
import {
  workloadIdentity, type Authorization, type AuthorizationMatch, type GatewayAddress, type LoadBalancer, type LoadBalancerScope,
  type NetworkAddress, type NetworkCidr, type Service, type Workload,
} from './model.ts';
import { ipFromBytes, Reader } from './reader.ts';
import type { IstioStringMatch } from '../core.ts';

type Json = Record<string, unknown>;

export type AddressResource = { readonly kind: 'workload'; readonly workload: Workload } | { readonly kind: 'service'; readonly service: Service };

export function addressFromXds(json: Json): AddressResource {
  const r = new Reader(json, '');
  const w = r.msg('workload');
  if (w) return { kind: 'workload', workload: workloadFromXds(w) };
  const s = r.msg('service');
  if (s) return { kind: 'service', service: serviceFromXds(s) };
  throw new ConfigError('', 'an Address needs a workload or a service');
}

function gatewayFromXds(r: Reader): GatewayAddress {
  const port = r.port('hbone_mtls_port');
  const host = r.msg('hostname');
  if (host) return { destination: { kind: 'hostname', host: { namespace: host.str('namespace'), hostname: host.str('hostname') } }, hboneMtlsPort: port };
  const addr = r.msg('address');
  if (!addr) throw r.error('', 'needs an address or a hostname');
  return { destination: { kind: 'address', address: networkAddress(addr) }, hboneMtlsPort: port };
}

function networkAddress(r: Reader): NetworkAddress {
  return { network: r.str('network'), address: ipFromBytes(r.str('address'), r.at('address')) };
}

function portMap(list: Reader[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const p of list) out.set(p.port('service_port'), p.port('target_port'));
  return out;
}

const WORKLOAD_TYPES = ['DEPLOYMENT', 'CRONJOB', 'POD', 'JOB'] as const;

export function workloadFromXds(r: Reader): Workload {
  const tunnel = r.oneOf('tunnel_protocol', ['NONE', 'HBONE', 'LEGACY_ISTIO_MTLS']);
  if (tunnel === 'LEGACY_ISTIO_MTLS') throw r.error('tunnel_protocol', 'unsupported tunnel protocol: legacy istio mtls');
  const addresses = r.strs('addresses').map((b, i) => ipFromBytes(b, `${r.at('addresses')}[${i}]`));
  const services = new Map<string, Map<number, number>>();
  const sm = r.msg('services');
  if (sm) {
    for (const key of Object.keys(sm.raw)) {
      if (!key.includes('/')) throw sm.error(key, 'a service key is namespace/hostname');
      const list = sm.msg(key);
      services.set(key, portMap(list ? list.msgs('ports') : []));
    }
  }
  const at = r.msg('application_tunnel');
  const loc = r.msg('locality');
  const namespace = r.str('namespace');
  const trustDomain = r.str('trust_domain') || 'cluster.local';
  const serviceAccount = r.str('service_account') || 'default';
  return {
    uid: r.str('uid'), name: r.str('name'), namespace, workloadIps: addresses,
    waypoint: r.has('waypoint') ? gatewayFromXds(r.msg('waypoint') as Reader) : undefined,
    networkGateway: r.has('network_gateway') ? gatewayFromXds(r.msg('network_gateway') as Reader) : undefined,
    protocol: tunnel === 'HBONE' ? 'HBONE' : 'TCP',
    networkMode: r.oneOf('network_mode', ['STANDARD', 'HOST_NETWORK']) === 'HOST_NETWORK' ? 'HostNetwork' : 'Standard',
    trustDomain, serviceAccount, network: r.str('network'), workloadName: r.str('workload_name'),
    workloadType: r.oneOf('workload_type', WORKLOAD_TYPES).toLowerCase(),
    canonicalName: r.str('canonical_name'), canonicalRevision: r.str('canonical_revision'), hostname: r.str('hostname'),
    node: r.str('node'), nativeTunnel: r.bool('native_tunnel'),
    applicationTunnel: at ? { protocol: at.oneOf('protocol', ['NONE', 'PROXY']), port: at.port('port') || undefined } : undefined,
    authorizationPolicies: r.strs('authorization_policies'),
    status: r.oneOf('status', ['HEALTHY', 'UNHEALTHY']) === 'UNHEALTHY' ? 'Unhealthy' : 'Healthy',
    clusterId: r.str('cluster_id') || 'Kubernetes',
    locality: { region: loc?.str('region') ?? '', zone: loc?.str('zone') ?? '', subzone: loc?.str('subzone') ?? '' },
    services, capacity: r.int('capacity', 1),
    identity: workloadIdentity(trustDomain, namespace, serviceAccount),
  };
}

const SCOPES: Record<string, LoadBalancerScope> = { REGION: 'Region', ZONE: 'Zone', SUBZONE: 'Subzone', NODE: 'Node', CLUSTER: 'Cluster', NETWORK: 'Network' };
const MODES = { UNSPECIFIED_MODE: 'Standard', STRICT: 'Strict', FAILOVER: 'Failover', PASSTHROUGH: 'Passthrough' } as const;

function loadBalancerFromXds(r: Reader): LoadBalancer {
  const prefs = r.list('routing_preference').map((v, i) => {
    const s = typeof v === 'string' ? SCOPES[v] : undefined;
    if (!s) throw new ConfigError(`${r.at('routing_preference')}[${i}]`, `invalid target ${JSON.stringify(v)}`);
    return s;
  });
  const mode = MODES[r.oneOf('mode', ['UNSPECIFIED_MODE', 'STRICT', 'FAILOVER', 'PASSTHROUGH'])];
  return { routingPreferences: prefs, mode, healthPolicy: r.oneOf('health_policy', ['ONLY_HEALTHY', 'ALLOW_ALL']) === 'ALLOW_ALL' ? 'AllowAll' : 'OnlyHealthy' };
}

export function serviceFromXds(r: Reader): Service {
  const vips: NetworkAddress[] = [];
  const cidrVips: NetworkCidr[] = [];
  for (const a of r.msgs('addresses')) {
    const na = networkAddress(a);
    const max = na.address.includes(':') ? 128 : 32;
    const len = a.has('length') ? a.int('length', 0, max) : max;
    if (len === max) vips.push(na);
    else cidrVips.push({ network: na.network, address: na.address, length: len });
  }
  const lb = r.msg('load_balancing');
  const fam = r.oneOf('ip_families', ['AUTOMATIC', 'IPV4_ONLY', 'IPV6_ONLY', 'DUAL']);
  return {
    name: r.str('name'), namespace: r.str('namespace'), hostname: r.str('hostname'), vips, cidrVips,
    ports: portMap(r.msgs('ports')), subjectAltNames: r.strs('subject_alt_names'),
    waypoint: r.has('waypoint') ? gatewayFromXds(r.msg('waypoint') as Reader) : undefined,
    weightedWaypoints: r.msgs('weighted_waypoints').map((w) => {
      const d = w.msg('destination');
      if (!d) throw w.error('destination', 'is required');
      return { destination: gatewayFromXds(d), weight: w.int('weight') };
    }),
    loadBalancer: lb ? loadBalancerFromXds(lb) : undefined,
    ipFamilies: fam === 'IPV4_ONLY' ? 'IPv4' : fam === 'IPV6_ONLY' ? 'IPv6' : fam === 'DUAL' ? 'Dual' : undefined,
    canonical: r.bool('canonical'),
    visibility: r.oneOf('visibility', ['PUBLIC', 'NAMESPACE']) === 'NAMESPACE' ? 'Namespace' : 'Public',
  };
}

function stringMatches(r: Reader, key: string): IstioStringMatch[] {
  return r.msgs(key).map((m) => {
    if (m.has('exact')) return { exact: m.str('exact') };
    if (m.has('prefix')) return { prefix: m.str('prefix') };
    if (m.has('suffix')) return { suffix: m.str('suffix') };
    if (m.has('presence')) return { presence: true };
    // ztunnel drops a StringMatch without a kind.
    return undefined;
  }).filter((m): m is IstioStringMatch => m !== undefined);
}

function cidrs(r: Reader, key: string): string[] {
  return r.msgs(key).map((a) => {
    const ip = ipFromBytes(a.str('address'), a.at('address'));
    return `${ip}/${a.int('length', 0, ip.includes(':') ? 128 : 32)}`;
  });
}

function ports(r: Reader, key: string): number[] {
  return r.list(key).map((v, i) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535) throw new ConfigError(`${r.at(key)}[${i}]`, 'must be a port number');
    return v;
  });
}

function matchFromXds(r: Reader): AuthorizationMatch {
  const sa = (key: string): { namespace: string; serviceAccount: string }[] =>
    r.msgs(key).map((m) => ({ namespace: m.str('namespace'), serviceAccount: m.str('serviceAccount') }));
  return {
    namespaces: stringMatches(r, 'namespaces'), notNamespaces: stringMatches(r, 'not_namespaces'),
    principals: stringMatches(r, 'principals'), notPrincipals: stringMatches(r, 'not_principals'),
    serviceAccounts: sa('service_accounts'), notServiceAccounts: sa('not_service_accounts'),
    sourceIps: cidrs(r, 'source_ips'), notSourceIps: cidrs(r, 'not_source_ips'),
    destinationIps: cidrs(r, 'destination_ips'), notDestinationIps: cidrs(r, 'not_destination_ips'),
    destinationPorts: ports(r, 'destination_ports'), notDestinationPorts: ports(r, 'not_destination_ports'),
  };
}

export function authorizationFromXds(json: Json): Authorization {
  const r = new Reader(json, '');
  const scope = r.oneOf('scope', ['GLOBAL', 'NAMESPACE', 'WORKLOAD_SELECTOR']);
  return {
    name: r.str('name'), namespace: r.str('namespace'),
    scope: scope === 'GLOBAL' ? 'Global' : scope === 'NAMESPACE' ? 'Namespace' : 'WorkloadSelector',
    action: r.oneOf('action', ['ALLOW', 'DENY']) === 'DENY' ? 'Deny' : 'Allow',
    rules: r.msgs('rules').map((rule) => rule.msgs('clauses').map((c) => c.msgs('matches').map(matchFromXds))),
    dryRun: r.bool('dry_run'),
  };
}
