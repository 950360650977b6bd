/**
 * The mesh model both inputs map onto: Istio YAML (`--istio DIR`, src/istio/) fills all of it; the
 * compact mesh file (`--mesh FILE`, model.ts) is a shorthand that fills the basic part (services
 * with subsets, workloads, VirtualService-like routes, L4 policies, one mesh-wide mTLS mode).
 * Resolved and validated: hostnames are FQDNs, durations are proto-JSON strings ("1.5s").
 */
import type { CorsPolicy, HeaderRewrites, Labels, ServerTls, TrafficPolicy } from '../istio/types.ts';

export type Json = Record<string, unknown>;
export type PortProtocol = 'http' | 'http2' | 'grpc' | 'tcp';
export type MtlsMode = 'PERMISSIVE' | 'STRICT' | 'DISABLE';
/** `iptables`: istiod's shapes (listeners reached through 15001/15006 capture). `none`: listeners bind real addresses. */
export type Capture = 'iptables' | 'none';

export interface ServicePort {
  readonly port: number;
  readonly protocol: PortProtocol;
  readonly targetPort: number;
  readonly name: string;
}

export interface MeshService {
  readonly name: string;
  readonly namespace: string;
  readonly hostname: string;
  readonly vip: string;
  readonly ports: readonly ServicePort[];
  /** subset name → labels an endpoint must carry. */
  readonly subsets: ReadonlyMap<string, Labels>;
  /** DestinationRule traffic policy (with port-level settings), and per subset. */
  readonly trafficPolicy?: TrafficPolicy;
  readonly subsetPolicies?: ReadonlyMap<string, TrafficPolicy>;
  /** The DestinationRule (for istiod's cluster metadata `config`); absent for mesh-file subsets. */
  readonly destinationRule?: { readonly name: string; readonly namespace: string };
  /** ServiceEntry resolution DNS: STRICT_DNS clusters to these names (target ports per service port). */
  readonly dnsEndpoints?: ReadonlyArray<{ readonly host: string; readonly ports: ReadonlyMap<number, number> }>;
  /** ServiceEntry resolution NONE: traffic goes where the client sent it (ORIGINAL_DST). */
  readonly passthrough?: boolean;
  /** MESH_EXTERNAL: never Istio mTLS. */
  readonly external?: boolean;
  /** Namespaces that may see it (`*` everyone, the default). */
  readonly exportTo?: readonly string[];
  /** The waypoint (`namespace/name`) its traffic goes through (istio.io/use-waypoint). */
  readonly waypoint?: string;
}

/** What Istio's security resources decided for one workload's inbound side. */
export interface WorkloadSecurity {
  readonly mtls: MtlsMode;
  /** PeerAuthentication portLevelMtls (target port → mode). */
  readonly portMtls: ReadonlyMap<number, MtlsMode>;
  /** jwt_authn and RBAC HTTP filters, in istiod's order, for inbound HTTP chains. */
  readonly httpFilters: readonly Json[];
  /** Network RBAC filters for inbound TCP chains. */
  readonly tcpFilters: readonly Json[];
  /** WDS keys (`namespace/name`) of the Authorizations selecting it. */
  readonly wdsPolicies: readonly string[];
}

export interface MeshWorkload {
  readonly name: string;
  readonly namespace: string;
  readonly workloadName: string;
  readonly serviceAccount: string;
  readonly ip: string;
  readonly node: string;
  readonly labels: Labels;
  /** Hostnames of the services this workload backs. */
  readonly services: readonly string[];
  readonly sidecar: boolean;
  readonly ambient: boolean;
  /** The pod is being deleted (EndpointSlice `terminating`): out of EDS, its own sidecar's config unchanged. */
  readonly terminating?: boolean;
  /** capture none: the address the sidecar's outbound listeners bind. */
  readonly outboundIp: string;
  /** Where the app really listens, per target port (capture none; sidecar-less workloads). */
  readonly app: ReadonlyMap<number, { readonly address: string; readonly port: number }>;
  /** A gateway (skua-proxy in router mode): gets gateway listeners, no inbound side. */
  readonly router?: boolean;
  /** A waypoint's own pod (skua-waypoint, node id waypoint~...): the waypoint (`namespace/name`) it runs. */
  readonly waypointProxy?: string;
  readonly security?: WorkloadSecurity;
  /** Sidecar resource egress hosts (`namespace/host`); undefined: every service it may see. */
  readonly egress?: readonly string[];
  /** Load-balancing weight (WorkloadEntry weight). */
  readonly weight?: number;
}

export interface HeaderMatch {
  readonly name: string;
  readonly kind: 'exact' | 'prefix' | 'regex' | 'present';
  readonly value: string;
  /** withoutHeaders: the request must not match. */
  readonly invert?: boolean;
}

export interface RouteMatch {
  /** pathSeparatedPrefix: Gateway API's PathPrefix (segment-wise). */
  readonly path?: { readonly kind: 'exact' | 'prefix' | 'regex' | 'pathSeparatedPrefix'; readonly value: string };
  readonly ignoreCase?: boolean;
  /** Includes :method, :authority, :scheme matches. */
  readonly headers: readonly HeaderMatch[];
  readonly queryParams?: readonly HeaderMatch[];
  /** Only for listeners on this port. */
  readonly port?: number;
  /** Only for sidecars whose workload carries these labels. */
  readonly sourceLabels?: Labels;
  readonly sourceNamespace?: string;
  /** Only on these gateways (`mesh` for sidecars); empty: the route's. */
  readonly gateways?: readonly string[];
}

export interface RouteDestination {
  /** FQDN of the destination service; undefined: the route's own service. */
  readonly host?: string;
  readonly subset: string;
  readonly port?: number;
  readonly weight: number;
  readonly headers?: HeaderRewrites;
}

export interface HttpRule {
  readonly name: string;
  /** OR-ed; empty = everything. */
  readonly matches: readonly RouteMatch[];
  /** Empty for redirects and direct responses. */
  readonly destinations: readonly RouteDestination[];
  readonly retries?: { readonly attempts: number; readonly perTryTimeout?: string; readonly retryOn?: string };
  readonly timeout?: string;
  readonly fault?: {
    readonly delay?: { readonly fixed: string; readonly percent: number };
    readonly abort?: { readonly httpStatus?: number; readonly grpcStatus?: string; readonly percent: number };
  };
  readonly redirect?: { readonly uri?: string; readonly authority?: string; readonly port?: number; readonly scheme?: string; readonly code?: number; readonly prefix?: string };
  readonly directResponse?: { readonly status: number; readonly body?: string };
  /** prefix: replace the matched prefix (Gateway API ReplacePrefixMatch). */
  readonly rewrite?: { readonly uri?: string; readonly prefix?: string; readonly authority?: string; readonly regex?: { readonly match: string; readonly rewrite: string } };
  readonly mirrors?: ReadonlyArray<{ readonly host: string; readonly subset?: string; readonly port?: number; readonly percent?: number }>;
  readonly cors?: CorsPolicy;
  readonly headers?: HeaderRewrites;
}

export interface TcpRule {
  readonly port?: number;
  readonly sourceLabels?: Labels;
  readonly destinations: readonly RouteDestination[];
}

export interface MeshRoute {
  readonly name: string;
  readonly namespace: string;
  /** The FQDN of the service routed (sidecars), or a gateway host pattern (`*`, `*.example.com`). */
  readonly host: string;
  readonly rules: readonly HttpRule[];
  readonly tcp?: readonly TcpRule[];
  /** `mesh` (sidecars) and/or `namespace/name` of gateways. Default: mesh. */
  readonly gateways?: readonly string[];
  /** istiod's route metadata `config` (default: a v1alpha3 virtual-service path). */
  readonly configPath?: string;
  readonly exportTo?: readonly string[];
}

export interface PolicySource {
  readonly principals: readonly string[];
  readonly namespaces: readonly string[];
  /** `namespace/name` */
  readonly serviceAccounts: readonly string[];
}

/** The mesh file's L4 policies (for ztunnel). Istio AuthorizationPolicies become `wdsAuthorizations`. */
export interface MeshPolicy {
  readonly name: string;
  readonly namespace: string;
  readonly action: 'ALLOW' | 'DENY';
  /** Absent: the whole namespace. */
  readonly selector?: Labels;
  readonly from: readonly PolicySource[];
  readonly ports: readonly number[];
}

export interface MeshGatewayServer {
  readonly port: number;
  /** The port's name (istiod's HTTPS route names carry it). */
  readonly portName?: string;
  readonly protocol: string;
  /** `namespace/host` or `host` patterns. */
  readonly hosts: readonly string[];
  readonly tls?: ServerTls;
}

/** An Istio Gateway or a Gateway API Gateway: which router workloads get which servers. */
export interface MeshGateway {
  /** `namespace/name`: what routes name in `gateways` (Gateway API ones are keyed the same way). */
  readonly key: string;
  readonly namespace: string;
  readonly selector: Labels;
  /** Gateway API: only pods in the gateway's namespace. */
  readonly sameNamespace?: boolean;
  readonly servers: readonly MeshGatewayServer[];
}

/** The filters a waypoint applies to one service: AuthorizationPolicies attached by targetRefs. */
export interface WaypointSecurity {
  /** RBAC filters (peer principal from filter state) for HTTP chains, DENY first. */
  readonly httpFilters: readonly Json[];
  /** Network RBAC filters for TCP chains. */
  readonly tcpFilters: readonly Json[];
}

/** A waypoint (Gateway API Gateway of class istio-waypoint): the L7 proxy the services bound to it go through. */
export interface MeshWaypoint {
  /** `namespace/name`, as services name it. */
  readonly key: string;
  readonly name: string;
  readonly namespace: string;
  /** The waypoint Service's hostname: ztunnels find the waypoint by it (WDS GatewayAddress). */
  readonly hostname: string;
  /** The HBONE listener's port (15008). */
  readonly port: number;
  /** Per service hostname bound to it: what the waypoint enforces for that service. */
  readonly security: ReadonlyMap<string, WaypointSecurity>;
}

export interface Mesh {
  readonly trustDomain: string;
  readonly domain: string;
  readonly clusterId: string;
  /** Mesh-wide mTLS mode (workloads with `security` have their own). */
  readonly mtls: MtlsMode;
  readonly capture: Capture;
  readonly services: readonly MeshService[];
  readonly workloads: readonly MeshWorkload[];
  readonly routes: readonly MeshRoute[];
  readonly policies: readonly MeshPolicy[];
  readonly gateways?: readonly MeshGateway[];
  readonly waypoints?: readonly MeshWaypoint[];
  /** Istio AuthorizationPolicies and STRICT PeerAuthentications for ztunnels (istio.security.Authorization). */
  readonly wdsAuthorizations?: readonly Json[];
  /** MeshConfig outboundTrafficPolicy ALLOW_ANY (the default): unknown hosts pass through under capture. */
  readonly outboundAllowAny?: boolean;
}
