/**
 * A mesh in network namespaces for end-to-end tests and benchmarks: the topology (core + nodes),
 * the real skua-controlplane in the core (WDS from a watched file or Istio YAML, and the CA when
 * asked for: in the same process, or apart — a second skua-controlplane with only --ca-address — so
 * the CA can be taken down alone), a CNI stand-in per node, and a skua-ztunnel process per node in
 * the node's namespace. Pods are added to the CNI before ztunnel starts; `publish` rewrites the WDS file.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { CertificateAuthority } from '../../../controlplane/src/ca/authority.ts';
import { TokenAuthority } from '../../../controlplane/src/ca/token.ts';
import { CniStandIn } from '../../src/cni/standin.ts';
import { socketInNetns } from '../../src/core.ts';
import type { WorkloadInfo } from '../../src/inpod/zds-messages.ts';
import { SEND_CLIENT, Topology } from './topology.ts';
import { waitFor } from './wait.ts';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../../../', import.meta.url).pathname;
type Json = Record<string, unknown>;

/** An IPv4 address as WDS carries it in JSON (bytes, base64). */
export const ip4 = (s: string): string => Buffer.from(s.split('.').map(Number)).toString('base64');

export interface PodDef {
  /** 1-based node. */
  readonly node: number;
  readonly short: string;
  readonly host: number;
  /** In the mesh (captured, told to ztunnel); false: a plain pod. */
  readonly info?: WorkloadInfo;
}

export interface ClusterPod {
  readonly netns: string;
  readonly ip: string;
  readonly path: string;
}

/** No CA; the CA in the control plane's process; the CA in a process of its own. */
export type CaMode = 'none' | 'with-xds' | 'apart';

export class ZtunnelCluster {
  readonly topo: Topology;
  readonly dir: string;
  ca: CertificateAuthority | undefined;
  readonly cnis: CniStandIn[] = [];
  readonly ztunnels: ChildProcess[] = [];
  readonly logs: string[][] = [];
  controlplane: ChildProcess | undefined;
  /** The CA's own process (CaMode 'apart'). */
  caProcess: ChildProcess | undefined;
  readonly pods = new Map<string, ClusterPod>();
  private readonly caMode: CaMode;
  wds: Json[] = [];
  /** Serve this directory of Istio YAML (`--istio`) instead of the WDS file `publish` writes. */
  istioDir: string | undefined;
  /** The skua-ztunnel entry the nodes run (the bench points it at another build). */
  ztunnelBin = join(ROOT, 'packages/ztunnel/bin/skua-ztunnel.js');

  constructor(nodes: number, subnet: number, caMode: CaMode) {
    this.topo = new Topology(nodes, subnet);
    this.dir = mkdtempSync(join(tmpdir(), 'skua-zt-cluster-'));
    mkdirSync(join(this.dir, 'cp'));
    this.caMode = caMode;
  }

  addPods(defs: readonly PodDef[]): void {
    for (const d of defs) this.pods.set(d.short, this.topo.addPod(d.node, d.short, d.host, d.info !== undefined));
  }

  pod(short: string): ClusterPod {
    const p = this.pods.get(short);
    if (!p) throw new Error(`no pod ${short}`);
    return p;
  }

  publish(resources: Json[]): void {
    this.wds = resources;
    writeFileSync(join(this.dir, 'cp', '.wds.tmp'), JSON.stringify({ resources }));
    renameSync(join(this.dir, 'cp', '.wds.tmp'), join(this.dir, 'cp', 'wds.json'));
  }

  private readonly caArgs = (): string[] => ['--ca-address', `${this.topo.coreIp}:15012`, '--state-dir', join(this.dir, 'state')];
  private readonly controlPlaneBin = join(ROOT, 'packages/controlplane/bin/skua-controlplane.js');

  /** The WDS server (with the CA in 'with-xds' mode; in 'apart' mode also the CA when it is not running). */
  startControlPlane(): ChildProcess {
    const ca = this.caMode === 'with-xds' ? this.caArgs() : [];
    const source = this.istioDir ? ['--istio', this.istioDir] : ['--config-dir', join(this.dir, 'cp')];
    this.controlplane = this.topo.spawnIn(this.topo.core, process.execPath, [this.controlPlaneBin,
      ...source, '--xds-address', `${this.topo.coreIp}:15010`, ...ca]);
    if (this.caMode === 'apart' && !running(this.caProcess)) this.startCa();
    return this.controlplane;
  }

  /** The CA alone ('apart' mode): a skua-controlplane with only --ca-address. */
  startCa(): ChildProcess {
    if (this.caMode !== 'apart') throw new Error(`the CA runs apart only in 'apart' mode (this cluster: ${this.caMode})`);
    this.caProcess = this.topo.spawnIn(this.topo.core, process.execPath, [this.controlPlaneBin, ...this.caArgs()]);
    return this.caProcess;
  }

  /** Stops the CA's own process; resolves to its exit code. */
  async stopCa(): Promise<number | null> {
    return this.caProcess ? this.topo.stop(this.caProcess, 'SIGTERM') : null;
  }

  /** Stops the whole control plane (WDS and the CA, wherever it runs); resolves to the exit codes. */
  async stopControlPlane(): Promise<Array<number | null>> {
    return Promise.all([this.controlplane, this.caProcess].filter((p): p is ChildProcess => running(p)).map((p) => this.topo.stop(p, 'SIGTERM')));
  }

  /** Control plane, CNI stand-ins with the mesh pods, one ztunnel per node; resolves when all are ready. */
  async start(defs: readonly PodDef[], env: Record<string, string> = {}): Promise<void> {
    let caEnv: Record<string, string> = { CA_ADDRESS: '' };
    if (this.caMode !== 'none') {
      // The CA's root and the token key are made here first; the control plane loads the same ones.
      this.ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: join(this.dir, 'state') });
      writeFileSync(join(this.dir, 'root-cert.pem'), this.ca.rootCertPem);
      writeFileSync(join(this.dir, 'token'), TokenAuthority.create(join(this.dir, 'state')).issue({ namespace: 'istio-system', serviceAccount: 'ztunnel' }, 24 * 3600));
      caEnv = {
        CA_ADDRESS: `https://${this.topo.coreIp}:15012`, CA_ROOT_CA: join(this.dir, 'root-cert.pem'), ALT_CA_HOSTNAME: 'istiod.istio-system.svc',
        AUTH_TOKEN: join(this.dir, 'token'),
      };
    }
    this.startControlPlane();
    for (const [i, node] of this.topo.nodes.entries()) {
      const cni = new CniStandIn(join(this.dir, `${node.name}.sock`));
      cni.start();
      for (const d of defs) {
        if (d.node === i + 1 && d.info) await cni.addPod({ uid: `uid-${d.info.name}`, info: d.info, netnsPath: this.pod(d.short).path });
      }
      this.cnis.push(cni);
      const p = this.topo.spawnIn(node.netns, process.execPath, [this.ztunnelBin], {
        XDS_ADDRESS: `http://${this.topo.coreIp}:15010`, INPOD_UDS: cni.path, NODE_NAME: node.name, POD_NAME: `ztunnel-${i + 1}`,
        POD_NAMESPACE: 'istio-system', INSTANCE_IP: node.underlayIp, CONNECTION_TERMINATION_DEADLINE: '2s', ...caEnv, ...env,
      });
      const lines: string[] = [];
      this.logs.push(lines);
      createInterface({ input: p.stdout! }).on('line', (l) => { if (lines.length < 100_000) lines.push(l); });
      p.stderr!.on('data', (d: Buffer) => { if (process.env.ZT_DEBUG) process.stderr.write(d); });
      this.ztunnels.push(p);
    }
    await waitFor(() => this.cnis.every((c) => c.snapshots >= 1), 'every ztunnel connected to its CNI', 20_000);
    for (const i of this.topo.nodes.keys()) {
      for (let k = 0; k < 100; k++) {
        try { if ((await this.inNode(i, 'curl', '-s', 'http://127.0.0.1:15021/healthz/ready')) === 'ready\n') break; } catch { /* not up */ }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Runs a command in node `i`'s namespace (0-based); resolves to its stdout. */
  async inNode(i: number, ...args: string[]): Promise<string> {
    return (await execFileAsync('ip', ['netns', 'exec', this.topo.nodes[i].netns, ...args])).stdout;
  }

  /** SEND_CLIENT from a pod: `peer=<ip> <bytes echoed> <intact>` as the app saw it. */
  async send(pod: ClusterPod, host: string, port: number, bytes: number): Promise<string> {
    return (await execFileAsync('ip', ['netns', 'exec', pod.netns, 'python3', '-c', SEND_CLIENT, host, String(port), String(bytes)])).stdout.trim();
  }

  /** An app connection held open from inside a pod (through its capture); resolves once the echo server greeted. */
  async openFrom(pod: ClusterPod, host: string, port: number): Promise<{ conn: net.Socket; data: Buffer[] }> {
    const fd = openSync(pod.path, 'r');
    let conn: net.Socket;
    try {
      conn = socketInNetns(fd, 4);
    } finally {
      closeSync(fd);
    }
    conn.connect(port, host);
    const data: Buffer[] = [];
    conn.on('data', (c: Buffer) => data.push(c));
    conn.on('error', () => {});
    await waitFor(() => Buffer.concat(data).toString().startsWith('peer='), 'the greeting');
    return { conn, data };
  }

  async destroy(): Promise<void> {
    for (const c of this.cnis) c.close();
    await this.topo.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function running(p: ChildProcess | undefined): p is ChildProcess {
  return p !== undefined && p.exitCode === null && p.signalCode === null;
}
