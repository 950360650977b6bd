/**
 * The help texts of skua-ztunnel: the commands (ztunnel's `proxy`, `version`, `help`, plus our CNI
 * stand-in) and every environment variable the proxy reads (config.ts, main.ts), so `-h` answers
 * what the README's table does. test/cli-surface.test.ts checks that no variable read is missing.
 */
export const VERSION = 'skua-ztunnel 0.1.0';

export const HELP = `${VERSION} — the per-node L4 proxy of Istio's ambient mode (a drop-in for ztunnel)

usage: skua-ztunnel [proxy | version | help | cni-standin | cni-plugin] [-h | --help]

Commands:
  proxy (default)  start the proxy; configured by the environment variables below
  version          print the version
  help, -h, --help print this help
  cni-standin      serve ZDS to a ztunnel for pods given on the command line or announced by
                   cni-plugin (tests, demo, compose); see \`skua-ztunnel cni-standin --help\`
  cni-plugin       announce this process's pod (its network namespace) to a cni-standin;
                   see \`skua-ztunnel cni-plugin --help\`

Environment variables (ztunnel's names; a bad value stops start-up naming the variable):
 Control plane and identity
  XDS_ADDRESS                 WDS (Delta ADS) server; '' = none
                              (default https://istiod.istio-system.svc:15012 when KUBERNETES_SERVICE_HOST
                              is set, else https://localhost:15012; http:// or host:port = plaintext)
  CA_ADDRESS                  istiod's IstioCertificateService (default: as XDS_ADDRESS); '' = none
  FAKE_CA                     true: no CA (no HBONE)
  XDS_ROOT_CA, CA_ROOT_CA     root certificate: a file, SYSTEM, or inline PEM
                              (default ./var/run/secrets/istio/root-cert.pem)
  ALT_XDS_HOSTNAME, ALT_CA_HOSTNAME   the name the server's certificate is checked against
  AUTH_TOKEN                  token file or static token (default ./var/run/secrets/tokens/istio-token)
  XDS_HEADER_<NAME>, CA_HEADER_<NAME> extra gRPC metadata on the WDS / CA streams
  CLUSTER_ID, ISTIO_META_CLUSTER_ID   cluster id (ISTIO_META_CLUSTER_ID wins; default Kubernetes)
  CLUSTER_DOMAIN              default cluster.local
  NETWORK                     this node's network (default '')
  NODE_NAME                   the node's name (which workloads are local)
  POD_NAME, POD_NAMESPACE, INSTANCE_IP   the node id ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local
  ISTIO_META_<KEY>            node metadata (DNS_CAPTURE, DNS_PROXY_ADDR also read here)
  ISTIO_METAJSON_<KEY>        node metadata given as JSON
  PROXY_CONFIG                ProxyConfig YAML/JSON over ./etc/istio/config/mesh: proxyAdminPort,
                              statsPort, discoveryAddress, proxyMetadata (DNS_CAPTURE, DNS_PROXY_ADDR)
  SECRET_TTL                  workload certificate lifetime asked for (default 24h)
 Local config
  LOCAL_XDS_PATH, LOCAL_XDS   ztunnel's local config (YAML workloads/services/policies), a file or inline
  XDS_ON_DEMAND               must be false (on-demand WDS is not supported)
 Proxy mode and sockets
  PROXY_MODE                  shared (in-pod, pods from ZDS; default) or dedicated
  PROXY_WORKLOAD_INFO         namespace/name/service-account of the one workload (dedicated mode)
  INPOD_UDS                   the CNI agent's ZDS socket (default /var/run/ztunnel/ztunnel.sock)
  PACKET_MARK                 SO_MARK on ztunnel's own sockets (default 1337 = 0x539 in shared mode)
  ENABLE_ORIG_SRC             connect to apps from the client's address (IP_TRANSPARENT)
  ENABLE_RESPONSE_BAGGAGE     answer CONNECT with a baggage header (default true)
 HBONE
  POOL_MAX_STREAMS_PER_CONNECTION   streams per HBONE connection (default 100)
  POOL_UNUSED_RELEASE_TIMEOUT       idle HBONE connection release (default 5m)
  HTTP2_STREAM_WINDOW_SIZE          default 4194304
  HTTP2_CONNECTION_WINDOW_SIZE      default 16777216
 Shutdown and logs
  CONNECTION_TERMINATION_DEADLINE   drain time on SIGTERM and pod removal (default 5s)
  TERMINATION_GRACE_PERIOD_SECONDS  without the above: the deadline is this minus 5 s (minus 1 s when <= 10)
  RUST_LOG                    log level (error, warn, info, debug, trace; the first of a comma list)
  NODE_COMPILE_CACHE          Node's compile cache directory (default <tmpdir>/node-compile-cache)

Ports: 15001 outbound, 15006 plaintext inbound, 15008 HBONE, 15053 DNS (in each pod);
15000 admin (127.0.0.1), 15020 metrics, 15021 readiness.
`;

export const CNI_STANDIN_HELP = `usage: skua-ztunnel cni-standin [--socket PATH] [--apply-rules] [--pod NS/NAME/SA=NETNS ...] [--plugin-socket PATH]

A small stand-in for istio-cni's node agent (tests, the demo, compose.yaml's ambient profile): serves
ZDS on a unix SEQPACKET socket; when a ztunnel connects it sends each pod (AddWorkload with the pod's
netns fd), then SnapshotSent, and logs every Ack; pods added later are sent as they come. Runs until
SIGTERM/SIGINT (then removes the socket). Needs root (CAP_SYS_ADMIN to enter the pods' namespaces,
CAP_NET_ADMIN for the rules) and iptables-restore, ip and nsenter.

  --socket PATH         the ZDS socket ztunnel's INPOD_UDS names (default /var/run/ztunnel/ztunnel.sock)
  --pod SPEC            a pod: namespace/name/service-account=NETNS, NETNS a name under /var/run/netns
                        or a path (/proc/<pid>/ns/net); the pod's uid is namespace/name (repeatable)
  --plugin-socket PATH  also take pods while running: \`skua-ztunnel cni-plugin\` inside a pod's network
                        namespace sends it here (istio-cni's plugin telling its node agent); the pod's
                        uid is namespace/name, the same pod in a new namespace replaces the old one
  --apply-rules         apply ambient's in-pod iptables rules and routes inside each pod's namespace
                        first (where they are not there yet)
  -h, --help            print this help
`;

export const CNI_PLUGIN_HELP = `usage: skua-ztunnel cni-plugin --pod NS/NAME/SA [--plugin-socket PATH] [--netns PATH] [--timeout 60s]

Run inside a pod's network namespace (e.g. an init container sharing it, as compose.yaml's ambient
pods do): sends the namespace (/proc/self/ns/net, by SCM_RIGHTS) with the pod's namespace, name and
service account to a \`skua-ztunnel cni-standin --plugin-socket\`, which applies the in-pod rules and
tells ztunnel; exits 0 once the stand-in has set the pod up, 1 with its reason otherwise.

  --pod NS/NAME/SA      the pod's namespace, name and service account (its uid is NS/NAME)
  --plugin-socket PATH  the stand-in's plugin socket (default /var/run/istio-cni/plugin.sock)
  --netns PATH          another namespace than this process's (default /proc/self/ns/net)
  --timeout D           how long to wait for the stand-in to listen and answer (default 60s)
  -h, --help            print this help
`;
