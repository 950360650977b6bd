/**
 * `skua-ztunnel cni-standin`: the CNI stand-in as a process, for the demo and compose — pods named
 * on the command line (their namespaces already exist) and, with --plugin-socket, pods announced
 * while it runs by `skua-ztunnel cni-plugin` from inside each pod's namespace; optionally with
 * ambient's in-pod rules applied first; told to whichever ztunnel connects to the ZDS socket.
 */
import { closeSync, existsSync, fstatSync } from 'node:fs';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { CNI_PLUGIN_HELP, CNI_STANDIN_HELP } from '../help.ts';
import { parseGoDuration } from '../core.ts';
import type { WorkloadInfo } from '../inpod/zds-messages.ts';
import { applyInpodRules, inpodRulesPresent } from './pods.ts';
import { PluginServer, registerPod } from './plugin.ts';
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

function parse<T>(args: readonly string[], options: ParseArgsOptionsConfig): T {
  try {
    return parseArgs({ args: [...args], strict: true, options }).values as T;
  } catch (e) {
    throw new CniUsageError((e as Error).message);
  }
}

/** Pods from `cni-plugin`: each keeps its namespace's fd open here (ZDS sends it again on each ztunnel connection). */
class PluginPods {
  private readonly byUid = new Map<string, { fd: number; ino: number }>();
  private readonly cni: CniStandIn;
  private readonly applyRules: boolean;

  constructor(cni: CniStandIn, applyRules: boolean) {
    this.cni = cni;
    this.applyRules = applyRules;
  }

  /** '' when the pod is set up (or will be, in the snapshot of the ztunnel that connects next), else why not. */
  async add(info: WorkloadInfo, fd: number): Promise<string> {
    const uid = `${info.namespace}/${info.name}`;
    const ino = fstatSync(fd).ino;
    const known = this.byUid.get(uid);
    // The same sandbox again (the plugin ran twice): nothing to do.
    if (known?.ino === ino) { closeSync(fd); return ''; }
    const netnsPath = `/proc/${process.pid}/fd/${fd}`;
    try {
      // A stand-in restarted since the rules went in finds them there already.
      if (this.applyRules && !inpodRulesPresent(netnsPath)) applyInpodRules(netnsPath);
    } catch (e) {
      closeSync(fd);
      return `in-pod rules for ${uid}: ${(e as Error).message.trim()}`;
    }
    this.byUid.set(uid, { fd, ino });
    const ack = await this.cni.addPod({ uid, info, netnsPath });
    if (known) closeSync(known.fd);
    process.stdout.write(`cni-standin: pod ${uid} (sa ${info.serviceAccount}, netns inode ${ino}) added${ack === undefined ? '; no ztunnel connected yet' : ''}\n`);
    return ack ? `ztunnel refused ${uid}: ${ack}` : '';
  }
}

/** Runs until SIGTERM/SIGINT; resolves to the exit code. */
export async function runCniStandIn(args: readonly string[]): Promise<number> {
  const values = parse<{ socket?: string; pod?: string[]; 'apply-rules'?: boolean; 'plugin-socket'?: string; help?: boolean }>(args, {
    socket: { type: 'string' }, pod: { type: 'string', multiple: true }, 'apply-rules': { type: 'boolean' }, 'plugin-socket': { type: 'string' }, help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(CNI_STANDIN_HELP); return 0; }
  const pods = (values.pod ?? []).map(parsePodSpec);
  if (pods.length === 0 && !values['plugin-socket']) throw new CniUsageError('give at least one --pod, or --plugin-socket');
  if (values['apply-rules']) for (const p of pods) applyInpodRules(p.netnsPath.startsWith('/var/run/netns/') ? p.netnsPath.slice(15) : p.netnsPath);
  const cni = new CniStandIn(values.socket ?? '/var/run/ztunnel/ztunnel.sock');
  cni.onAck = (a) => process.stdout.write(`ack ${a.request.kind}${'uid' in a.request ? ` ${a.request.uid}` : ''}: ${a.error || 'ok'}\n`);
  cni.start();
  for (const p of pods) await cni.addPod(p);
  let plugin: PluginServer | undefined;
  if (values['plugin-socket']) {
    const fromPlugin = new PluginPods(cni, values['apply-rules'] === true);
    plugin = new PluginServer(values['plugin-socket'], (info, fd) => fromPlugin.add(info, fd));
  }
  process.stdout.write(`cni-standin: serving ZDS on ${cni.path} for ${pods.length ? pods.map((p) => p.uid).join(', ') : 'no pods yet'}${plugin ? `; pods from cni-plugin on ${plugin.path}` : ''}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  plugin?.close();
  cni.close();
  return 0;
}

/** `skua-ztunnel cni-plugin`: announces the pod this process's network namespace belongs to; resolves to the exit code. */
export async function runCniPlugin(args: readonly string[]): Promise<number> {
  const values = parse<{ 'plugin-socket'?: string; pod?: string; netns?: string; timeout?: string; help?: boolean }>(args, {
    'plugin-socket': { type: 'string' }, pod: { type: 'string' }, netns: { type: 'string' }, timeout: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(CNI_PLUGIN_HELP); return 0; }
  const m = /^([^/=\s]+)\/([^/=\s]+)\/([^/=\s]+)$/.exec(values.pod ?? '');
  if (!m) throw new CniUsageError(values.pod === undefined ? 'give --pod namespace/name/service-account' : `--pod ${JSON.stringify(values.pod)}: expected namespace/name/service-account`);
  let timeoutSec: number;
  try { timeoutSec = parseGoDuration(values.timeout ?? '60s', '--timeout'); } catch (e) { throw new CniUsageError((e as Error).message); }
  const socket = values['plugin-socket'] ?? '/var/run/istio-cni/plugin.sock';
  const info = { namespace: m[1], name: m[2], serviceAccount: m[3] };
  await registerPod(socket, info, timeoutSec * 1000, values.netns ?? '/proc/self/ns/net');
  process.stdout.write(`cni-plugin: pod ${info.namespace}/${info.name} added by the CNI stand-in at ${socket}\n`);
  return 0;
}
