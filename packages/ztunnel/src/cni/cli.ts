/**
 * `skua-ztunnel cni-standin`: the CNI stand-in as a process, for the demo and compose — pods named
 * on the command line (their namespaces already exist), optionally with ambient's in-pod rules
 * applied first, told to whichever ztunnel connects to the ZDS socket.
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { CNI_STANDIN_HELP } from '../help.ts';
import { applyInpodRules } from './pods.ts';
import { CniStandIn, type StandInPod } from './standin.ts';

export class CniUsageError extends Error {}

/** `namespace/name/service-account=NETNS` → a pod (uid namespace/name; NETNS a name or a path). */
export function parsePodSpec(spec: string): StandInPod {
  const m = /^([^/=\s]+)\/([^/=\s]+)\/([^/=\s]+)=(\S+)$/.exec(spec);
  if (!m) throw new CniUsageError(`--pod ${JSON.stringify(spec)}: expected namespace/name/service-account=NETNS`);
  const [, namespace, name, serviceAccount, netns] = m;
  const netnsPath = netns.startsWith('/') ? netns : `/var/run/netns/${netns}`;
  if (!existsSync(netnsPath)) throw new CniUsageError(`--pod ${spec}: no network namespace at ${netnsPath}`);
  return { uid: `${namespace}/${name}`, info: { name, namespace, serviceAccount }, netnsPath };
}

/** Runs until SIGTERM/SIGINT; resolves to the exit code. */
export async function runCniStandIn(args: readonly string[]): Promise<number> {
  let values: { socket?: string; pod?: string[]; 'apply-rules'?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...args], strict: true,
      options: { socket: { type: 'string' }, pod: { type: 'string', multiple: true }, 'apply-rules': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (e) {
    throw new CniUsageError((e as Error).message);
  }
  if (values.help) { process.stdout.write(CNI_STANDIN_HELP); return 0; }
  const pods = (values.pod ?? []).map(parsePodSpec);
  if (pods.length === 0) throw new CniUsageError('give at least one --pod');
  if (values['apply-rules']) for (const p of pods) applyInpodRules(p.netnsPath.startsWith('/var/run/netns/') ? p.netnsPath.slice(15) : p.netnsPath);
  const cni = new CniStandIn(values.socket ?? '/var/run/ztunnel/ztunnel.sock');
  cni.onAck = (a) => process.stdout.write(`ack ${a.request.kind}${'uid' in a.request ? ` ${a.request.uid}` : ''}: ${a.error || 'ok'}\n`);
  cni.start();
  for (const p of pods) await cni.addPod(p);
  process.stdout.write(`cni-standin: serving ZDS on ${cni.path} for ${pods.map((p) => p.uid).join(', ')}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  cni.close();
  return 0;
}
