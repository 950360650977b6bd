/**
 * The type URLs of the xDS resources Skua speaks, apart from the transport (discovery.ts): admin's
 * config_dump and the worker threads name them without loading the decoders and protobufjs (issue 13).
 */
export const TYPE_URL = {
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  route: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  endpoint: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
  secret: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret',
  extension: 'type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig',
  /** WDS (ztunnel, Delta ADS only): a Workload or a Service. */
  address: 'type.googleapis.com/istio.workload.Address',
  /** Envoy-side WDS (istio.workload.BootstrapExtension): one Workload per resource, named by uid. */
  workload: 'type.googleapis.com/istio.workload.Workload',
  /** WDS L4 policy (ztunnel, Delta ADS only). */
  authorization: 'type.googleapis.com/istio.security.Authorization',
  /** NDS: the DNS name table for the agent's DNS proxy (one unnamed resource). */
  nameTable: 'type.googleapis.com/istio.networking.nds.v1.NameTable',
} as const;
