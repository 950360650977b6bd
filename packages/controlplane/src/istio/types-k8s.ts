/**
 * Kubernetes objects read by `--istio DIR` (Service, the light Pod form, the mesh ConfigMap) and
 * Gateway API routes and gateways, as validated records. See ../../README.md for the Pod form.
 */
import type { AuthorizationPolicy, DestinationRule, IstioGateway, Labels, Meta, PeerAuthentication, RequestAuthentication, ServiceEntry, Sidecar, VirtualService, WorkloadEntry } from './types.ts';

export interface KubeServicePort {
  readonly name?: string;
  readonly port: number;
  /** A container port number or name. */
  readonly targetPort: number | string;
  readonly protocol: 'TCP' | 'UDP' | 'SCTP';
  readonly appProtocol?: string;
}

export interface KubeService {
  readonly meta: Meta;
  /** undefined: no selector (endpoints come from elsewhere, e.g. WorkloadEntries selected by a ServiceEntry). */
  readonly selector?: Labels;
  readonly ports: readonly KubeServicePort[];
  /** undefined: allocated. */
  readonly clusterIP?: string;
}

export interface PodPort {
  readonly name?: string;
  readonly containerPort: number;
  /** Where the app really listens on this machine (hostIP:hostPort), when not on podIP:containerPort. */
  readonly hostIP?: string;
  readonly hostPort?: number;
}

export interface Pod {
  readonly meta: Meta;
  readonly serviceAccount: string;
  readonly ip: string;
  readonly ports: readonly PodPort[];
  /** sidecar.istio.io/inject (default true). */
  readonly sidecar: boolean;
  /** sidecar.istio.io/interceptionMode: REDIRECT (iptables capture) or NONE (listeners bind real addresses). */
  readonly interception: 'REDIRECT' | 'NONE';
  /** sidecar.skua.io/outboundIP: where the sidecar's outbound listeners bind (interception NONE). */
  readonly outboundIp?: string;
  /** istio.io/dataplane-mode: ambient. */
  readonly ambient: boolean;
  readonly nodeName?: string;
  /** Gateway pods: run skua-proxy in router mode (node id router~...). */
  readonly router: boolean;
}

/** The `istio` ConfigMap in the root namespace: the MeshConfig fields used here. */
export interface MeshConfig {
  readonly meta?: Meta;
  readonly trustDomain: string;
  readonly rootNamespace: string;
  readonly outboundAllowAny: boolean;
  readonly clusterId: string;
}

export interface ParentRef {
  readonly group: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  readonly port?: number;
  readonly sectionName?: string;
}

export interface HttpRouteHeaderMatch {
  readonly type: 'Exact' | 'RegularExpression';
  readonly name: string;
  readonly value: string;
}

export interface HttpRouteMatch {
  readonly path?: { readonly type: 'Exact' | 'PathPrefix' | 'RegularExpression'; readonly value: string };
  readonly headers: readonly HttpRouteHeaderMatch[];
  readonly queryParams: readonly HttpRouteHeaderMatch[];
  readonly method?: string;
}

export interface HeaderModifier {
  readonly set: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  readonly add: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  readonly remove: readonly string[];
}

export interface HttpRouteFilter {
  readonly type: 'RequestHeaderModifier' | 'ResponseHeaderModifier' | 'RequestRedirect' | 'URLRewrite' | 'RequestMirror';
  readonly headers?: HeaderModifier;
  readonly redirect?: { readonly scheme?: string; readonly hostname?: string; readonly port?: number; readonly statusCode?: number; readonly path?: { readonly type: 'ReplaceFullPath' | 'ReplacePrefixMatch'; readonly value: string } };
  readonly rewrite?: { readonly hostname?: string; readonly path?: { readonly type: 'ReplaceFullPath' | 'ReplacePrefixMatch'; readonly value: string } };
  readonly mirror?: BackendRef;
}

export interface BackendRef {
  readonly group: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  readonly port?: number;
  readonly weight: number;
}

export interface HttpRouteRule {
  readonly name?: string;
  readonly matches: readonly HttpRouteMatch[];
  readonly filters: readonly HttpRouteFilter[];
  readonly backendRefs: readonly BackendRef[];
  readonly timeoutMs?: number;
}

export interface HttpRoute {
  readonly meta: Meta;
  readonly parentRefs: readonly ParentRef[];
  readonly hostnames: readonly string[];
  readonly rules: readonly HttpRouteRule[];
}

export interface K8sGateway {
  readonly meta: Meta;
  readonly gatewayClassName: string;
  readonly listeners: ReadonlyArray<{ readonly name: string; readonly port: number; readonly protocol: string; readonly hostname?: string }>;
}

/** A Kubernetes Namespace: its labels (istio.io/use-waypoint, istio.io/dataplane-mode). */
export interface KubeNamespace {
  readonly meta: Meta;
}

/** Everything read from an --istio directory, by kind. */
export interface IstioConfig {
  readonly namespaces: readonly KubeNamespace[];
  readonly services: readonly KubeService[];
  readonly pods: readonly Pod[];
  readonly serviceEntries: readonly ServiceEntry[];
  readonly workloadEntries: readonly WorkloadEntry[];
  readonly virtualServices: readonly VirtualService[];
  readonly destinationRules: readonly DestinationRule[];
  readonly gateways: readonly IstioGateway[];
  readonly sidecars: readonly Sidecar[];
  readonly peerAuthentications: readonly PeerAuthentication[];
  readonly authorizationPolicies: readonly AuthorizationPolicy[];
  readonly requestAuthentications: readonly RequestAuthentication[];
  readonly k8sGateways: readonly K8sGateway[];
  readonly httpRoutes: readonly HttpRoute[];
  readonly meshConfig: MeshConfig;
}

export type IstioResource =
  | { readonly kind: 'Service'; readonly value: KubeService }
  | { readonly kind: 'Pod'; readonly value: Pod }
  | { readonly kind: 'ServiceEntry'; readonly value: ServiceEntry }
  | { readonly kind: 'WorkloadEntry'; readonly value: WorkloadEntry }
  | { readonly kind: 'VirtualService'; readonly value: VirtualService }
  | { readonly kind: 'DestinationRule'; readonly value: DestinationRule }
  | { readonly kind: 'Gateway'; readonly value: IstioGateway }
  | { readonly kind: 'Sidecar'; readonly value: Sidecar }
  | { readonly kind: 'PeerAuthentication'; readonly value: PeerAuthentication }
  | { readonly kind: 'AuthorizationPolicy'; readonly value: AuthorizationPolicy }
  | { readonly kind: 'RequestAuthentication'; readonly value: RequestAuthentication }
  | { readonly kind: 'K8sGateway'; readonly value: K8sGateway }
  | { readonly kind: 'HTTPRoute'; readonly value: HttpRoute }
  | { readonly kind: 'MeshConfig'; readonly value: MeshConfig }
  | { readonly kind: 'Namespace'; readonly value: KubeNamespace }
  | { readonly kind: 'Ignored'; readonly value: Meta };
