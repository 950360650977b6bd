// Starts skua-controlplane as a real child process serving a directory of resource files,
// and stops it by PID. `restart()` brings it back on the same port (control-plane fault tests).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, repoRoot, type Json } from './proxy.ts';

export const controlPlaneMain = path.join(repoRoot, 'packages', 'controlplane', 'src', 'main.ts');

export interface RunningControlPlane {
  readonly port: number;
  readonly dir: string;
  /** Writes `resources` as <name>.json in the watched directory. */
  write(name: string, resources: Json[]): void;
  /** Replaces the mesh file (`--mesh`, when started with one). */
  writeMesh(doc: Json): void;
  log(): string;
  /** Kills the process (SIGKILL: a crash, not a goodbye). */
  kill(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startControlPlane(files: Record<string, Json[]> = {}, opts: { mesh?: Json } = {}): Promise<RunningControlPlane> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-cp-'));
  // The mesh file lives outside the resource directory (every YAML/JSON there is read as resources).
  const meshDir = mkdtempSync(path.join(tmpdir(), 'skua-mesh-'));
  const meshFile = path.join(meshDir, 'mesh.yaml');
  const writeMesh = (doc: Json): void => {
    writeFileSync(path.join(meshDir, '.mesh.tmp'), JSON.stringify(doc, null, 1));
    renameSync(path.join(meshDir, '.mesh.tmp'), meshFile);
  };
  if (opts.mesh) writeMesh(opts.mesh);
  const port = await freePort();
  let child: ChildProcess | undefined;
  let out = '';
  const write = (name: string, resources: Json[]): void => {
    // Write then rename, so the watcher never reads half a file.
    const tmp = path.join(dir, `.${name}.tmp`);
    writeFileSync(tmp, JSON.stringify({ resources }, null, 1));
    renameSync(tmp, path.join(dir, `${name}.json`));
  };
  for (const [n, r] of Object.entries(files)) write(n, r);
  const launch = async (): Promise<void> => {
    const args = [controlPlaneMain, '--config-dir', dir, '--xds-address', `127.0.0.1:${port}`, ...(opts.mesh ? ['--mesh', meshFile] : [])];
    const c = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    c.unref();
    c.stderr?.setEncoding('utf8');
    c.stderr?.on('data', (d: string) => { out += d; if (process.env.SKUA_TEST_DEBUG) process.stderr.write(d); });
    (c.stderr as unknown as { unref?: () => void } | null)?.unref?.();
    (c.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    const deadline = Date.now() + 15_000;
    while (!out.includes(`:${port},`)) {
      if (c.exitCode !== null) throw new Error(`skua-controlplane exited: ${out}`);
      if (Date.now() > deadline) throw new Error(`skua-controlplane did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const kill = async (): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  await launch();
  process.once('exit', () => { if (child && child.exitCode === null) child.kill('SIGKILL'); });
  return {
    port, dir, write, writeMesh, log: () => out, kill,
    restart: launch,
    async stop() { await kill(); rmSync(dir, { recursive: true, force: true }); rmSync(meshDir, { recursive: true, force: true }); },
  };
}

/** A bootstrap that takes everything from ADS at 127.0.0.1:<port>. */
export function adsBootstrap(cpPort: number, delta: boolean, nodeId = 'sidecar~127.0.0.1~test.default~default.svc.cluster.local'): Json {
  return {
    node: { id: nodeId, cluster: 'test' },
    dynamic_resources: {
      ads_config: { api_type: delta ? 'DELTA_GRPC' : 'GRPC', transport_api_version: 'V3', set_node_on_first_message_only: true, grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] },
      lds_config: { ads: {}, resource_api_version: 'V3', initial_fetch_timeout: '0s' },
      cds_config: { ads: {}, resource_api_version: 'V3', initial_fetch_timeout: '0s' },
    },
    static_resources: {
      clusters: [{
        name: 'xds-grpc', type: 'STATIC', connect_timeout: '1s',
        typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } } },
        load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: cpPort } } } }] }] },
      }],
    },
  };
}
