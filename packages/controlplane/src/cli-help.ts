/** skua-controlplane's help texts: `--help` on the command and on each subcommand. */

/** istiod's plain log style: time, level, message. */
export const CONTROLPLANE_LOG_FORMAT = '%Y-%m-%dT%T.%fZ\t%l\t%v';

export const USAGE = `usage: skua-controlplane [--istio DIR] [--config-dir DIR] [--mesh FILE] [options]    serve xDS, WDS and the CA
       skua-controlplane validate [--errors-only] FILE|DIR...                       check Istio YAML
       skua-controlplane apply|delete --istio DIR [-n NS] FILE...                  kubectl apply/delete into DIR
       skua-controlplane token --state-dir DIR --namespace NS --service-account SA  a workload token
       skua-controlplane compose-kube --manifests DIR --state-dir DIR [--out DIR]   Kubernetes' part under compose
(skua-controlplane <command> --help for each)`;

export const HELP = `${USAGE}

Serves Envoy xDS (ADS, SotW and Delta) to sidecars and gateways, WDS to ztunnels, and istiod's CA
(IstioCertificateService) to workloads, from files it watches. At least one source is needed — or,
with none, --ca-address alone runs the CA only (no xDS), e.g. to take the CA down apart from WDS:

  --istio DIR             Istio and Kubernetes YAML (VirtualService, DestinationRule, Gateway, ...,
                          Services and Pods), translated as istiod does
  --config-dir DIR        Envoy resources as YAML/JSON files (a resources list, a config_dump, one resource)
  --mesh FILE             the compact mesh description
  --xds-address HOST:PORT where xDS and WDS are served, plaintext gRPC (default 127.0.0.1:15010)
  --ca-address HOST:PORT  serve the CA here (gRPC over TLS, like istiod's 15012); needs --state-dir to
                          keep its keys across restarts (without it they live in memory)
  --state-dir DIR         the CA's root/intermediate keys and certificates and the token signing key
                          (created on first use, mode 0700)
  --cacerts DIR           use Istio's plug-in CA files instead (ca-cert.pem, ca-key.pem, root-cert.pem,
                          cert-chain.pem)
  --trust-domain D        SPIFFE trust domain of issued certificates (default cluster.local)
  --ca-trusted-node-accounts NS/SA,...
                          accounts allowed to request other workloads' certificates, as istiod's
                          CA_TRUSTED_NODE_ACCOUNTS (default istio-system/ztunnel)
  -l, --log-level LEVEL   trace, debug, info (default), warning, error, critical, off
  --log-format PATTERN    spdlog pattern (default '%Y-%m-%dT%T.%fZ\\t%l\\t%v'); %j = JSON-escaped message
  --log_as_json           JSON lines: {"level","time","scope","msg"}
  -h, --help              this text

Environment: ISTIOD_CUSTOM_HOST=name[,name] adds DNS names to the CA's serving certificate (it always
has localhost and istiod.istio-system.svc), as istiod's does.
Logs go to stderr. SIGTERM/SIGINT stop it. A file that fails to parse or validate is reported with
file, resource and field, and its last good content keeps serving.`;

export const TOKEN_HELP = `usage: skua-controlplane token --state-dir DIR --namespace NS --service-account SA [--ttl 1h]

Prints a token the CA accepts (an ES256 JWT shaped like a Kubernetes projected service-account token,
audience istio-ca), signed with the key in DIR (the serving control plane's --state-dir; created there
if missing). Write it to the proxy's ./var/run/secrets/tokens/istio-token.

  --state-dir DIR          the control plane's state directory
  --namespace NS           the workload's namespace
  --service-account SA     its service account (SPIFFE id spiffe://<trust domain>/ns/NS/sa/SA)
  --ttl D                  lifetime (default 1h)`;

export const APPLY_HELP = `usage: skua-controlplane apply|delete --istio DIR [-n NAMESPACE] FILE...

Like kubectl apply/delete against the directory a control plane watches (--istio DIR): each resource
in FILE is written to (or removed from) DIR as <namespace>.<kind>.<group>.<name>.yaml, so applying
replaces and deleting removes; the running control plane pushes the change.

  --istio DIR              the watched directory
  -n, --namespace NS       namespace for resources that name none (default: default)
  -f, --filename FILE      the file (or give files as arguments)`;
