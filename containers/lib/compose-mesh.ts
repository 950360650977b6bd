/**
 * compose.yaml's mesh driven from Node, for test/containers-mesh.test.ts and `./dev demo --containers`:
 * build the images (on the stand-in base where podman has no registry), bring the mesh up under its
 * own project name, tag and ingress port — the default profile (the sidecar mesh) or with the
 * `ambient` profile too — wait until it serves, and take everything down again (containers,
 * volumes, the network; then the images this run built).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CONTAINERS_DIR, REPO_ROOT, engineEnv, run, type EngineName, type RunOptions, type RunResult } from './engine.ts';
import { ensureStandinImages, type StandinImages } from '../base/standin.ts';

const SHIM = path.join(CONTAINERS_DIR, 'podman-compose', 'podman');
const COMPOSE_FILE = path.join(REPO_ROOT, 'compose.yaml');
export const SIDECAR_PODS = ['productpage-v1', 'details-v1', 'reviews-v1', 'reviews-v2', 'ratings-v1'] as const;
/** The ambient profile's pods: compose services `ambient-<pod>` (the app) and `ambient-<pod>-cni`. */
export const AMBIENT_PODS = SIDECAR_PODS;

export type Profile = 'default' | 'ambient';

export interface MeshOptions {
  readonly engine: EngineName;
  readonly project: string;
  readonly tag: string;
  readonly ingressPort: number;
  /** `ambient`: compose.yaml's ambient profile as well (COMPOSE_PROFILES=ambient). */
  readonly profile?: Profile;
  /** Copy of containers/compose/istio the mesh reads (edits there change the running mesh). */
  readonly configDir?: string;
  /** Build on public images (false) or on the debootstrap stand-ins (podman without a registry). */
  readonly standin: boolean;
  readonly log?: (line: string) => void;
}

export interface ComposeMesh {
  readonly opts: MeshOptions;
  readonly configDir: string;
  /** Copy of containers/compose/istio-ambient the ambient profile reads (SKUA_AMBIENT_CONFIG). */
  readonly ambientConfigDir: string;
  compose(args: readonly string[], o?: RunOptions): Promise<RunResult>;
  /** Runs `node -e script` in a service's container (the app's, the sidecar's, kube's). */
  nodeIn(service: string, script: string): Promise<RunResult>;
  container(service: string): string;
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

/** COMPOSE_PROFILES (docker compose reads it; so does containers/podman-compose/podman for 1.0.3). */
function composeEnv(o: MeshOptions, dirs: { config: string; ambient: string }, profiles: string, base?: StandinImages): Record<string, string> {
  const vars: Record<string, string> = {
    SKUA_IMAGE_TAG: o.tag, SKUA_INGRESS_PORT: String(o.ingressPort), SKUA_MESH_CONFIG: dirs.config, SKUA_AMBIENT_CONFIG: dirs.ambient, COMPOSE_PROFILES: profiles,
  };
  if (base) { vars.SKUA_NODE_IMAGE = base.slim; vars.SKUA_NODE_BUILD_IMAGE = base.build; }
  return engineEnv(o.engine, vars);
}

const SOURCE_DIRS = { config: path.join(CONTAINERS_DIR, 'compose', 'istio'), ambient: path.join(CONTAINERS_DIR, 'compose', 'istio-ambient') };

/** compose.yaml's images (both profiles), by the name they get with tag `tag`. */
export const imageNames = (tag: string): string[] => ['proxy', 'controlplane', 'demo-apps', 'ztunnel'].map((n) => `skua/${n}:${tag}`);

/**
 * Builds compose.yaml's images (imageNames) tagged `o.tag`, on the stand-in base when asked; returns
 * them with the ids of the images this build added (its intermediate stages), for removeImages.
 */
export async function buildImages(o: MeshOptions): Promise<string[]> {
  const before = await imageIds(o.engine);
  const base = o.standin ? await ensureStandinImages(o.log) : undefined;
  o.log?.(`building images (tag ${o.tag})`);
  const { cmd, args } = composeArgv(o);
  // niced: the build is the heaviest part, and the other test files share the machine's cores. Every
  // profile's images (the ambient profile's ztunnel service builds skua/ztunnel), whichever runs later.
  const built = await run('nice', ['-n', '10', cmd, ...args, 'build'], { env: composeEnv(o, SOURCE_DIRS, 'ambient', base), timeoutMs: 15 * 60_000 });
  // The names first: a cached build may add no new id at all.
  const added = [...imageNames(o.tag), ...[...await imageIds(o.engine)].filter((id) => !before.has(id))];
  if (built.code !== 0) {
    await removeImages(o.engine, added);
    throw new Error(`image build failed:\n${built.stdout.slice(-3000)}\n${built.stderr.slice(-3000)}`);
  }
  return added;
}

/** Starts the mesh from images buildImages made; on failure takes down what started and rethrows. */
export async function meshUp(o: MeshOptions): Promise<ComposeMesh> {
  const configDir = o.configDir ?? mkdtempSync(path.join(tmpdir(), 'skua-mesh-config-'));
  if (!o.configDir) cpSync(SOURCE_DIRS.config, configDir, { recursive: true });
  const ambientConfigDir = mkdtempSync(path.join(tmpdir(), 'skua-mesh-ambient-'));
  cpSync(SOURCE_DIRS.ambient, ambientConfigDir, { recursive: true });
  const env = composeEnv(o, { config: configDir, ambient: ambientConfigDir }, o.profile === 'ambient' ? 'ambient' : '');
  const { cmd, args } = composeArgv(o);
  const mesh: ComposeMesh = {
    opts: o, configDir, ambientConfigDir,
    compose: (a, ro = {}) => run(cmd, [...args, ...a], { env, timeoutMs: 15 * 60_000, ...ro }),
    container: (service) => (o.engine === 'podman' ? `${o.project}_${service}_1` : `${o.project}-${service}-1`),
    nodeIn: (service, script) => run(o.engine, ['exec', mesh.container(service), 'node', '-e', script], { env, timeoutMs: 60_000 }),
  };
  o.log?.('starting the mesh');
  // --no-build: a missing image is an error here, never a silent build on other base images.
  const up = await mesh.compose(['up', '-d', '--no-build']);
  if (up.code !== 0) {
    await meshDown(mesh);
    throw new Error(`compose up failed:\n${up.stdout.slice(-3000)}\n${up.stderr.slice(-3000)}`);
  }
  const names = await run(o.engine, ['ps', '-a', '--filter', `label=com.docker.compose.project=${o.project}`, '--format', '{{.Names}}'], { env });
  const services = names.stdout.split('\n').filter(Boolean).map((n) => n.slice(o.project.length + 1).replace(/[_-]1$/, '')).sort();
  o.log?.(`${services.length} containers (profile ${o.profile ?? 'default'}): ${services.join(' ')}`);
  return mesh;
}

/** Removes images by name or id, each that still exists (removing a name can take an id with it); returns what went wrong. */
export async function removeImages(engine: EngineName, refs: readonly string[]): Promise<string[]> {
  const env = engineEnv(engine);
  const problems: string[] = [];
  for (const ref of refs) {
    if ((await run(engine, ['image', 'inspect', '--format', '{{.Id}}', ref], { env })).code !== 0) continue;
    const r = await run(engine, ['rmi', '-f', ref], { env, timeoutMs: 120_000 });
    if (r.code !== 0 && !/image not known|No such image/.test(r.stderr)) problems.push(`rmi ${ref}: ${r.stderr.trim().slice(-300)}`);
  }
  return problems;
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

/**
 * The newest line of a service's log that `match` accepts, waiting up to `withinMs` for it: ztunnel writes its
 * access log in batches (every 100 ms), so a line for a connection just made may not be out yet.
 */
export async function logLine(mesh: ComposeMesh, service: string, match: (line: string) => boolean, withinMs = 3000): Promise<string | undefined> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const line = (await logsOf(mesh, service)).split('\n').reverse().find(match);
    if (line !== undefined || Date.now() >= deadline) return line;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Containers, volumes, the network, the config copy (not the images: removeImages). Never throws. */
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
  if (!mesh.opts.configDir) rmSync(mesh.configDir, { recursive: true, force: true });
  rmSync(mesh.ambientConfigDir, { recursive: true, force: true });
  return problems;
}

