/**
 * The Istio and Kubernetes objects `--istio DIR` reads, as validated records (Istio's field names,
 * durations in milliseconds). Only what the translation acts on is kept; fields that are valid
 * Istio but not applied were reported as warnings when the object was read.
 */
export type Labels = Readonly<Record<string, string>>;

export interface Meta {
  readonly kind: string;
  readonly apiVersion: string;
  readonly name: string;
  readonly namespace: string;
  readonly labels: Labels;
  readonly annotations: Labels;
  readonly file: string;
  /** Position of the document in its file (0-based). */
  readonly index: number;
}

/** `Kind namespace/name`, as istioctl names a resource. */
export function resourceId(m: Meta): string {
  return `${m.kind} ${m.namespace}/${m.name}`;
}

export interface StringMatch {
  readonly kind: 'exact' | 'prefix' | 'regex';
  readonly value: string;
}

// ---- networking.istio.io ----

export interface Destination {
  readonly host: string;
  readonly subset?: string;
  readonly port?: number;
}

export interface HeaderOps {
  readonly set: Labels;
  readonly add: Labels;
  readonly remove: readonly string[];
}

export interface HeaderRewrites {
  readonly request?: HeaderOps;
  readonly response?: HeaderOps;
}

export interface HttpMatch {
  readonly name?: string;
  readonly uri?: StringMatch;
  readonly method?: StringMatch;
  readonly authority?: StringMatch;
  readonly scheme?: StringMatch;
  /** undefined match value: the header must be present. */
  readonly headers: ReadonlyArray<readonly [string, StringMatch | undefined]>;
  readonly withoutHeaders: ReadonlyArray<readonly [string, StringMatch | undefined]>;
  readonly queryParams: ReadonlyArray<readonly [string, StringMatch | undefined]>;
  readonly port?: number;
  readonly sourceLabels?: Labels;
  readonly sourceNamespace?: string;
  readonly gateways: readonly string[];
  readonly ignoreUriCase: boolean;
}

export interface HttpRouteDestination {
  readonly destination: Destination;
  /** undefined: the whole remainder (one destination) or an equal share. */
  readonly weight?: number;
  readonly headers?: HeaderRewrites;
}

export interface CorsPolicy {
  readonly allowOrigins: readonly StringMatch[];
  readonly allowMethods: readonly string[];
  readonly allowHeaders: readonly string[];
  readonly exposeHeaders: readonly string[];
  readonly maxAgeMs?: number;
  readonly allowCredentials?: boolean;
}

export interface HttpRoute {
  readonly name?: string;
  readonly match: readonly HttpMatch[];
  readonly route: readonly HttpRouteDestination[];
  readonly redirect?: { readonly uri?: string; readonly authority?: string; readonly port?: number; readonly scheme?: string; readonly redirectCode?: number };
  readonly directResponse?: { readonly status: number; readonly body?: string };
  readonly rewrite?: { readonly uri?: string; readonly authority?: string; readonly regex?: { readonly match: string; readonly rewrite: string } };
  readonly timeoutMs?: number;
  readonly retries?: { readonly attempts: number; readonly perTryTimeoutMs?: number; readonly retryOn?: string };
  readonly fault?: {
    readonly delay?: { readonly fixedMs: number; readonly percent: number };
    readonly abort?: { readonly httpStatus?: number; readonly grpcStatus?: string; readonly percent: number };
  };
  readonly mirrors: ReadonlyArray<{ readonly destination: Destination; readonly percent?: number }>;
  readonly corsPolicy?: CorsPolicy;
  readonly headers?: HeaderRewrites;
}

export interface TcpRoute {
  readonly match: ReadonlyArray<{ readonly port?: number; readonly sourceLabels?: Labels; readonly gateways: readonly string[] }>;
  readonly route: ReadonlyArray<{ readonly destination: Destination; readonly weight?: number }>;
}

export interface VirtualService {
  readonly meta: Meta;
  readonly hosts: readonly string[];
  readonly gateways: readonly string[];
  readonly exportTo: readonly string[];
  readonly http: readonly HttpRoute[];
  readonly tcp: readonly TcpRoute[];
}

export type ClientTlsMode = 'DISABLE' | 'SIMPLE' | 'MUTUAL' | 'ISTIO_MUTUAL';

export interface ClientTls {
  readonly mode: ClientTlsMode;
  readonly sni?: string;
  readonly subjectAltNames: readonly string[];
  readonly caCertificates?: string;
  readonly clientCertificate?: string;
  readonly privateKey?: string;
  readonly insecureSkipVerify?: boolean;
}

export type LbPolicy = 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'RANDOM' | 'PASSTHROUGH';

export interface ConnectionPool {
  readonly maxConnections?: number;
  readonly connectTimeoutMs?: number;
  readonly http1MaxPendingRequests?: number;
  readonly http2MaxRequests?: number;
  readonly maxRequestsPerConnection?: number;
  readonly maxRetries?: number;
  readonly idleTimeoutMs?: number;
  readonly h2Upgrade?: boolean;
}

export interface OutlierDetection {
  readonly consecutive5xxErrors?: number;
  readonly consecutiveGatewayErrors?: number;
  readonly intervalMs?: number;
  readonly baseEjectionTimeMs?: number;
  readonly maxEjectionPercent?: number;
  readonly minHealthPercent?: number;
}

export interface TrafficPolicy {
  readonly lb?: LbPolicy;
  readonly hash?: { readonly header?: string; readonly sourceIp?: boolean; readonly queryParameter?: string; readonly cookie?: { readonly name: string; readonly ttlMs?: number; readonly path?: string } };
  readonly connectionPool?: ConnectionPool;
  readonly outlier?: OutlierDetection;
  readonly tls?: ClientTls;
  /** port number → settings for that port (override the ones above). */
  readonly portLevel: ReadonlyMap<number, TrafficPolicy>;
}

export interface Subset {
  readonly name: string;
  readonly labels: Labels;
  readonly trafficPolicy?: TrafficPolicy;
}

export interface DestinationRule {
  readonly meta: Meta;
  readonly host: string;
  readonly subsets: readonly Subset[];
  readonly trafficPolicy?: TrafficPolicy;
  readonly exportTo: readonly string[];
}

export interface ServerTls {
  readonly mode: 'SIMPLE' | 'MUTUAL' | 'PASSTHROUGH' | 'ISTIO_MUTUAL' | 'AUTO_PASSTHROUGH' | 'OPTIONAL_MUTUAL';
  readonly httpsRedirect: boolean;
  readonly serverCertificate?: string;
  readonly privateKey?: string;
  readonly caCertificates?: string;
  readonly credentialName?: string;
}

export interface GatewayServer {
  readonly port: { readonly number: number; readonly name: string; readonly protocol: string };
  readonly hosts: readonly string[];
  readonly tls?: ServerTls;
  readonly name?: string;
}

export interface IstioGateway {
  readonly meta: Meta;
  readonly selector: Labels;
  readonly servers: readonly GatewayServer[];
}

export interface WorkloadEntrySpec {
  readonly address: string;
  readonly ports: Readonly<Record<string, number>>;
  readonly labels: Labels;
  readonly serviceAccount?: string;
  readonly network?: string;
  readonly locality?: string;
  readonly weight?: number;
}

export interface ServicePortSpec {
  readonly number: number;
  readonly name: string;
  readonly protocol: string;
  readonly targetPort?: number;
}

export interface ServiceEntry {
  readonly meta: Meta;
  readonly hosts: readonly string[];
  readonly addresses: readonly string[];
  readonly ports: readonly ServicePortSpec[];
  readonly location: 'MESH_EXTERNAL' | 'MESH_INTERNAL';
  readonly resolution: 'NONE' | 'STATIC' | 'DNS' | 'DNS_ROUND_ROBIN' | 'DYNAMIC_DNS';
  readonly endpoints: readonly WorkloadEntrySpec[];
  readonly workloadSelector?: Labels;
  readonly exportTo: readonly string[];
}

export interface WorkloadEntry {
  readonly meta: Meta;
  readonly spec: WorkloadEntrySpec;
}

export interface Sidecar {
  readonly meta: Meta;
  readonly workloadSelector?: Labels;
  /** `namespace/host` patterns from every egress listener. */
  readonly egressHosts: readonly string[];
  readonly outboundTrafficPolicy?: 'REGISTRY_ONLY' | 'ALLOW_ANY';
}

// ---- security.istio.io ----

export type MtlsMode = 'UNSET' | 'DISABLE' | 'PERMISSIVE' | 'STRICT';

export interface PeerAuthentication {
  readonly meta: Meta;
  readonly selector?: Labels;
  readonly mode: MtlsMode;
  readonly portLevel: ReadonlyMap<number, MtlsMode>;
}

export interface AuthzSource {
  readonly principals: readonly string[]; readonly notPrincipals: readonly string[];
  readonly requestPrincipals: readonly string[]; readonly notRequestPrincipals: readonly string[];
  readonly namespaces: readonly string[]; readonly notNamespaces: readonly string[];
  readonly ipBlocks: readonly string[]; readonly notIpBlocks: readonly string[];
  readonly remoteIpBlocks: readonly string[]; readonly notRemoteIpBlocks: readonly string[];
  readonly serviceAccounts: readonly string[]; readonly notServiceAccounts: readonly string[];
  readonly trustDomains: readonly string[]; readonly notTrustDomains: readonly string[];
}

export interface AuthzOperation {
  readonly hosts: readonly string[]; readonly notHosts: readonly string[];
  readonly ports: readonly string[]; readonly notPorts: readonly string[];
  readonly methods: readonly string[]; readonly notMethods: readonly string[];
  readonly paths: readonly string[]; readonly notPaths: readonly string[];
}

export interface AuthzCondition {
  readonly key: string;
  readonly values: readonly string[];
  readonly notValues: readonly string[];
}

export interface AuthzRule {
  readonly from: readonly AuthzSource[];
  readonly to: readonly AuthzOperation[];
  readonly when: readonly AuthzCondition[];
}

/** A policy's targetRef(s): what it is attached to (a waypoint Gateway, a Service, ...). */
export interface PolicyTargetRef {
  readonly group: string;
  readonly kind: string;
  readonly name: string;
}

export interface AuthorizationPolicy {
  readonly meta: Meta;
  readonly action: 'ALLOW' | 'DENY' | 'AUDIT' | 'CUSTOM';
  readonly selector?: Labels;
  /** targetRef/targetRefs: attached to waypoints (applied there, not by sidecars or ztunnels). */
  readonly targetRefs: readonly PolicyTargetRef[];
  readonly rules: readonly AuthzRule[];
  /** istio.io/dry-run: true → shadow rules only. */
  readonly dryRun: boolean;
}

export interface JwtRule {
  readonly issuer: string;
  readonly audiences: readonly string[];
  readonly jwks?: string;
  readonly jwksUri?: string;
  readonly fromHeaders: ReadonlyArray<{ readonly name: string; readonly prefix?: string }>;
  readonly fromParams: readonly string[];
  readonly forwardOriginalToken: boolean;
  readonly outputPayloadToHeader?: string;
  readonly outputClaimToHeaders: ReadonlyArray<{ readonly header: string; readonly claim: string }>;
  readonly timeoutMs?: number;
}

export interface RequestAuthentication {
  readonly meta: Meta;
  readonly selector?: Labels;
  readonly jwtRules: readonly JwtRule[];
}
