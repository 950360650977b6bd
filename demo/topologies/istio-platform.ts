import type { YamlValue } from '../lib/yaml.ts';

/**
 * The Kubernetes side of the istio demo, as YAML skua-controlplane reads from its `--istio` directory:
 * Bookinfo's Services (as in Istio's platform/kube/bookinfo.yaml, plus the per-version services of
 * bookinfo-versions.yaml that Gateway API routes use) and one Pod per workload in the light form:
 * labels, a service account, `status.podIP` (a loopback address of its own), the container port,
 * and `hostIP`/`hostPort` saying where the app really listens on this machine. Sidecars bind the
 * pod address (`sidecar.istio.io/interceptionMode: NONE`: no iptables) and call out from
 * `sidecar.skua.io/outboundIP`. The ingress gateway pod runs skua-proxy in router mode.
 */

export interface DemoWorkload {
  readonly key: string;
  readonly pod: string;
  readonly namespace: string;
  readonly app: string;
  readonly version: string;
  readonly serviceAccount: string;
  /** Last octet of the pod address and of its outbound address. */
  readonly octet: number;
  /** The service port the app serves (and the sidecar's inbound port). */
  readonly port: number;
  readonly router?: boolean;
  /** No app process: a client whose calls the demo makes through its sidecar. */
  readonly clientOnly?: boolean;
}

export const SERVICE_PORT = 9080;
export const HTTPBIN_PORT = 8000;
/** The ingress gateway's server port in samples/bookinfo/networking/bookinfo-gateway.yaml. */
export const GATEWAY_PORT = 8080;
/** Each proxy's admin, on its pod address (Istio's 15000). */
export const ADMIN_PORT = 15000;
/** Where each app listens, on its pod address (the sidecar takes podIP:9080). */
export const APP_PORT = 19080;

export const WORKLOADS: readonly DemoWorkload[] = [
  { key: 'productpage', pod: 'productpage-v1-6b7f6c8d5c-pp001', namespace: 'default', app: 'productpage', version: 'v1', serviceAccount: 'bookinfo-productpage', octet: 11, port: SERVICE_PORT },
  { key: 'details', pod: 'details-v1-5f4d7c9b8d-dt001', namespace: 'default', app: 'details', version: 'v1', serviceAccount: 'bookinfo-details', octet: 12, port: SERVICE_PORT },
  { key: 'reviews-v1', pod: 'reviews-v1-7d9b8c6f5b-rv001', namespace: 'default', app: 'reviews', version: 'v1', serviceAccount: 'bookinfo-reviews', octet: 21, port: SERVICE_PORT },
  { key: 'reviews-v2', pod: 'reviews-v2-6c5b7d8f9a-rv002', namespace: 'default', app: 'reviews', version: 'v2', serviceAccount: 'bookinfo-reviews', octet: 22, port: SERVICE_PORT },
  { key: 'reviews-v3', pod: 'reviews-v3-5b9c8d7f6e-rv003', namespace: 'default', app: 'reviews', version: 'v3', serviceAccount: 'bookinfo-reviews', octet: 23, port: SERVICE_PORT },
  { key: 'ratings', pod: 'ratings-v1-7c8d9b6f5a-rt001', namespace: 'default', app: 'ratings', version: 'v1', serviceAccount: 'bookinfo-ratings', octet: 31, port: SERVICE_PORT },
  { key: 'gateway', pod: 'istio-ingressgateway-7f8d9c6b5a-gw001', namespace: 'istio-system', app: 'istio-ingressgateway', version: 'v1', serviceAccount: 'istio-ingressgateway-service-account', octet: 41, port: GATEWAY_PORT, router: true },
  { key: 'httpbin', pod: 'httpbin-v1-6d8c9b7f5e-hb001', namespace: 'foo', app: 'httpbin', version: 'v1', serviceAccount: 'httpbin', octet: 51, port: HTTPBIN_PORT },
  { key: 'sleep', pod: 'sleep-5c7d9b8f6a-sl001', namespace: 'foo', app: 'sleep', version: 'v1', serviceAccount: 'sa', octet: 52, port: 0, clientOnly: true },
];

export interface Addressing {
  /** `127.A.B`: pods get `.<octet>`; outbound addresses use `127.A.(B+1)`. */
  readonly base: string;
  readonly outboundBase: string;
}

export const podIp = (a: Addressing, w: DemoWorkload): string => `${a.base}.${w.octet}`;
export const outboundIp = (a: Addressing, w: DemoWorkload): string => `${a.outboundBase}.${w.octet}`;

function service(name: string, namespace: string, port: number, selector: Record<string, string>, clusterIp: string): string {
  const sel = Object.entries(selector).map(([k, v]) => `    ${k}: ${v}`).join('\n');
  return `apiVersion: v1
kind: Service
metadata:
  name: ${name}
  namespace: ${namespace}
  labels: { app: ${selector.app}, service: ${name} }
spec:
  clusterIP: ${clusterIp}
  ports:
  - port: ${port}
    name: http
  selector:
${sel}
`;
}

function pod(a: Addressing, w: DemoWorkload): string {
  const annotations = [`    sidecar.istio.io/interceptionMode: NONE`];
  if (w.router) annotations.push('    inject.istio.io/templates: gateway');
  else annotations.push(`    sidecar.skua.io/outboundIP: ${outboundIp(a, w)}`);
  const ports = w.clientOnly ? '' : `
    ports:
    - containerPort: ${w.port}
      name: http
      hostIP: ${podIp(a, w)}
      hostPort: ${APP_PORT}`;
  const labels = w.router ? `{ app: ${w.app}, istio: ingressgateway }` : `{ app: ${w.app}, version: ${w.version} }`;
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${w.pod}
  namespace: ${w.namespace}
  labels: ${labels}
  annotations:
${annotations.join('\n')}
spec:
  serviceAccountName: ${w.serviceAccount}
  containers:
  - name: ${w.router ? 'istio-proxy' : w.app}${w.router ? '' : ports}
status:
  podIP: ${podIp(a, w)}
`;
}

/** Services and pods. */
export function platformYaml(a: Addressing): string {
  const docs = [
    service('productpage', 'default', SERVICE_PORT, { app: 'productpage' }, '10.96.0.11'),
    service('details', 'default', SERVICE_PORT, { app: 'details' }, '10.96.0.12'),
    service('reviews', 'default', SERVICE_PORT, { app: 'reviews' }, '10.96.0.21'),
    service('ratings', 'default', SERVICE_PORT, { app: 'ratings' }, '10.96.0.31'),
    // bookinfo-versions.yaml: one service per version (Gateway API backends).
    service('reviews-v1', 'default', SERVICE_PORT, { app: 'reviews', version: 'v1' }, '10.96.0.22'),
    service('reviews-v2', 'default', SERVICE_PORT, { app: 'reviews', version: 'v2' }, '10.96.0.23'),
    service('reviews-v3', 'default', SERVICE_PORT, { app: 'reviews', version: 'v3' }, '10.96.0.24'),
    service('httpbin', 'foo', HTTPBIN_PORT, { app: 'httpbin' }, '10.96.1.51'),
    ...WORKLOADS.map((w) => pod(a, w)),
  ];
  return docs.join('---\n');
}

type Obj = { [k: string]: YamlValue };

/**
 * The bootstrap pilot-agent renders, reduced to what matters here: the node (`sidecar~<pod ip>~<pod>.<ns>~<ns>.svc.cluster.local`,
 * `router~…` for the gateway) with its metadata, admin, and ADS (Delta) to the control plane.
 */
export function proxyBootstrap(w: DemoWorkload, a: Addressing, xdsPort: number): Obj {
  const ads = { ads: {}, resource_api_version: 'V3', initial_fetch_timeout: '0s' };
  const addr = (address: string, port: number): Obj => ({ socket_address: { address, port_value: port } });
  return {
    node: {
      id: `${w.router ? 'router' : 'sidecar'}~${podIp(a, w)}~${w.pod}.${w.namespace}~${w.namespace}.svc.cluster.local`, cluster: `${w.app}.${w.namespace}`,
      metadata: {
        NAME: w.pod, NAMESPACE: w.namespace, WORKLOAD_NAME: w.pod.split('-').slice(0, -2).join('-'), SERVICE_ACCOUNT: w.serviceAccount,
        CLUSTER_ID: 'Kubernetes', MESH_ID: 'cluster.local', INTERCEPTION_MODE: 'NONE', LABELS: { app: w.app, version: w.version },
      },
    },
    admin: { address: addr(podIp(a, w), ADMIN_PORT) },
    dynamic_resources: {
      ads_config: { api_type: 'DELTA_GRPC', transport_api_version: 'V3', set_node_on_first_message_only: true, grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] },
      lds_config: ads, cds_config: ads,
    },
    static_resources: {
      clusters: [{
        name: 'xds-grpc', type: 'STATIC', connect_timeout: '1s',
        typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } } },
        load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: addr('127.0.0.1', xdsPort) } }] }] },
      }],
    },
  };
}
