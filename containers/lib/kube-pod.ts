/**
 * containers/kube/bookinfo-pod.yaml under `podman kube play`: an Istio-injected productpage pod
 * (istio-init, istio-proxy, the app) and the istiod pod it talks to, on podman's default network at
 * the fixed addresses the YAML names. For test/containers-mesh.test.ts; the YAML's header shows the
 * same by hand.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CONTAINERS_DIR, engineEnv, run, type RunResult } from './engine.ts';

export const KUBE_POD_FILE = path.join(CONTAINERS_DIR, 'kube', 'bookinfo-pod.yaml');
export const ISTIOD_IP = '10.88.77.2';
export const PRODUCTPAGE_IP = '10.88.77.10';
const PODS = ['istiod', 'productpage-v1'];
/** The PersistentVolumeClaims and the ConfigMap, which kube play turns into named volumes. */
const VOLUMES = ['istio-config', 'istiod-ca', 'istio-ca-root-cert', 'productpage-v1-istio-token'];

export interface KubePod {
  /** `podman exec <pod>-<container> args...` */
  exec(container: string, args: readonly string[]): Promise<RunResult>;
  /** The pod's network namespace holder (its infra container's pid on the host). */
  infraPid(): Promise<number>;
}

const env = (): Record<string, string> => engineEnv('podman');

/** Plays the YAML with the images tagged `tag`; refuses to touch pods or volumes of the same names. */
export async function kubePlay(tag: string): Promise<KubePod> {
  for (const pod of PODS) {
    if ((await run('podman', ['pod', 'exists', pod], { env: env() })).code === 0) throw new Error(`a pod named ${pod} exists already; remove it first`);
  }
  for (const vol of VOLUMES) {
    if ((await run('podman', ['volume', 'exists', vol], { env: env() })).code === 0) throw new Error(`a volume named ${vol} exists already; remove it first`);
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-kube-'));
  const file = path.join(dir, 'pod.yaml');
  writeFileSync(file, readFileSync(KUBE_POD_FILE, 'utf8').replace(/(image: skua\/[a-z-]+):dev$/gm, `$1:${tag}`));
  try {
    const r = await run('podman', ['kube', 'play', '--network', 'podman', '--ip', ISTIOD_IP, '--ip', PRODUCTPAGE_IP, file], { env: env(), timeoutMs: 300_000 });
    if (r.code !== 0) {
      await kubeDown();
      throw new Error(`podman kube play failed: ${r.stderr.trim().slice(-1500)}`);
    }
  } finally { rmSync(dir, { recursive: true, force: true }); }
  return {
    exec: (container, args) => run('podman', ['exec', container, ...args], { env: env(), timeoutMs: 120_000 }),
    async infraPid() {
      const r = await run('podman', ['pod', 'inspect', 'productpage-v1', '--format', '{{.InfraContainerID}}'], { env: env() });
      const pid = await run('podman', ['inspect', r.stdout.trim(), '--format', '{{.State.Pid}}'], { env: env() });
      return Number(pid.stdout.trim());
    },
  };
}

/** Removes both pods and their volumes; returns what went wrong (and what is left). Never throws. */
export async function kubeDown(): Promise<string[]> {
  const problems: string[] = [];
  // Not `podman kube down`: 4.3 stops at the first pod it cannot find.
  for (const pod of PODS) {
    if ((await run('podman', ['pod', 'exists', pod], { env: env() })).code !== 0) continue;
    const r = await run('podman', ['pod', 'rm', '-f', '-t', '2', pod], { env: env(), timeoutMs: 120_000 });
    if (r.code !== 0) problems.push(`pod rm ${pod}: ${r.stderr.trim()}`);
  }
  for (const vol of VOLUMES) {
    if ((await run('podman', ['volume', 'exists', vol], { env: env() })).code !== 0) continue;
    const r = await run('podman', ['volume', 'rm', '-f', vol], { env: env() });
    if (r.code !== 0) problems.push(`volume rm ${vol}: ${r.stderr.trim()}`);
  }
  return problems;
}
