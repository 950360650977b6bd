/**
 * What the mesh topology generates: the mesh file skua-controlplane translates (format:
 * packages/controlplane/README.md) and each sidecar's bootstrap, which holds only its node identity,
 * admin and the way to the control plane (everything else comes over ADS).
 */
import { socketAddress } from '../lib/envoy.ts';
import { HOST } from '../lib/net.ts';
import type { YamlValue } from '../lib/yaml.ts';

type Obj = { [k: string]: YamlValue };

/** A workload with a sidecar; under `capture: none` each has addresses of its own on loopback. */
export interface Workload {
  readonly name: string;
  readonly app: string;
  readonly version: string;
  readonly serviceAccount: string;
  /** Its sidecar's inbound listeners bind here (the pod IP). */
  readonly ip: string;
  /** Its sidecar's outbound listeners bind here: the app calls other services through it. */
  readonly outboundIp: string;
}

export const NAMESPACE = 'default';

export const WORKLOADS = {
  productpage: { name: 'productpage-v1', app: 'productpage', version: 'v1', serviceAccount: 'bookinfo-productpage', ip: '127.0.20.11', outboundIp: '127.0.21.11' },
  reviewsV1: { name: 'reviews-v1', app: 'reviews', version: 'v1', serviceAccount: 'bookinfo-reviews', ip: '127.0.20.21', outboundIp: '127.0.21.21' },
  reviewsV2: { name: 'reviews-v2', app: 'reviews', version: 'v2', serviceAccount: 'bookinfo-reviews', ip: '127.0.20.22', outboundIp: '127.0.21.22' },
} as const satisfies Record<string, Workload>;

export const spiffeId = (w: Workload): string => `spiffe://cluster.local/ns/${NAMESPACE}/sa/${w.serviceAccount}`;
export const nodeId = (w: Workload): string => `sidecar~${w.ip}~${w.name}.${NAMESPACE}~${NAMESPACE}.svc.cluster.local`;

export interface Split { readonly v1: number; readonly v2: number }

/**
 * productpage and reviews (v1, v2) on one service port, as in Bookinfo (9080 there; a free port here,
 * so several runs can share the machine), STRICT mTLS, reviews split by weight with a canary header.
 */
export function meshDoc(servicePort: number, apps: { productpage: number; reviewsV1: number; reviewsV2: number }, split: Split): Obj {
  const wl = (w: Workload, service: string, appPort: number): Obj => ({
    name: w.name, namespace: NAMESPACE, service_account: w.serviceAccount, ip: w.ip, outbound_ip: w.outboundIp,
    labels: { app: w.app, version: w.version }, services: [service], app: { [servicePort]: `${HOST}:${appPort}` },
  });
  return {
    mesh: { trust_domain: 'cluster.local', mtls: 'STRICT', capture: 'none' },
    services: [
      { name: 'productpage', namespace: NAMESPACE, vip: '10.96.0.11', ports: [{ port: servicePort, protocol: 'http' }] },
      { name: 'reviews', namespace: NAMESPACE, vip: '10.96.0.21', ports: [{ port: servicePort, protocol: 'http' }], subsets: { v1: { version: 'v1' }, v2: { version: 'v2' } } },
    ],
    workloads: [
      wl(WORKLOADS.productpage, 'productpage', apps.productpage),
      wl(WORKLOADS.reviewsV1, 'reviews', apps.reviewsV1),
      wl(WORKLOADS.reviewsV2, 'reviews', apps.reviewsV2),
    ],
    routes: [{
      host: 'reviews',
      http: [
        { name: 'canary', match: [{ headers: { 'x-canary': { exact: 'true' } } }], route: [{ subset: 'v2' }] },
        { name: 'split', route: [{ subset: 'v1', weight: split.v1 }, { subset: 'v2', weight: split.v2 }], timeout: '5s' },
      ],
    }],
  };
}

/** A sidecar's bootstrap: node id and metadata of its workload, ADS (Delta) to the control plane, admin. */
export function sidecarBootstrap(w: Workload, xdsPort: number, adminPort: number): Obj {
  const ads = { ads: {}, resource_api_version: 'V3', initial_fetch_timeout: '0s' };
  return {
    node: {
      id: nodeId(w), cluster: `${w.app}.${NAMESPACE}`,
      metadata: { NAME: w.name, NAMESPACE, WORKLOAD_NAME: w.name, SERVICE_ACCOUNT: w.serviceAccount, CLUSTER_ID: 'Kubernetes', MESH_ID: 'cluster.local', LABELS: { app: w.app, version: w.version } },
    },
    // On the workload's own address: a port chosen free on 127.0.0.1 can be taken there by any
    // loopback connection's ephemeral port before the sidecar starts.
    admin: { address: socketAddress(w.ip, adminPort) },
    dynamic_resources: {
      ads_config: { api_type: 'DELTA_GRPC', transport_api_version: 'V3', set_node_on_first_message_only: true, grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] },
      lds_config: ads,
      cds_config: ads,
    },
    static_resources: {
      clusters: [{
        name: 'xds-grpc', type: 'STATIC', connect_timeout: '1s',
        typed_extension_protocol_options: {
          'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
            '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
            explicit_http_config: { http2_protocol_options: {} },
          },
        },
        load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: socketAddress(HOST, xdsPort) } }] }] },
      }],
    },
  };
}
