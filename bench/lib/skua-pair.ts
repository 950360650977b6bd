/**
 * A skua sidecar pair as Istio runs one: skua-controlplane serves istiod-shaped config from a mesh
 * file (STRICT mTLS, capture none: listeners bind loopback addresses of their own), and each side
 * is `skua-proxy proxy sidecar --concurrency 1` (pilot-agent) with its workload certificate from
 * the local CA (CA_ADDR). The client's outbound listener takes the load generator's requests for
 * `echo:<port>`, the server's inbound listener hands them to the backend. `protocol` http2 makes
 * the hop between the sidecars HTTP/2 (istiod's http2_protocol_options), the app sides stay HTTP/1.1.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CertificateAuthority } from '../../packages/controlplane/src/ca/authority.ts';
import type { TokenAuthority } from '../../packages/controlplane/src/ca/token.ts';
import { startProcess, stopProcess, tailOf, type Proc } from './procs.ts';
import { freePort, HOST, httpGet, waitForPort } from './net.ts';
import { REPO_ROOT } from './targets.ts';
import { workloadDir } from './workload.ts';

const CP_MAIN = path.join(REPO_ROOT, 'packages/controlplane/src/main.ts');
const CLIENT = { name: 'client', ip: '127.0.0.71', out: '127.0.1.71', sa: 'client' };
const SERVER = { name: 'echo-server', ip: '127.0.0.72', out: '127.0.1.72', sa: 'echo' };

export interface SkuaPair {
  readonly client: Proc;
  readonly server: Proc;
  /** Envoy admin ports (/memory, /stats). */
  readonly clientAdmin: number;
  readonly serverAdmin: number;
  /** Where the load generator sends requests, and the Host header they carry. */
  readonly url: string;
  readonly host: string;
  /** The mesh file the control plane served. */
  readonly mesh: string;
  stop(): Promise<void>;
}

export interface SkuaPairOptions {
  readonly dir: string;
  readonly protocol: 'http' | 'http2';
  readonly backendPort: number;
  readonly skuaMain: string;
  /** Added to both proxies' environment (a build's NODE_OPTIONS). */
  readonly env?: Record<string, string>;
  /** Extra Node options for both proxies (--cpu-prof, --heapsnapshot-signal=SIGUSR2...). */
  readonly nodeArgs?: readonly string[];
  /** The mesh's mTLS mode (default STRICT, Istio's set-up); DISABLE for a plaintext pair. */
  readonly mtls?: 'STRICT' | 'DISABLE';
  /** Append each proxy's output to <logDir>/<name>.log. */
  readonly logDir?: string;
  readonly ca: { readonly ca: CertificateAuthority; readonly tokens: TokenAuthority; readonly address: string };
}

async function until(what: string, proc: Proc, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitStatus !== undefined) throw new Error(`${proc.name} exited (${String(proc.exitStatus)}) before ${what}:\n${tailOf(proc)}`);
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${proc.name}: no ${what} within ${timeoutMs / 1000} s:\n${tailOf(proc)}`);
}

async function startSidecar(o: SkuaPairOptions, w: typeof CLIENT, xdsPort: number): Promise<{ proc: Proc; admin: number }> {
  const wl = workloadDir(path.join(o.dir, o.protocol), w.sa, o.ca.ca, o.ca.tokens, o.ca.address);
  const [admin, status, envoyStatus, prometheus] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const proc = startProcess(`skua-${w.name}`, process.execPath, [...(o.nodeArgs ?? []), path.resolve(REPO_ROOT, o.skuaMain), 'proxy', 'sidecar', '--concurrency', '1', '--proxyLogLevel', 'warning'], {
    cwd: wl.dir,
    logFile: o.logDir ? path.join(o.logDir, `${w.name}.log`) : undefined,
    env: {
      ...o.env, ...wl.env, POD_NAME: w.name, INSTANCE_IP: w.ip, ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local', TRUST_DOMAIN: 'cluster.local',
      ENVOY_STATUS_PORT: String(envoyStatus), ENVOY_PROMETHEUS_PORT: String(prometheus),
      // terminationDrainDuration 0s: the bench stops each side with SIGTERM and has nothing left to drain.
      PROXY_CONFIG: JSON.stringify({ discoveryAddress: `${HOST}:${xdsPort}`, controlPlaneAuthPolicy: 'NONE', proxyAdminPort: admin, statusPort: status, terminationDrainDuration: '0s' }),
    },
  });
  await until('readiness (15021 /healthz/ready)', proc, async () => (await httpGet(envoyStatus, '/healthz/ready', 1000)).status === 200, 60_000);
  return { proc, admin };
}

export async function startSkuaPair(o: SkuaPairOptions): Promise<SkuaPair> {
  const servicePort = await freePort();
  const xdsPort = await freePort();
  const mesh = JSON.stringify({
    mesh: { mtls: o.mtls ?? 'STRICT', capture: 'none' },
    services: [{ name: 'echo', vip: '10.96.0.70', ports: [{ port: servicePort, protocol: o.protocol }] }],
    workloads: [
      { name: CLIENT.name, service_account: CLIENT.sa, ip: CLIENT.ip, outbound_ip: CLIENT.out, labels: { app: 'client' } },
      { name: SERVER.name, service_account: SERVER.sa, ip: SERVER.ip, outbound_ip: SERVER.out, labels: { app: 'echo' }, services: ['echo'], app: { [servicePort]: `${HOST}:${o.backendPort}` } },
    ],
  }, null, 1);
  const meshFile = path.join(o.dir, `mesh-${o.protocol}.json`);
  writeFileSync(meshFile, mesh);
  const started: Proc[] = [];
  const stop = async (): Promise<void> => { for (const p of started.reverse()) await stopProcess(p); };
  try {
    const cp = startProcess(`skua-controlplane-${o.protocol}`, process.execPath, [CP_MAIN, '--mesh', meshFile, '--xds-address', `${HOST}:${xdsPort}`], { cwd: REPO_ROOT });
    started.push(cp);
    await waitForPort(xdsPort, cp, 15_000);
    const server = await startSidecar(o, SERVER, xdsPort);
    started.push(server.proc);
    const client = await startSidecar(o, CLIENT, xdsPort);
    started.push(client.proc);
    return { client: client.proc, server: server.proc, clientAdmin: client.admin, serverAdmin: server.admin, url: `http://${CLIENT.out}:${servicePort}/`, host: `echo:${servicePort}`, mesh, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
