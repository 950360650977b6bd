/**
 * `skua-controlplane compose-kube`: what Kubernetes gives a mesh that compose does not, for
 * compose.yaml. It stands in for the API server and the kubelets:
 * - pod status: Istio YAML is read from --manifests (the user's directory, read-only) and copied to
 *   --out (the directory `skua-controlplane --istio` watches), with `status.podIP` filled in for each
 *   Pod that names its container by `spec.hostname` (a compose service name, resolved by DNS; again
 *   every --interval, since a restarted container gets a new address). A Pod not resolvable yet is
 *   left out until it is, as Kubernetes has no endpoint for a pod without an IP;
 * - projected volumes: each Pod with a directory under --pods gets its service account token there
 *   (istio-token, audience istio-ca, renewed at half its lifetime) and --root-cert-dir gets the
 *   mesh's root certificate (the istio-ca-root-cert ConfigMap), both from the CA's --state-dir.
 * Everything is written to a temporary name and renamed, and only when it changed. Files of --out
 * that it did not write (listed in --out/.compose-kube-files) are left alone, so two compose-kubes can
 * share one tree, each in its own subdirectory.
 */
import { lookup } from 'node:dns/promises';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { logger, parseGoDuration, setLogFormat } from '@skua/proxy/core';
import { TokenAuthority } from '../ca/token.ts';
import { configFiles } from '../istio/source.ts';
import { CONTROLPLANE_LOG_FORMAT } from '../cli-help.ts';

const log = logger('main');

export const COMPOSE_KUBE_HELP = `usage: skua-controlplane compose-kube --manifests DIR --state-dir DIR [--out DIR] [--pods DIR] [--root-cert-dir DIR]
                                    [--interval 2s] [--token-ttl 24h] [--once]

Stands in for Kubernetes under compose (compose.yaml runs it): copies the Istio YAML in --manifests to
--out, filling each Pod's status.podIP from its spec.hostname (a compose service name, by DNS), and
writes each Pod's service-account token to --pods/<pod name>/istio-token and the CA's root
certificate to --root-cert-dir/root-cert.pem (the CA's --state-dir must be readable here).

  --manifests DIR       Istio and Kubernetes YAML, as for skua-controlplane --istio (read only)
  --out DIR             where the control plane's --istio directory is (without it: tokens and the root
                        certificate only, for pods whose status.podIP is given), or a subdirectory of
                        it; only files this compose-kube wrote there are ever removed
  --state-dir DIR       the control plane's --state-dir (token-key.pem, root-cert.pem)
  --pods DIR            one directory per Pod (metadata.name), each the pod's token volume
  --root-cert-dir DIR   the istio-ca-root-cert volume
  --interval D          how often to look again (default 2s)
  --token-ttl D         token lifetime (default 24h; renewed at half)
  --once                one pass, then exit (0 when every Pod resolved)`;

interface Options {
  readonly manifests: string;
  /** Where the resolved copy goes; absent: only tokens and the root certificate (pods with fixed IPs). */
  readonly out?: string;
  readonly stateDir: string;
  readonly pods?: string;
  readonly rootCertDir?: string;
  readonly tokenTtlSec: number;
}

/** Writes `text` to `file` (temporary name, then rename) unless it already holds exactly that. */
function writeIfChanged(file: string, text: string, mode = 0o644): boolean {
  try { if (readFileSync(file, 'utf8') === text) return false; } catch { /* new */ }
  mkdirSync(dirname(file), { recursive: true });
  const tmp = join(dirname(file), `.${process.pid}.tmp`);
  writeFileSync(tmp, text, { mode });
  renameSync(tmp, file);
  return true;
}

interface PodRef { readonly name: string; readonly namespace: string; readonly serviceAccount: string }

/** One manifest file with the pods' addresses filled in; pods that do not resolve are dropped. */
async function resolveFile(text: string, unresolved: string[], pods: PodRef[]): Promise<string> {
  const docs = parseAllDocuments(text);
  const out: string[] = [];
  for (const doc of docs) {
    const obj = doc.toJS() as { kind?: string; metadata?: { name?: string; namespace?: string }; spec?: { hostname?: string; serviceAccountName?: string }; status?: { podIP?: string } } | null;
    if (obj?.kind === 'Pod' && obj.metadata?.name) {
      pods.push({ name: obj.metadata.name, namespace: obj.metadata.namespace ?? 'default', serviceAccount: obj.spec?.serviceAccountName ?? 'default' });
      const host = obj.spec?.hostname;
      if (host && !obj.status?.podIP) {
        const ip = await lookup(host, { family: 4 }).then((a) => a.address, () => undefined);
        if (!ip) { unresolved.push(`${obj.metadata.name} (${host})`); continue; }
        doc.setIn(['status', 'podIP'], ip);
        doc.deleteIn(['spec', 'hostname']);
      }
    }
    out.push(doc.toString().replace(/^---\n/, ''));
  }
  return out.join('---\n');
}

/** Token and root certificate; false while the CA has not made its keys yet. */
function project(o: Options, pods: readonly PodRef[], now: number): boolean {
  const keyFile = join(o.stateDir, 'token-key.pem');
  const rootFile = join(o.stateDir, 'root-cert.pem');
  if (!existsSync(keyFile) || !existsSync(rootFile)) return false;
  if (o.rootCertDir && writeIfChanged(join(o.rootCertDir, 'root-cert.pem'), readFileSync(rootFile, 'utf8'))) log.info(`root certificate written to ${o.rootCertDir}`);
  if (!o.pods) return true;
  const tokens = TokenAuthority.create(o.stateDir);
  for (const p of pods) {
    const dir = join(o.pods, p.name);
    if (!existsSync(dir)) continue;
    const file = join(dir, 'istio-token');
    const age = statSync(file, { throwIfNoEntry: false });
    if (age && now - age.mtimeMs < (o.tokenTtlSec * 1000) / 2) continue;
    writeIfChanged(file, tokens.issue({ namespace: p.namespace, serviceAccount: p.serviceAccount }, o.tokenTtlSec));
    log.info(`token for ${p.namespace}/${p.serviceAccount} written for pod ${p.name}`);
  }
  return true;
}

/** In --out: the files this compose-kube wrote there (a dot file: the control plane skips it). */
const OWN_FILES = '.compose-kube-files';

function ownFiles(index: string): string[] {
  try {
    const v = JSON.parse(readFileSync(index, 'utf8')) as unknown;
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && !x.startsWith('/') && !x.split('/').includes('..')) : [];
  } catch { return []; }
}

let lastReport = '';

/** One pass; returns the pods still waiting for an address. */
export async function syncOnce(o: Options): Promise<string[]> {
  const unresolved: string[] = [];
  const pods: PodRef[] = [];
  const written = new Set<string>();
  for (const file of configFiles(o.manifests)) {
    const rel = relative(o.manifests, file);
    written.add(rel);
    const text = await resolveFile(readFileSync(file, 'utf8'), unresolved, pods);
    if (o.out && writeIfChanged(join(o.out, rel), text)) log.info(`config: ${rel} updated`);
  }
  if (o.out) {
    // Only files this --manifests put there go away: another compose-kube (compose.yaml's ambient
    // profile) or `skua-controlplane apply` may keep files in the same tree.
    const index = join(o.out, OWN_FILES);
    for (const rel of ownFiles(index)) {
      if (!written.has(rel)) { rmSync(join(o.out, rel), { force: true }); log.info(`config: ${rel} removed`); }
    }
    writeIfChanged(index, `${JSON.stringify([...written].sort())}\n`);
  }
  const caReady = project(o, pods, Date.now());
  const report = [unresolved.length ? `waiting for pod addresses: ${unresolved.join(', ')}` : '', caReady ? '' : `waiting for the CA's keys in ${o.stateDir}`].filter(Boolean).join('; ');
  if (report !== lastReport) { if (report) log.info(report); lastReport = report; }
  return caReady ? unresolved : [...unresolved, 'CA'];
}

export async function runComposeKube(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv], strict: true,
    options: {
      manifests: { type: 'string' }, out: { type: 'string' }, 'state-dir': { type: 'string' }, pods: { type: 'string' },
      'root-cert-dir': { type: 'string' }, interval: { type: 'string', default: '2s' }, 'token-ttl': { type: 'string', default: '24h' },
      once: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) { process.stdout.write(`${COMPOSE_KUBE_HELP}\n`); return 0; }
  setLogFormat(CONTROLPLANE_LOG_FORMAT);
  if (!values.manifests || !values['state-dir']) {
    process.stderr.write(`error: compose-kube needs --manifests and --state-dir\n${COMPOSE_KUBE_HELP}\n`);
    return 2;
  }
  if (!existsSync(values.manifests)) { process.stderr.write(`error: --manifests ${values.manifests}: no such directory\n`); return 1; }
  const o: Options = {
    manifests: values.manifests, out: values.out, stateDir: values['state-dir'], pods: values.pods, rootCertDir: values['root-cert-dir'],
    tokenTtlSec: parseGoDuration(values['token-ttl']!, '--token-ttl'),
  };
  const intervalMs = parseGoDuration(values.interval!, '--interval') * 1000;
  log.info(`compose-kube: ${o.manifests}${o.out ? ` → ${o.out}` : ''}${o.pods ? `, tokens in ${o.pods}` : ''}`);
  if (values.once) return (await syncOnce(o)).length ? 1 : 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = async (): Promise<void> => {
    try { await syncOnce(o); } catch (err) { log.error(`compose-kube: ${(err as Error).message}`); }
    timer = setTimeout(() => void tick(), intervalMs);
  };
  const stop = (): void => { clearTimeout(timer); process.exit(0); };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await tick();
  return -1;
}
