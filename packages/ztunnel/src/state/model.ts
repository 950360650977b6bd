/**
 * ztunnel's view of the mesh: plain, immutable records built once from WDS (istio.workload.Address,
 * istio.security.Authorization) or from a LOCAL_XDS_PATH file. Field names follow ztunnel's own
 * JSON (its config_dump and local config), so the admin dump is these records serialised.
 */
import type { IstioAuthorization, IstioMatch } from '../core.ts';

/** `network/ip`: the key ztunnel indexes workloads and service VIPs by. */
export interface NetworkAddress {
  readonly network: string;
  /** Canonical text form (IPv4 dotted, IPv6 compressed lower-case). */
  readonly address: string;
}

export interface NamespacedHostname {
  readonly namespace: string;
  readonly hostname: string;
}

export type GatewayDestination =
  | { readonly kind: 'address'; readonly address: NetworkAddress }
  | { readonly kind: 'hostname'; readonly host: NamespacedHostname };

/** A waypoint or network gateway, by address or by hostname, and its HBONE port. */
export interface GatewayAddress {
  readonly destination: GatewayDestination;
  readonly hboneMtlsPort: number;
}

export type InboundProtocol = 'TCP' | 'HBONE';
export type HealthStatus = 'Healthy' | 'Unhealthy';

export interface ApplicationTunnel {
  readonly protocol: 'NONE' | 'PROXY';
  /** Port the tunnel goes to instead of the target port; undefined keeps the target port. */
  readonly port: number | undefined;
}

export interface Locality {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

export interface Workload {
  readonly uid: string;
  readonly name: string;
  readonly namespace: string;
  readonly workloadIps: readonly string[];
  readonly waypoint: GatewayAddress | undefined;
  readonly networkGateway: GatewayAddress | undefined;
  readonly protocol: InboundProtocol;
  readonly networkMode: 'Standard' | 'HostNetwork';
  readonly trustDomain: string;
  readonly serviceAccount: string;
  readonly network: string;
  readonly workloadName: string;
  /** deployment, cronjob, pod, job (lower case, as ztunnel prints and puts in baggage). */
  readonly workloadType: string;
  readonly canonicalName: string;
  readonly canonicalRevision: string;
  readonly hostname: string;
  readonly node: string;
  readonly nativeTunnel: boolean;
  readonly applicationTunnel: ApplicationTunnel | undefined;
  /** `namespace/name` of WORKLOAD_SELECTOR policies that select this workload. */
  readonly authorizationPolicies: readonly string[];
  readonly status: HealthStatus;
  readonly clusterId: string;
  readonly locality: Locality;
  /** `namespace/hostname` of each service this workload backs → service port → target port. */
  readonly services: ReadonlyMap<string, ReadonlyMap<number, number>>;
  readonly capacity: number;
  /** spiffe://<trust domain>/ns/<namespace>/sa/<service account> (trust domain defaults to cluster.local). */
  readonly identity: string;
}

export type LoadBalancerMode = 'Standard' | 'Strict' | 'Failover' | 'Passthrough';
export type LoadBalancerScope = 'Region' | 'Zone' | 'Subzone' | 'Node' | 'Cluster' | 'Network';

export interface LoadBalancer {
  readonly routingPreferences: readonly LoadBalancerScope[];
  readonly mode: LoadBalancerMode;
  readonly healthPolicy: 'OnlyHealthy' | 'AllowAll';
}

export interface NetworkCidr {
  readonly network: string;
  readonly address: string;
  readonly length: number;
}

export interface Service {
  readonly name: string;
  readonly namespace: string;
  readonly hostname: string;
  readonly vips: readonly NetworkAddress[];
  readonly cidrVips: readonly NetworkCidr[];
  /** Service port → target port (0: the target port is named and only endpoints know it). */
  readonly ports: ReadonlyMap<number, number>;
  readonly subjectAltNames: readonly string[];
  readonly waypoint: GatewayAddress | undefined;
  readonly weightedWaypoints: ReadonlyArray<{ readonly destination: GatewayAddress; readonly weight: number }>;
  readonly loadBalancer: LoadBalancer | undefined;
  readonly ipFamilies: 'Dual' | 'IPv4' | 'IPv6' | undefined;
  readonly canonical: boolean;
  readonly visibility: 'Public' | 'Namespace';
}

/** A workload behind a service: built from the workload's `services` map, not sent on its own. */
export interface Endpoint {
  readonly workloadUid: string;
  /** `namespace/hostname` of the service. */
  readonly service: string;
  readonly port: ReadonlyMap<number, number>;
  readonly status: HealthStatus;
}

/** istio.security.Authorization as plain data (the core's policy compiler takes the same record). */
export type Authorization = IstioAuthorization;
export type AuthorizationMatch = IstioMatch;

export const DEFAULT_TRUST_DOMAIN = 'cluster.local';

export function workloadIdentity(trustDomain: string, namespace: string, serviceAccount: string): string {
  return `spiffe://${trustDomain || DEFAULT_TRUST_DOMAIN}/ns/${namespace}/sa/${serviceAccount}`;
}

export function networkKey(network: string, address: string): string {
  return `${network}/${address}`;
}

export function hostKey(namespace: string, hostname: string): string {
  return `${namespace}/${hostname}`;
}

export function policyKey(p: { readonly namespace: string; readonly name: string }): string {
  return `${p.namespace}/${p.name}`;
}
