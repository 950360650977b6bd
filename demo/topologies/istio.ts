/**
 * The default demo: Istio's Bookinfo driven by Istio's own YAML. skua-controlplane watches an
 * `--istio` directory holding Bookinfo's Services and Pods (istio-platform.ts); every workload runs
 * its app and a skua-proxy with the bootstrap pilot-agent would give it (node `sidecar~…`); the ingress
 * gateway runs `skua-proxy proxy router` (pilot-agent, router mode). Each has a token and certificates
 * from the control plane's CA. The checks
 * (istio-checks.ts) then apply Istio's bookinfo samples from the fixtures one after another, the way
 * the Istio tasks do, and measure each documented effect.
 *
 *   client ─▶ gateway (router) ─▶ productpage ─┬▶ details
 *                                              └▶ reviews v1 | v2 ─▶ ratings | v3 ─▶ ratings
 *   sleep (foo) ─▶ httpbin (foo)    (AuthorizationPolicies)
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, HOST } from '../lib/net.ts';
import type { ProcessSpec, Topology, TopologyOptions } from '../lib/topology.ts';
import { toYaml } from '../lib/yaml.ts';
import { ADMIN_PORT, APP_PORT, platformYaml, podIp, outboundIp, proxyBootstrap, WORKLOADS, SERVICE_PORT, GATEWAY_PORT, type Addressing, type DemoWorkload } from './istio-platform.ts';
import { istioChecks, type IstioDemo } from './istio-checks.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CONTROLPLANE = 'packages/controlplane/src/main.ts';

export interface IstioPorts {
  xds: number; ca: number;
  addressing: Addressing;
}

/**
 * Two free ports for the control plane, and a random 127.x.y block of pod addresses so runs on one
 * machine do not collide. Everything else binds fixed ports on the pod addresses, as in a pod
 * (admin 15000, the app 19080): no ephemeral port of a loopback connection can take them.
 */
export async function istioPorts(): Promise<IstioPorts> {
  const xds = await freePort();
  let ca = await freePort();
  while (ca === xds) ca = await freePort();
  const a = 100 + Math.floor(Math.random() * 100), b = 2 * Math.floor(Math.random() * 120);
  return { xds, ca, addressing: { base: `127.${a}.${b}`, outboundBase: `127.${a}.${b + 1}` } };
}

/** Mints the workload's token with `skua-controlplane token` into its sidecar's working directory. */
async function provision(w: DemoWorkload, stateDir: string, wlDir: string): Promise<void> {
  const { stdout } = await promisify(execFile)(process.execPath,
    [path.join(ROOT, CONTROLPLANE), 'token', '--state-dir', stateDir, '--namespace', w.namespace, '--service-account', w.serviceAccount, '--ttl', '2h']);
  mkdirSync(path.join(wlDir, 'var/run/secrets/tokens'), { recursive: true });
  writeFileSync(path.join(wlDir, 'var/run/secrets/tokens/istio-token'), stdout.trim());
}

export function istio(p: IstioPorts, opts: TopologyOptions): Topology {
  const a = p.addressing;
  const stateDir = path.join(opts.dir, 'controlplane');
  const istioDir = path.join(opts.dir, 'istio');
  const find = (key: string): DemoWorkload => WORKLOADS.find((w) => w.key === key)!;
  const sidecarUrl = (from: string): string => `http://${outboundIp(a, find(from))}:${SERVICE_PORT}`;
  const app = (w: DemoWorkload): ProcessSpec => {
    const env: Record<string, string> = { PORT: String(APP_PORT), LISTEN_ADDR: podIp(a, w), SERVICE: w.app, VERSION: w.version };
    if (w.app === 'productpage') Object.assign(env, { DETAILS_URL: sidecarUrl(w.key), REVIEWS_URL: sidecarUrl(w.key) });
    if (w.app === 'reviews') env.RATINGS_URL = sidecarUrl(w.key);
    return { name: w.key, script: 'demo/apps/bookinfo.ts', env, ready: { host: podIp(a, w), port: APP_PORT }, concurrent: true };
  };
  const proxy = (w: DemoWorkload): ProcessSpec => {
    const wlDir = path.join(opts.dir, w.pod);
    return {
      name: `${w.key}-${w.router ? 'gateway' : 'sidecar'}`,
      script: 'packages/proxy/src/main.ts',
      args: ['-c', path.join(opts.dir, `${w.key}-bootstrap.yaml`), '-l', opts.logLevel === 'info' ? 'warning' : opts.logLevel, '--concurrency', String(opts.concurrency)],
      // pilot-agent's environment: the secret manager asks CA_ADDR for the workload's certificate.
      env: { CA_ADDR: `${HOST}:${p.ca}`, CA_ROOT_CA: path.join(stateDir, 'root-cert.pem'), TRUST_DOMAIN: 'cluster.local', POD_NAMESPACE: w.namespace, SERVICE_ACCOUNT: w.serviceAccount },
      cwd: wlDir,
      prepare: () => provision(w, stateDir, wlDir),
      ready: { admin: ADMIN_PORT, host: podIp(a, w) },
      concurrent: true,
      proxy: true,
    };
  };
  /**
   * The ingress gateway runs as Istio's does: `skua-proxy proxy router` (pilot-agent), which renders
   * its bootstrap from the pod's environment. Its admin, status and Prometheus ports are chosen just
   * before it starts (they bind 127.0.0.1 / the wildcard, where ephemeral ports come and go).
   */
  const routerAgent = (w: DemoWorkload): ProcessSpec => {
    const wlDir = path.join(opts.dir, w.pod);
    const env: Record<string, string> = {
      POD_NAME: w.pod, POD_NAMESPACE: w.namespace, INSTANCE_IP: podIp(a, w), SERVICE_ACCOUNT: w.serviceAccount,
      ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local', TRUST_DOMAIN: 'cluster.local',
      ISTIO_METAJSON_LABELS: JSON.stringify({ app: w.app, istio: 'ingressgateway' }),
      CA_ADDR: `${HOST}:${p.ca}`, CA_ROOT_CA: path.join(stateDir, 'root-cert.pem'),
    };
    return {
      name: 'gateway (proxy router)',
      script: 'packages/proxy/src/main.ts',
      args: ['proxy', 'router', '--concurrency', String(opts.concurrency), '--proxyLogLevel', opts.logLevel === 'info' ? 'warning' : opts.logLevel],
      env, cwd: wlDir,
      prepare: async () => {
        await provision(w, stateDir, wlDir);
        const [admin, status, envoyStatus, prometheus] = [await freePort(), await freePort(), await freePort(), await freePort()];
        Object.assign(env, {
          ENVOY_STATUS_PORT: String(envoyStatus), ENVOY_PROMETHEUS_PORT: String(prometheus),
          PROXY_CONFIG: JSON.stringify({ discoveryAddress: `${HOST}:${p.xds}`, controlPlaneAuthPolicy: 'NONE', proxyAdminPort: admin, statusPort: status }),
        });
        admins[w.key] = { host: HOST, port: admin };
      },
      ready: () => ({ admin: admins[w.key].port, host: HOST }),
      concurrent: true,
      proxy: true,
    };
  };
  const admins: Record<string, { host: string; port: number }> = Object.fromEntries(WORKLOADS.map((w) => [w.key, { host: podIp(a, w), port: ADMIN_PORT }]));
  const gateway = find('gateway');
  const demo: IstioDemo = {
    istioDir, addressing: a, admins,
    gateway: { host: podIp(a, gateway), port: GATEWAY_PORT }, find,
  };
  return {
    title: `istio: Bookinfo from Istio's YAML (${istioDir}), a skua-proxy sidecar per workload and one as the ingress gateway, Istio's samples applied one by one`,
    files: {
      'istio/platform.yaml': platformYaml(a),
      ...Object.fromEntries(WORKLOADS.filter((w) => !w.router).map((w) => [`${w.key}-bootstrap.yaml`, toYaml(proxyBootstrap(w, a, p.xds))])),
    },
    processes: [
      ...WORKLOADS.filter((w) => !w.router && !w.clientOnly).map(app),
      {
        name: 'skua-controlplane', script: CONTROLPLANE,
        args: ['--istio', istioDir, '--xds-address', `${HOST}:${p.xds}`, '--ca-address', `${HOST}:${p.ca}`, '--state-dir', stateDir],
        ready: { port: p.ca },
      },
      ...WORKLOADS.map((w) => (w.router ? routerAgent(w) : proxy(w))),
    ],
    checks: istioChecks(demo),
    load: [
      { label: 'GET /productpage (gateway)', host: demo.gateway.host, port: GATEWAY_PORT, path: '/productpage', weight: 70, expect: 200 },
      { label: 'GET /reviews/0 (productpage sidecar)', host: outboundIp(a, find('productpage')), port: SERVICE_PORT, path: '/reviews/0', headers: { host: `reviews:${SERVICE_PORT}` }, weight: 30, expect: 200 },
    ],
    // The last routing sample applied is virtual-service-reviews-50-v3.yaml.
    split: { header: 'x-reviews-version', expect: { v1: 0.5, v3: 0.5 } },
    // The gateway's admin port is chosen at start: read it then.
    get admins() { return ['productpage', 'reviews-v1', 'gateway', 'httpbin'].map((k) => ({ name: `${k} proxy`, ...admins[k] })); },
    stats: /^(control_plane\.connected_state|listener_manager\.lds\.update_success|cluster_manager\.cds\.update_success|cluster\.outbound\|\d+\|v\d\|reviews\.[\w.]+\.upstream_rq_2xx|http\.[\w.]+\.downstream_rq_[2-5]xx|http\.[\w.]+\.rbac\.(allowed|denied)|[\w.]*ssl\.handshake)$/,
    get urls() { return [
      `curl -i http://${demo.gateway.host}:${GATEWAY_PORT}/productpage            (through the ingress gateway)`,
      `curl -i -b user=jason http://${demo.gateway.host}:${GATEWAY_PORT}/productpage  (signed in as jason)`,
      `skua-controlplane apply --istio ${istioDir} FILE   (any Istio YAML; the mesh follows)`,
      `skua-controlplane validate ${istioDir}`,
      ...WORKLOADS.map((w) => `${w.key} proxy admin: http://${admins[w.key].host}:${admins[w.key].port}/config_dump`),
    ]; },
  };
}
