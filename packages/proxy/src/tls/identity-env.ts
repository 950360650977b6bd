/**
 * The secret manager's settings from pilot-agent's environment: CA_ADDR,
 * CA_ROOT_CA, TRUST_DOMAIN, POD_NAMESPACE, SERVICE_ACCOUNT, SECRET_TTL,
 * SECRET_GRACE_PERIOD_RATIO(_JITTER), OUTPUT_CERTS, PROV_CERT, FILE_MOUNTED_CERTS,
 * ISTIO_META_CLUSTER_ID. Paths are istio-agent's, relative to the working
 * directory as istio-agent's are (it runs in /).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { spiffeUri } from './spiffe.ts';
import type { SecretManagerOptions } from './secret-manager.ts';

export const TOKEN_PATH = './var/run/secrets/tokens/istio-token';
export const CA_ROOT_PATH = './var/run/secrets/istio/root-cert.pem';
export const MOUNTED_CERTS_DIR = './etc/certs';

export class EnvError extends Error {}

/** undefined when the environment asks for no workload certificates (no CA_ADDR, no FILE_MOUNTED_CERTS). */
export function secretManagerOptionsFromEnv(env: NodeJS.ProcessEnv, cwd = process.cwd()): SecretManagerOptions | undefined {
  const caAddr = env.CA_ADDR ?? '';
  const fileMounted = (env.FILE_MOUNTED_CERTS ?? '').toLowerCase() === 'true';
  if (!caAddr && !fileMounted) return undefined;
  const identity = spiffeUri({
    trustDomain: env.TRUST_DOMAIN || 'cluster.local',
    namespace: env.POD_NAMESPACE || 'default',
    serviceAccount: env.SERVICE_ACCOUNT || 'default',
  });
  const ttlSec = env.SECRET_TTL ? parseGoDuration(env.SECRET_TTL, 'SECRET_TTL') : 24 * 3600;
  const graceRatio = env.SECRET_GRACE_PERIOD_RATIO ? ratio(env.SECRET_GRACE_PERIOD_RATIO, 'SECRET_GRACE_PERIOD_RATIO') : 0.5;
  const graceJitter = env.SECRET_GRACE_PERIOD_RATIO_JITTER ? ratio(env.SECRET_GRACE_PERIOD_RATIO_JITTER, 'SECRET_GRACE_PERIOD_RATIO_JITTER') : 0.01;
  const outputDir = env.OUTPUT_CERTS ? resolve(cwd, env.OUTPUT_CERTS) : undefined;
  if (fileMounted) return { identity, ttlSec, graceRatio, graceJitter, filesDir: resolve(cwd, MOUNTED_CERTS_DIR), outputDir };
  const rootFile = env.CA_ROOT_CA ? resolve(cwd, env.CA_ROOT_CA) : resolve(cwd, CA_ROOT_PATH);
  if (env.CA_ROOT_CA && !existsSync(rootFile)) throw new EnvError(`CA_ROOT_CA: ${rootFile} does not exist`);
  return {
    identity, ttlSec, graceRatio, graceJitter, outputDir,
    ca: {
      client: {
        address: caAddr, clusterId: env.ISTIO_META_CLUSTER_ID || 'Kubernetes',
        // Read at each request, not once: the istio-ca-root-cert ConfigMap's file may appear after the agent
        // started (podman kube play, a slow kubelet) or be replaced; read once, a missing file meant the
        // system roots — and a CA never trusted — for the life of the process.
        get rootCertPem(): string | undefined { return existsSync(rootFile) ? readFileSync(rootFile, 'utf8') : undefined; },
      },
      tokenFile: resolve(cwd, TOKEN_PATH),
      provCertDir: env.PROV_CERT ? resolve(cwd, env.PROV_CERT) : undefined,
    },
  };
}

const UNIT_SEC: Record<string, number> = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/** Go's time.ParseDuration ("24h", "1h30m", "90s", "500ms"), in seconds. */
export function parseGoDuration(text: string, name: string): number {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0, matched = 0;
  for (const m of text.trim().matchAll(re)) { total += Number(m[1]) * UNIT_SEC[m[2]]; matched += m[0].length; }
  if (matched === 0 || matched !== text.trim().length || total <= 0) throw new EnvError(`${name}: expected a duration like 24h or 90s, got ${JSON.stringify(text)}`);
  return total;
}

function ratio(text: string, name: string): number {
  const v = Number(text);
  if (!Number.isFinite(v) || v < 0 || v > 1) throw new EnvError(`${name}: expected a number from 0 to 1, got ${JSON.stringify(text)}`);
  return v;
}
