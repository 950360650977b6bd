/**
 * skua-waypoint's command line: Istio's waypoint pod arguments (pilot-agent's `proxy waypoint`),
 * the help text and the version.
 */
export const HELP = `usage: skua-waypoint [proxy waypoint] [pilot-agent flags]
       skua-waypoint version | --help

Istio's waypoint (ambient mode's L7 proxy): terminates HBONE from ztunnels (mutual TLS 1.3, HTTP/2
CONNECT on 15008), applies the routes, retries, faults and AuthorizationPolicies of the service the
caller addressed, and originates HBONE to the chosen endpoint's ztunnel. Configured like Istio's
waypoint pod (pilot-agent proxy waypoint): the same as \`skua-proxy proxy waypoint\`.

Arguments, as Istio's waypoint Deployment passes them:
  --domain <ns>.svc.cluster.local   --serviceCluster istio-waypoint.<ns>
  --proxyLogLevel warning           --proxyComponentLogLevel misc:error
  --log_output_level default:info   --concurrency N   --log_as_json   (others: skua-proxy proxy --help)

Environment (the Deployment's; relative paths are from the working directory, / in a container):
  POD_NAME, POD_NAMESPACE, INSTANCE_IP, SERVICE_ACCOUNT, HOST_IP   who it is: node id
                                    waypoint~<INSTANCE_IP>~<POD_NAME>.<POD_NAMESPACE>~<POD_NAMESPACE>.svc.cluster.local
  PROXY_CONFIG                      ProxyConfig JSON/YAML, e.g. {"discoveryAddress":"istiod.istio-system.svc:15012"}
  CA_ADDR, PILOT_CERT_PROVIDER      istiod's CA: the workload certificate HBONE presents and verifies with
                                    (token ./var/run/secrets/tokens/istio-token, root ./var/run/secrets/istio/root-cert.pem)
  ISTIO_META_CLUSTER_ID, ISTIO_META_MESH_ID, ISTIO_META_WORKLOAD_NAME, ISTIO_META_OWNER,
  ISTIO_META_INTERCEPTION_MODE, ISTIO_META_SERVICE_ACCOUNT, ISTIO_META_NODE_NAME, ISTIO_CPU_LIMIT
                                    node metadata, as pilot-agent sends it

Ports: 15008 HBONE (from xDS), 15021 /healthz/ready, 15020 merged metrics and agent status,
15090 /stats/prometheus, 15000 admin (127.0.0.1). Workload discovery (istio.workload.Workload over
Delta ADS) is on, as pilot-agent turns it on for waypoints.`;

export const VERSION = 'skua-waypoint 0.1.0';

/** The pilot-agent arguments for `proxy waypoint`, from ours; throws a usage message for another proxy type. */
export function pilotArgs(argv: readonly string[]): string[] {
  let rest = [...argv];
  if (rest[0] === 'proxy') rest = rest.slice(1);
  if (rest[0] === 'waypoint') rest = rest.slice(1);
  else if (rest[0] !== undefined && !rest[0].startsWith('-')) throw new Error(`skua-waypoint runs waypoints only, not ${JSON.stringify(rest[0])} (skua-proxy proxy sidecar|router)`);
  return ['waypoint', ...rest];
}

