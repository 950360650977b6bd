/**
 * compose.yaml's mesh driven from Node, for test/containers-mesh.test.ts and `./dev demo --containers`:
 * build the images (on the stand-in base where podman has no registry), bring the mesh up under its
 * own project name, tag and ingress port, wait until it serves, and take everything down again
 * (containers, volumes, the network, and the images this run built).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CONTAINERS_DIR, REPO_ROOT, engineEnv, run, type EngineName, type RunOptions, type RunResult } from './engine.ts';
import { ensureStandinImages } from '../base/standin.ts';

const SHIM = path.join(CONTAINERS_DIR, 'podman-compose', 'podman');
const COMPOSE_FILE = path.join(REPO_ROOT, 'compose.yaml');
export const SIDECAR_PODS = ['productpage-v1', 'details-v1', 'reviews-v1', 'reviews-v2', 'ratings-v1'] as const;

export interface MeshOptions {
  readonly engine: EngineName;
  readonly project: string;
  readonly tag: string;
  readonly ingressPort: number;
  /** Copy of containers/compose/istio the mesh reads (edits there change the running mesh). */
  readonly configDir?: string;
  /** Build on public images (false) or on the debootstrap stand-ins (podman without a registry). */
  readonly standin: boolean;
  readonly log?: (line: string) => void;
}

export interface ComposeMesh {
  readonly opts: MeshOptions;
  readonly configDir: string;
  compose(args: readonly string[], o?: RunOptions): Promise<RunResult>;
  /** Runs `node -e script` in a service's container (the app's, the sidecar's, kube's). */
  nodeIn(service: string, script: string): Promise<RunResult>;
  container(service: string): string;
  /** Images this run made (removed by down). */
  readonly images: string[];
}

function composeArgv(o: MeshOptions): { cmd: string; args: string[] } {
  // Debian 12's podman-compose 1.0.3 needs the shim for network_mode: service:X (see the script).
  if (o.engine === 'podman') return { cmd: 'podman-compose', args: ['--podman-path', SHIM, '-p', o.project, '-f', COMPOSE_FILE] };
  return { cmd: 'docker', args: ['compose', '-p', o.project, '-f', COMPOSE_FILE] };
}

async function imageIds(engine: EngineName): Promise<Set<string>> {
  const r = await run(engine, ['images', '-a', '-q', '--no-trunc'], { env: engineEnv(engine) });
  return new Set(r.stdout.split('\n').map((s) => s.trim()).filter(Boolean));
}

/** Builds the images and starts the mesh; on failure takes down what started and rethrows. */
export async function meshUp(o: MeshOptions): Promise<ComposeMesh> {
  const log = o.log ?? (() => {});
  const before = await imageIds(o.engine);
  const configDir = o.configDir ?? mkdtempSync(path.join(tmpdir(), 'skua-mesh-config-'));
  if (!o.configDir) cpSync(path.join(CONTAINERS_DIR, 'compose', 'istio'), configDir, { recursive: true });
  const vars: Record<string, string> = { SKUA_IMAGE_TAG: o.tag, SKUA_INGRESS_PORT: String(o.ingressPort), SKUA_MESH_CONFIG: configDir };
  if (o.standin) {
    const base = await ensureStandinImages(log);
    vars.SKUA_NODE_IMAGE = base.slim;
    vars.SKUA_NODE_BUILD_IMAGE = base.build;
  }
  const env = engineEnv(o.engine, vars);
  const { cmd, args } = composeArgv(o);
  const mesh: ComposeMesh = {
    opts: o, configDir, images: [],
    compose: (a, ro = {}) => run(cmd, [...args, ...a], { env, timeoutMs: 15 * 60_000, ...ro }),
    container: (service) => (o.engine === 'podman' ? `${o.project}_${service}_1` : `${o.project}-${service}-1`),
    nodeIn: (service, script) => run(o.engine, ['exec', mesh.container(service), 'node', '-e', script], { env, timeoutMs: 60_000 }),
  };
  try {
    log(`building images (tag ${o.tag})`);
    const built = await mesh.compose(['build']);
    if (built.code !== 0) throw new Error(`compose build failed:\n${built.stdout.slice(-3000)}\n${built.stderr.slice(-3000)}`);
    for (const id of await imageIds(o.engine)) if (!before.has(id)) mesh.images.push(id);
    log('starting the mesh');
    const up = await mesh.compose(['up', '-d']);
    if (up.code !== 0) throw new Error(`compose up failed:\n${up.stdout.slice(-3000)}\n${up.stderr.slice(-3000)}`);
    return mesh;
  } catch (err) {
    await meshDown(mesh);
    throw err;
  }
}

/** Waits for each sidecar (pilot-agent wait) and for the ingress gateway to serve the product page. */
export async function meshReady(mesh: ComposeMesh, timeoutMs = 240_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const pod of SIDECAR_PODS) {
    const left = Math.max(5, Math.round((deadline - Date.now()) / 1000));
    const r = await run(mesh.opts.engine, ['exec', mesh.container(`${pod}-proxy`), 'pilot-agent', 'wait', '--timeoutSeconds', String(left)], { env: engineEnv(mesh.opts.engine), timeoutMs: (left + 10) * 1000 });
    if (r.code !== 0) throw new Error(`${pod}'s sidecar is not ready: ${r.stderr.trim()}\n${(await logsOf(mesh, `${pod}-proxy`)).slice(-3000)}`);
  }
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${mesh.opts.ingressPort}/productpage`, { signal: AbortSignal.timeout(10_000) });
      last = `${res.status} ${await res.text()}`;
      if (res.status === 200 && last.includes('reviews-v1') && last.includes('by William Shakespeare')) return;
    } catch (err) { last = (err as Error).message; }
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`the ingress gateway does not serve /productpage: ${last.slice(0, 500)}\n${(await logsOf(mesh, 'istio-ingressgateway')).slice(-3000)}`);
}

export async function logsOf(mesh: ComposeMesh, service: string): Promise<string> {
  const r = await run(mesh.opts.engine, ['logs', mesh.container(service)], { env: engineEnv(mesh.opts.engine), timeoutMs: 30_000 });
  return r.stdout + r.stderr;
}

/** Containers, volumes, the network, the images this run built, the config copy. Never throws. */
export async function meshDown(mesh: ComposeMesh): Promise<string[]> {
  const problems: string[] = [];
  const env = engineEnv(mesh.opts.engine);
  const down = await mesh.compose(['down', '-v']);
  if (down.code !== 0) problems.push(`compose down: ${down.stderr.slice(-500)}`);
  if (mesh.opts.engine === 'podman') {
    // podman-compose 1.0.3 leaves the project's network behind.
    const net = `${mesh.opts.project}_default`;
    if ((await run('podman', ['network', 'exists', net], { env })).code === 0) {
      const r = await run('podman', ['network', 'rm', '-f', net], { env });
      if (r.code !== 0) problems.push(`network rm ${net}: ${r.stderr}`);
    }
  }
  if (mesh.images.length) {
    const r = await run(mesh.opts.engine, ['rmi', '-f', ...mesh.images], { env, timeoutMs: 120_000 });
    if (r.code !== 0 && !/image not known|No such image/.test(r.stderr)) problems.push(`rmi: ${r.stderr.slice(-500)}`);
  }
  if (!mesh.opts.configDir) rmSync(mesh.configDir, { recursive: true, force: true });
  return problems;
}

