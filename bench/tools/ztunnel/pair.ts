/**
 * The ztunnel pair the bench and the profiler share (needs root): two nodes in network namespaces,
 * a client pod on one and a server pod on the other (both in the mesh), skua-ztunnel on each with
 * the CA, HBONE between them; and two plain pods with a stunnel (TLS) pair between them. The server
 * pods run load.ts's sink on 8080 and nginx (a 1 KB file) on 8081. `ztunnelEnv` goes to the
 * ztunnels only (e.g. NODE_OPTIONS for profiling).
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TYPE_URL } from '../../../packages/ztunnel/src/core.ts';
import { ip4, ZtunnelCluster, type ClusterPod, type PodDef } from '../../../packages/ztunnel/test/lib/cluster.ts';

const execFileAsync = promisify(execFile);
const LOAD = new URL('load.ts', import.meta.url).pathname;
type Json = Record<string, unknown>;

export interface ZtunnelPair {
  readonly cluster: ZtunnelCluster;
  readonly client: ClusterPod;
  readonly server: ClusterPod;
  readonly plainClient: ClusterPod;
  readonly plainServer: ClusterPod;
  /** The two skua-ztunnel node processes (not the `ip netns exec` wrappers). */
  readonly ztunnelPids: number[];
}

export async function inPod(netns: string, ...args: string[]): Promise<string> {
  return (await execFileAsync('ip', ['netns', 'exec', netns, ...args], { maxBuffer: 1 << 24 })).stdout;
}

/** Runs load.ts in a namespace; resolves to its JSON line. */
export async function load(netns: string, ...args: string[]): Promise<Json> {
  return JSON.parse(await inPod(netns, process.execPath, LOAD, ...args)) as Json;
}

/** The process `ip netns exec` started (its only child). */
function nodePid(wrapperPid: number): number {
  const children = readFileSync(`/proc/${wrapperPid}/task/${wrapperPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return children[0] ?? wrapperPid;
}

/** `ztunnelBin`: another build's bin/skua-ztunnel.js (default: this checkout's). */
export async function startPair(subnet: number, ztunnelEnv: Record<string, string> = {}, ztunnelBin?: string): Promise<ZtunnelPair> {
  const c = new ZtunnelCluster(2, subnet, 'with-xds');
  if (ztunnelBin) c.ztunnelBin = ztunnelBin;
  try {
    const pods: PodDef[] = [
      { node: 1, short: 'bc', host: 2, info: { name: 'client', namespace: 'default', serviceAccount: 'sleep' } },
      { node: 2, short: 'bs', host: 2, info: { name: 'server', namespace: 'default', serviceAccount: 'httpbin' } },
      { node: 1, short: 'pc', host: 3 },
      { node: 2, short: 'ps', host: 3 },
    ];
    c.addPods(pods);
    const [client, server, plainClient, plainServer] = ['bc', 'bs', 'pc', 'ps'].map((s) => c.pod(s));
    const wl = (name: string, ip: string, node: string, sa: string): Json => ({
      '@type': TYPE_URL.address, workload: { uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', service_account: sa, addresses: [ip4(ip)], node, tunnel_protocol: 'HBONE', workload_name: name },
    });
    c.publish([wl('client', client.ip, 'node1', 'sleep'), wl('server', server.ip, 'node2', 'httpbin')]);
    writeFileSync(join(c.dir, '1k'), 'x'.repeat(1024));
    for (const p of [server, plainServer]) {
      const conf = join(c.dir, `nginx-${p.netns}.conf`);
      writeFileSync(conf, `daemon off; user root; worker_processes 1; pid ${c.dir}/nginx-${p.netns}.pid; error_log /dev/null; events { worker_connections 1024; }
http { access_log off; server { listen 8081; location / { root ${c.dir}; try_files /1k =404; } } }\n`);
      c.topo.spawnIn(p.netns, process.execPath, [LOAD, 'sink', '8080']);
      c.topo.spawnIn(p.netns, 'nginx', ['-c', conf]);
    }
    // stunnel between the plain pods: client side on 127.0.0.1:9000 → TLS → server side 9443 → 8080.
    await execFileAsync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=bench',
      '-keyout', join(c.dir, 'st.key'), '-out', join(c.dir, 'st.crt')]);
    writeFileSync(join(c.dir, 'sts.conf'), `foreground = yes\npid =\n[s]\naccept = 9443\nconnect = 127.0.0.1:8080\ncert = ${c.dir}/st.crt\nkey = ${c.dir}/st.key\n`);
    writeFileSync(join(c.dir, 'stc.conf'), `foreground = yes\npid =\n[c]\nclient = yes\naccept = 127.0.0.1:9000\nconnect = ${plainServer.ip}:9443\n`);
    c.topo.spawnIn(plainServer.netns, 'stunnel4', [join(c.dir, 'sts.conf')]);
    c.topo.spawnIn(plainClient.netns, 'stunnel4', [join(c.dir, 'stc.conf')]);
    await c.start(pods, ztunnelEnv);
    await new Promise((r) => setTimeout(r, 1000));
    return { cluster: c, client, server, plainClient, plainServer, ztunnelPids: c.ztunnels.map((p) => nodePid(p.pid as number)) };
  } catch (e) {
    await c.destroy();
    throw e;
  }
}
