/**
 * Pod network namespaces for tests and the demo, as a CNI would make them: a bridge per node
 * (in the node's namespace, or the host's), and per pod a namespace with a veth pair to that
 * bridge, an address, a default route through the bridge, and ambient's in-pod rules inside.
 * Set-up code (shells out to `ip` and `iptables-restore`), never on a data path.
 */
import { execFileSync } from 'node:child_process';
import { INPOD_ROUTES, inpodIptables, type InpodRuleOptions } from './inpod-rules.ts';

export interface NodeNetwork {
  /** The node's namespace ('' = this one). */
  readonly netns: string;
  readonly bridge: string;
  /** The bridge address, the pods' gateway (e.g. 10.77.1.1). */
  readonly gateway: string;
  readonly prefixLength: number;
}

export interface PodSpec {
  /** Namespace name (also used to derive interface names: keep it short). */
  readonly name: string;
  readonly ip: string;
  /** Apply the in-pod rules (false: a pod outside the mesh). */
  readonly ambient?: boolean;
  readonly rules?: InpodRuleOptions;
}

export function run(cmd: string, args: readonly string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** Runs `cmd` in a namespace given by name (`ip netns`), by path (`/proc/<pid>/ns/net`: nsenter), or here (''). */
function inNs(netns: string, cmd: string, args: readonly string[], input?: string): string {
  if (netns.startsWith('/')) return run('nsenter', [`--net=${netns}`, cmd, ...args], input);
  return netns ? run('ip', ['netns', 'exec', netns, cmd, ...args], input) : run(cmd, args, input);
}

function ipCmd(netns: string, args: readonly string[]): string {
  return netns.startsWith('/') ? inNs(netns, 'ip', args) : run('ip', netns ? ['-n', netns, ...args] : [...args]);
}

export function netnsExists(name: string): boolean {
  return run('ip', ['netns', 'list']).split('\n').some((l) => l.split(' ')[0] === name);
}

/** A node namespace (optional) with a bridge for its pods; forwarding on. */
export function createNode(n: NodeNetwork): void {
  if (n.netns && !netnsExists(n.netns)) {
    run('ip', ['netns', 'add', n.netns]);
    ipCmd(n.netns, ['link', 'set', 'lo', 'up']);
  }
  ipCmd(n.netns, ['link', 'add', n.bridge, 'type', 'bridge']);
  ipCmd(n.netns, ['addr', 'add', `${n.gateway}/${n.prefixLength}`, 'dev', n.bridge]);
  ipCmd(n.netns, ['link', 'set', n.bridge, 'up']);
  inNs(n.netns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
}

export function deleteNode(n: NodeNetwork): void {
  try { ipCmd(n.netns, ['link', 'del', n.bridge]); } catch { /* gone */ }
  if (n.netns) try { run('ip', ['netns', 'del', n.netns]); } catch { /* gone */ }
}

function vethName(pod: string): string {
  return `v${pod.replace(/[^a-zA-Z0-9]/g, '').slice(-12)}`;
}

/** A pod namespace attached to the node's bridge; returns the path of its namespace. */
export function createPod(n: NodeNetwork, p: PodSpec): string {
  run('ip', ['netns', 'add', p.name]);
  const host = vethName(p.name);
  ipCmd(n.netns, ['link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.name]);
  ipCmd(n.netns, ['link', 'set', host, 'master', n.bridge]);
  ipCmd(n.netns, ['link', 'set', host, 'up']);
  ipCmd(p.name, ['link', 'set', 'lo', 'up']);
  ipCmd(p.name, ['addr', 'add', `${p.ip}/${n.prefixLength}`, 'dev', 'eth0']);
  ipCmd(p.name, ['link', 'set', 'eth0', 'up']);
  ipCmd(p.name, ['route', 'add', 'default', 'via', n.gateway]);
  if (p.ambient !== false) applyInpodRules(p.name, p.rules);
  return `/var/run/netns/${p.name}`;
}

/** Ambient's in-pod rules and routes inside `netns` (a name under /var/run/netns or a path). */
export function applyInpodRules(netns: string, rules?: InpodRuleOptions): void {
  inNs(netns, 'iptables-restore', ['--wait', '10', '--noflush'], inpodIptables(rules));
  for (const r of INPOD_ROUTES) ipCmd(netns, r);
}

/** Whether ambient's in-pod rules are in `netns` already (its nat table has ISTIO_PRERT). */
export function inpodRulesPresent(netns: string): boolean {
  return /^:ISTIO_PRERT /m.test(inNs(netns, 'iptables-save', ['-t', 'nat']));
}

export function deletePod(name: string): void {
  try { run('ip', ['netns', 'del', name]); } catch { /* gone */ }
}
