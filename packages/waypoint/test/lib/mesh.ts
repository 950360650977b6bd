/**
 * An ambient mesh with a waypoint in network namespaces (needs root), on the ztunnel harness
 * (packages/ztunnel/test/lib): two nodes with skua-ztunnel each, the real skua-controlplane serving
 * Istio YAML (`--istio`) and its CA, and a waypoint pod running skua-waypoint (or `skua-proxy proxy
 * waypoint`) as Istio's waypoint Deployment runs istio-proxy. Node 1: the client pods and the
 * waypoint; node 2: the servers. The namespace uses the waypoint; `plain` opts out.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { makeCsr, newKeyPair, privateKeyPem } from '@skua/proxy/identity';
import { TokenAuthority } from '../../../controlplane/src/ca/token.ts';
import { ZtunnelCluster, type ClusterPod, type PodDef } from '../../../ztunnel/test/lib/cluster.ts';
import { PYTHON_HBONE_SERVER } from '../../../ztunnel/test/lib/python-hbone.ts';
import { HTTP_APP, HTTP_CLIENT, type ClientResult } from './apps.ts';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../../../', import.meta.url).pathname;

/** short name → [node, host byte, pod name, service account, app label, version]. */
const PODS = {
  cl: [1, 2, 'sleep-5d8f9c7b6-x2x9k', 'sleep', 'sleep', 'v1'],
  ot: [1, 3, 'other-6b7f8c9d5-q1w2e', 'other', 'other', 'v1'],
  e1: [2, 2, 'echo-v1-7d9b8c6f5b-rv001', 'echo', 'echo', 'v1'],
  e2: [2, 3, 'echo-v2-6c5b7d8e9f-rv002', 'echo', 'echo', 'v2'],
  fg: [2, 4, 'flaky-good-5f6d7c8b9-aa001', 'flaky', 'flaky', 'good'],
  fb: [2, 5, 'flaky-bad-5f6d7c8b9-bb002', 'flaky', 'flaky', 'bad'],
  pl: [2, 6, 'plain-7c8d9e6f5-cc003', 'plain', 'plain', 'v1'],
} as const;
export type PodShort = keyof typeof PODS;
const WAYPOINT = { node: 1, host: 9, name: 'waypoint-6f9c8d7b5-wp001', serviceAccount: 'waypoint' };
export const VIP = { echo: '10.96.0.10', echoV1: '10.96.0.11', echoV2: '10.96.0.12', flaky: '10.96.0.13', plain: '10.96.0.14', pyok: '10.96.0.15', pyimp: '10.96.0.16' } as const;
/** The python HBONE server's pod (node 2): its certificate says `pyhbone`; WDS puts a second address of it under another identity. */
const PY = { node: 2, host: 7, impostorHost: 8 };
export const SPIFFE = (sa: string): string => `spiffe://cluster.local/ns/default/sa/${sa}`;

function podYaml(name: string, ip: string, node: number, sa: string, labels: Record<string, string>): string {
  const l = Object.entries(labels).map(([k, v]) => `${k}: ${v}`).join(', ');
  return `apiVersion: v1
kind: Pod
metadata: { name: ${name}, namespace: default, labels: { ${l} }, annotations: { sidecar.istio.io/inject: "false" } }
spec: { serviceAccountName: ${sa}, nodeName: node${node}, containers: [{ name: app, ports: [{ containerPort: 8080, name: http }] }] }
status: { podIP: ${ip} }
`;
}

function serviceYaml(name: string, vip: string, selector: string, labels = ''): string {
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: default${labels ? `, labels: { ${labels} }` : ''} }
spec: { clusterIP: ${vip}, selector: { ${selector} }, ports: [{ name: http, port: 80, targetPort: 8080 }] }
`;
}

/** The whole mesh as Istio YAML: what a user would kubectl apply (pods in the light form). */
export function meshYaml(ips: Readonly<Record<PodShort | 'wp', string>>, extra: readonly string[] = []): string {
  const docs = [
    'apiVersion: v1\nkind: Namespace\nmetadata: { name: default, labels: { istio.io/use-waypoint: waypoint } }\n',
    // Istio's samples/ambient-argo/application/reviews-waypoint.yaml, named for this mesh.
    'apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: waypoint, namespace: default }\nspec:\n  gatewayClassName: istio-waypoint\n  listeners: [{ name: mesh, port: 15008, protocol: HBONE }]\n',
    podYaml(WAYPOINT.name, ips.wp, WAYPOINT.node, WAYPOINT.serviceAccount, { 'gateway.networking.k8s.io/gateway-name': 'waypoint', 'istio.io/dataplane-mode': 'none' }),
    ...Object.entries(PODS).map(([short, [node, , name, sa, app, version]]) => podYaml(name, ips[short as PodShort], node, sa, { app, version, 'istio.io/dataplane-mode': 'ambient' })),
    serviceYaml('echo', VIP.echo, 'app: echo'), serviceYaml('echo-v1', VIP.echoV1, 'app: echo, version: v1'), serviceYaml('echo-v2', VIP.echoV2, 'app: echo, version: v2'),
    serviceYaml('flaky', VIP.flaky, 'app: flaky'), serviceYaml('plain', VIP.plain, 'app: plain', 'istio.io/use-waypoint: none'),
    // GAMMA, as Istio's samples/bookinfo/gateway-api/route-reviews-90-10.yaml: the parent Service's traffic split 90/10.
    'apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: { name: echo, namespace: default }\nspec:\n  parentRefs: [{ group: "", kind: Service, name: echo, port: 80 }]\n'
      + '  rules: [{ backendRefs: [{ name: echo-v1, port: 80, weight: 90 }, { name: echo-v2, port: 80, weight: 10 }] }]\n',
    'apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: { name: flaky, namespace: default }\nspec:\n  hosts: [flaky]\n'
      + '  http: [{ route: [{ destination: { host: flaky } }], retries: { attempts: 3, retryOn: 5xx } }]\n',
    ...extra,
  ];
  return docs.join('---\n');
}

/** L7 policies at the waypoint: only sleep may GET /ok on echo; nobody may POST through the waypoint. */
export const POLICIES = [
  'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: { name: echo-get-ok, namespace: default }\nspec:\n'
    + '  targetRefs: [{ group: "", kind: Service, name: echo }, { group: "", kind: Service, name: echo-v1 }, { group: "", kind: Service, name: echo-v2 }]\n'
    + `  action: ALLOW\n  rules: [{ from: [{ source: { principals: ["cluster.local/ns/default/sa/sleep"] } }], to: [{ operation: { methods: [GET], paths: [/ok] } }] }]\n`,
  'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: { name: no-post, namespace: default }\nspec:\n'
    + '  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: waypoint }]\n  action: DENY\n  rules: [{ to: [{ operation: { methods: [POST] } }] }]\n',
];

export interface WaypointMeshOptions {
  readonly subnet: number;
  /** `skua-waypoint` (default) or `skua-proxy proxy waypoint`. */
  readonly binary?: 'skua-waypoint' | 'skua-proxy';
  readonly concurrency?: number;
  readonly extraYaml?: readonly string[];
  /** Serve the apps with this status per pod (default 200; flaky-bad 503). */
  readonly badStatus?: number;
  /**
   * An independent HBONE server (python3-h2) holding `pyhbone`'s certificate, behind two services
   * bound to the waypoint: `pyok` (WDS: pyhbone) and `pyimp` (WDS: another identity, an impostor).
   */
  readonly impostor?: boolean;
  /** Start the HTTP apps in the server pods (default true; a benchmark brings its own server). */
  readonly apps?: boolean;
}

/** The Pods and Services of the python HBONE server's two identities. */
function impostorYaml(ip: string, impostorIp: string): string[] {
  return [
    podYaml('pyhbone-5c6d7e8f9-py001', ip, PY.node, 'pyhbone', { app: 'pyok', 'istio.io/dataplane-mode': 'ambient' }),
    podYaml('trusted-5c6d7e8f9-py002', impostorIp, PY.node, 'trusted', { app: 'pyimp', 'istio.io/dataplane-mode': 'ambient' }),
    serviceYaml('pyok', VIP.pyok, 'app: pyok'), serviceYaml('pyimp', VIP.pyimp, 'app: pyimp'),
  ];
}

export class WaypointMesh {
  readonly cluster: ZtunnelCluster;
  readonly pods = new Map<PodShort | 'wp', ClusterPod>();
  waypoint: ChildProcess | undefined;
  readonly waypointLog: string[] = [];
  private readonly o: WaypointMeshOptions;
  private hostsDir = '';

  constructor(o: WaypointMeshOptions) {
    this.o = o;
    this.cluster = new ZtunnelCluster(2, o.subnet, 'with-xds');
  }

  pod(short: PodShort | 'wp'): ClusterPod {
    const p = this.pods.get(short);
    if (!p) throw new Error(`no pod ${short}`);
    return p;
  }

  async start(): Promise<void> {
    const c = this.cluster;
    const defs: PodDef[] = Object.entries(PODS).map(([short, [node, host, name, sa]]) => ({ node, short, host, info: { name, namespace: 'default', serviceAccount: sa } }));
    c.addPods([...defs, { node: WAYPOINT.node, short: 'wp', host: WAYPOINT.host }, ...(this.o.impostor ? [{ node: PY.node, short: 'py', host: PY.host }] : [])]);
    for (const d of [...defs.map((x) => x.short), 'wp']) this.pods.set(d as PodShort, c.pod(d));
    const ips = Object.fromEntries([...this.pods].map(([k, v]) => [k, v.ip])) as Record<PodShort | 'wp', string>;
    c.istioDir = join(c.dir, 'istio');
    mkdirSync(c.istioDir);
    const extra = [...(this.o.extraYaml ?? [])];
    if (this.o.impostor) {
      const py = c.pod('py');
      const impostorIp = py.ip.replace(/\.\d+$/, `.${PY.impostorHost}`);
      await execFileAsync('ip', ['-n', py.netns, 'addr', 'add', `${impostorIp}/24`, 'dev', 'eth0']);
      extra.push(...impostorYaml(py.ip, impostorIp));
    }
    writeFileSync(join(c.istioDir, 'mesh.yaml'), meshYaml(ips, extra));
    writeFileSync(join(c.dir, 'app.cjs'), HTTP_APP);
    writeFileSync(join(c.dir, 'client.cjs'), HTTP_CLIENT);
    for (const [short, [, , name]] of Object.entries(PODS)) {
      if (short === 'cl' || short === 'ot' || this.o.apps === false) continue;
      const status = short === 'fb' ? String(this.o.badStatus ?? 503) : '200';
      c.topo.spawnIn(this.pod(short as PodShort).netns, process.execPath, [join(c.dir, 'app.cjs'), '8080', name, status]);
    }
    await c.start(defs);
    if (this.o.impostor) await this.startPythonHbone();
    await this.startWaypoint(this.o.binary ?? 'skua-waypoint');
  }

  /** The python HBONE server with a certificate for `pyhbone` from the mesh's CA. */
  private async startPythonHbone(): Promise<void> {
    const c = this.cluster, identity = SPIFFE('pyhbone');
    const keys = await newKeyPair();
    const chain = await c.ca!.issue(await makeCsr(keys, identity), identity, 3600);
    writeFileSync(join(c.dir, 'py-cert.pem'), chain.slice(0, -1).join(''));
    writeFileSync(join(c.dir, 'py-key.pem'), await privateKeyPem(keys.privateKey));
    writeFileSync(join(c.dir, 'root-cert.pem'), c.ca!.rootCertPem);
    c.topo.spawnIn(c.pod('py').netns, '/usr/bin/python3', ['-c', PYTHON_HBONE_SERVER, join(c.dir, 'py-cert.pem'), join(c.dir, 'py-key.pem'), join(c.dir, 'root-cert.pem')]);
  }

  /** Stops the waypoint and starts it again (same pod, same files) with `binary`. */
  async restartWaypoint(binary: 'skua-waypoint' | 'skua-proxy'): Promise<void> {
    if (this.waypoint) await this.cluster.topo.stop(this.waypoint);
    this.waypointLog.length = 0;
    await this.startWaypoint(binary);
  }

  /** skua-waypoint in its pod, as the Deployment runs it: istio-proxy's file layout, token, root certificate, env and args. */
  private async startWaypoint(binary: 'skua-waypoint' | 'skua-proxy'): Promise<void> {
    const c = this.cluster, wp = this.pod('wp');
    const wd = join(c.dir, 'waypoint');
    rmSync(join(wd, 'etc'), { recursive: true, force: true });
    mkdirSync(join(wd, 'var/run/secrets/tokens'), { recursive: true });
    mkdirSync(join(wd, 'var/run/secrets/istio'), { recursive: true });
    writeFileSync(join(wd, 'var/run/secrets/tokens/istio-token'), TokenAuthority.create(join(c.dir, 'state')).issue({ namespace: 'default', serviceAccount: WAYPOINT.serviceAccount }, 3600));
    writeFileSync(join(wd, 'var/run/secrets/istio/root-cert.pem'), c.ca!.rootCertPem);
    // istiod's name resolves to the control plane inside the pod (ip netns exec mounts /etc/netns/<ns>/hosts).
    this.hostsDir = `/etc/netns/${wp.netns}`;
    mkdirSync(this.hostsDir, { recursive: true });
    writeFileSync(join(this.hostsDir, 'hosts'), `127.0.0.1 localhost\n${c.topo.coreIp} istiod.istio-system.svc\n`);
    const args = ['--domain', 'default.svc.cluster.local', '--serviceCluster', 'waypoint.default', '--proxyLogLevel', 'warning', '--proxyComponentLogLevel', 'misc:error',
      '--log_output_level', 'default:info', '--concurrency', String(this.o.concurrency ?? 1)];
    const bin = binary === 'skua-proxy' ? [join(ROOT, 'packages/proxy/bin/skua-proxy.js'), 'proxy', 'waypoint'] : [join(ROOT, 'packages/waypoint/bin/skua-waypoint.js'), 'proxy', 'waypoint'];
    const p = c.topo.spawnIn(wp.netns, 'sh', ['-c', `cd ${wd} && exec "$0" "$@"`, process.execPath, ...bin, ...args], {
      POD_NAME: WAYPOINT.name, POD_NAMESPACE: 'default', INSTANCE_IP: wp.ip, SERVICE_ACCOUNT: WAYPOINT.serviceAccount, HOST_IP: c.topo.nodes[0].underlayIp,
      CA_ADDR: 'istiod.istio-system.svc:15012', PILOT_CERT_PROVIDER: 'istiod', ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local',
      ISTIO_META_WORKLOAD_NAME: 'waypoint', ISTIO_META_INTERCEPTION_MODE: 'REDIRECT', ISTIO_META_SERVICE_ACCOUNT: WAYPOINT.serviceAccount, ISTIO_META_NODE_NAME: 'node1',
      ISTIO_META_OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/waypoint',
      // The cluster stats the tests read are outside Istio's default stats inclusion list: asked for, as a user would.
      PROXY_CONFIG: JSON.stringify({ discoveryAddress: `${c.topo.coreIp}:15010`, holdApplicationUntilProxyStarts: true,
        proxyStatsMatcher: { inclusionPrefixes: ['cluster.inbound-vip', 'cluster.connect_originate'] } }),
    });
    this.waypoint = p;
    for (const s of [p.stdout!, p.stderr!]) createInterface({ input: s }).on('line', (l) => { if (this.waypointLog.length < 50_000) this.waypointLog.push(l); });
    const end = Date.now() + 60_000;
    for (;;) {
      const code = await this.inPod('wp', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', 'http://127.0.0.1:15021/healthz/ready').catch(() => '');
      if (code === '200') break;
      if (p.exitCode !== null || Date.now() > end) throw new Error(`the waypoint did not become ready (${code}):\n${this.waypointLog.slice(-40).join('\n')}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async inPod(short: PodShort | 'wp', ...args: string[]): Promise<string> {
    return (await execFileAsync('ip', ['netns', 'exec', this.pod(short).netns, ...args], { maxBuffer: 1 << 26 })).stdout;
  }

  /** `count` requests one after another from a pod (through its ztunnel), keep-alive. */
  async request(from: PodShort, url: string, count: number, method = 'GET'): Promise<ClientResult> {
    return JSON.parse(await this.inPod(from, process.execPath, join(this.cluster.dir, 'client.cjs'), url, String(count), method)) as ClientResult;
  }

  /** The waypoint's Prometheus exposition (15020, merged as Istio's agent serves it). */
  metrics(port = 15020): Promise<string> {
    return this.inPod('wp', 'curl', '-s', `http://127.0.0.1:${port}/stats/prometheus`);
  }

  async destroy(): Promise<void> {
    await this.cluster.destroy();
    if (this.hostsDir) rmSync(this.hostsDir, { recursive: true, force: true });
  }
}
