// Pods in network namespaces for end-to-end tests (root only): an "infra" namespace with a
// bridge (the node / the network, where the control plane, a resolver and outside servers run)
// and one namespace per pod with its eth0 on that bridge, a default route through it and its own
// resolv.conf (`ip netns exec` bind-mounts /etc/netns/<ns>/resolv.conf). Every process is started
// through `ip netns exec`, optionally under another uid (setpriv), and stopped by PID; teardown
// also kills whatever is left in the namespaces and deletes them.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';

export interface PodProcess {
  readonly child: ChildProcess;
  output(): string;
  /** SIGINT/SIGTERM by PID (tcpdump flushes on SIGINT); resolves on exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface RunOptions {
  readonly uid?: number;
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly input?: string;
  readonly timeoutMs?: number;
}

const asUser = (uid: number | undefined): string[] => (uid === undefined ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups']);

export class PodNet {
  readonly infra: string;
  readonly pods = new Map<string, { ns: string; ip: string; veth: string }>();
  private readonly procs: PodProcess[] = [];
  private readonly prefix: string;
  readonly subnet: string;

  /** `subnet` like "10.77.0": the bridge is .1; pods get the addresses they are given. */
  constructor(prefix: string, subnet: string) {
    this.prefix = prefix;
    this.subnet = subnet;
    this.infra = `${prefix}-infra`;
    execFileSync('ip', ['netns', 'add', this.infra]);
    this.sh(this.infra, `ip link set lo up && ip link add br0 type bridge && ip addr add ${subnet}.1/24 dev br0 && ip link set br0 up`);
  }

  get gateway(): string {
    return `${this.subnet}.1`;
  }

  /** A pod namespace with eth0 at `ip`, a default route and a resolv.conf. */
  addPod(name: string, ip: string, resolvConf: string): string {
    const ns = `${this.prefix}-${name}`;
    const veth = `v-${name}`.slice(0, 15);
    execFileSync('ip', ['netns', 'add', ns]);
    mkdirSync(`/etc/netns/${ns}`, { recursive: true });
    writeFileSync(`/etc/netns/${ns}/resolv.conf`, resolvConf);
    this.sh(this.infra, `ip link add ${veth} type veth peer name eth0 netns ${ns} && ip link set ${veth} master br0 && ip link set ${veth} up`);
    this.sh(ns, `ip link set lo up && ip addr add ${ip}/24 dev eth0 && ip link set eth0 up && ip route add default via ${this.gateway}`);
    this.pods.set(name, { ns, ip, veth });
    return ns;
  }

  ns(pod: string): string {
    const p = this.pods.get(pod);
    if (!p) throw new Error(`no pod ${pod}`);
    return p.ns;
  }

  sh(ns: string, script: string): string {
    return execFileSync('ip', ['netns', 'exec', ns, 'sh', '-c', script], { encoding: 'utf8' });
  }

  /** Runs a command to completion in a namespace. */
  run(ns: string, args: readonly string[], o: RunOptions = {}): { code: number; stdout: string; stderr: string } {
    const r = spawnSync('ip', ['netns', 'exec', ns, ...asUser(o.uid), ...args], {
      encoding: 'utf8', cwd: o.cwd, env: o.env ? { ...process.env, ...o.env } : process.env, input: o.input, timeout: o.timeoutMs ?? 20_000,
    });
    return { code: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  }

  /** Starts a long-running process in a namespace. */
  start(ns: string, args: readonly string[], o: RunOptions = {}): PodProcess {
    const child = spawn('ip', ['netns', 'exec', ns, ...asUser(o.uid), ...args], {
      cwd: o.cwd, env: o.env ? { PATH: process.env.PATH ?? '', ...o.env } : process.env, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const keep = (d: Buffer): void => { out += d.toString(); if (out.length > 4 << 20) out = out.slice(-(2 << 20)); if (process.env.SKUA_TEST_DEBUG) process.stderr.write(d); };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const p: PodProcess = {
      child, output: () => out,
      async stop(signal: NodeJS.Signals = 'SIGTERM') {
        if (child.exitCode !== null || child.signalCode !== null) return;
        // `ip netns exec` execs the command (and setpriv execs too): the PID is the process itself.
        child.kill(signal);
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      },
    };
    this.procs.push(p);
    return p;
  }

  async destroy(): Promise<void> {
    for (const p of this.procs) await p.stop('SIGKILL').catch(() => undefined);
    const all = [this.infra, ...[...this.pods.values()].map((p) => p.ns)];
    for (const ns of all) {
      try { execFileSync('sh', ['-c', `ip netns pids ${ns} | xargs -r kill -9`]); } catch { /* none left */ }
    }
    for (const ns of all) {
      try { execFileSync('ip', ['netns', 'delete', ns]); } catch { /* not created */ }
      rmSync(`/etc/netns/${ns}`, { recursive: true, force: true });
    }
  }
}

/** Polls until `check` returns a value (or true); throws with `what` after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try { const v = await check(); if (v !== undefined && v !== false) return v; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
