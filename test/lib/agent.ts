// `skua-proxy proxy sidecar|router` (pilot-agent) as a real child process: a pod-like working
// directory, pilot-agent's environment (PROXY_CONFIG with free admin/status ports, the 15021 and
// 15090 listeners on free ports), stopped by PID (SIGKILL after a grace period) and its directory
// removed. `ready()` polls the readiness listener the way the kubelet does.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, proxyMain, type Json } from './proxy.ts';

export interface AgentPorts { readonly admin: number; readonly status: number; readonly envoyStatus: number; readonly envoyPrometheus: number }

export interface RunningAgent {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly dir: string;
  readonly ports: AgentPorts;
  /** Resolves with how the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** GET <path> on the status port (15020). */
  status(pathAndQuery: string, method?: string): Promise<{ status: number; body: string }>;
  /** Polls 15021's /healthz/ready until 200. */
  ready(timeoutMs?: number): Promise<void>;
  /** SIGTERM, SIGKILL after `graceMs`; removes the working directory. */
  stop(graceMs?: number): Promise<void>;
}

export interface AgentOptions {
  /** sidecar (default) or router. */
  readonly type?: 'sidecar' | 'router';
  /** The xDS server (plaintext, as istiod's 15010). */
  readonly xdsPort: number;
  /** Extra ProxyConfig fields (terminationDrainDuration, ...). */
  readonly proxyConfig?: Json;
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory (a workload's, with its token and root certificate); a fresh one by default. */
  readonly cwd?: string;
  readonly concurrency?: number;
  readonly podName?: string;
  readonly podIp?: string;
  readonly logLevel?: string;
  /** ProxyConfig.customConfigFile: this bootstrap (given the agent's ports) is served instead of a rendered one. */
  readonly customBootstrap?: (ports: AgentPorts) => Json;
}

const live = new Set<ChildProcess>();
process.once('exit', () => { for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); });

export async function startAgent(o: AgentOptions): Promise<RunningAgent> {
  const ownDir = o.cwd === undefined;
  const dir = o.cwd ?? mkdtempSync(path.join(tmpdir(), 'skua-agent-'));
  const ports: AgentPorts = { admin: await freePort(), status: await freePort(), envoyStatus: await freePort(), envoyPrometheus: await freePort() };
  const podName = o.podName ?? 'app-v1-5f9d';
  const custom = o.customBootstrap ? { customConfigFile: 'custom-bootstrap.json' } : {};
  if (o.customBootstrap) writeFileSync(path.join(dir, 'custom-bootstrap.json'), JSON.stringify(o.customBootstrap(ports)));
  const child = spawn(process.execPath, [proxyMain, 'proxy', o.type ?? 'sidecar', '--concurrency', String(o.concurrency ?? 1), '--proxyLogLevel', o.logLevel ?? 'info'], {
    cwd: dir, stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', POD_NAME: podName, POD_NAMESPACE: 'default', INSTANCE_IP: o.podIp ?? '127.0.0.1', SERVICE_ACCOUNT: 'app',
      ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local', TRUST_DOMAIN: 'cluster.local',
      ENVOY_STATUS_PORT: String(ports.envoyStatus), ENVOY_PROMETHEUS_PORT: String(ports.envoyPrometheus),
      PROXY_CONFIG: JSON.stringify({
        discoveryAddress: `127.0.0.1:${o.xdsPort}`, controlPlaneAuthPolicy: 'NONE', proxyAdminPort: ports.admin, statusPort: ports.status, ...custom, ...o.proxyConfig,
      }),
      ...o.env,
    },
  });
  live.add(child);
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    if (err.length > 4 << 20) err = err.slice(-(2 << 20));
    if (process.env.SKUA_TEST_DEBUG) process.stderr.write(d);
  });
  child.stdout?.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => { live.delete(child); resolve({ code, signal }); });
  });
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const agent: RunningAgent = {
    child, pid: child.pid ?? -1, dir, ports, exited, stderr: () => err,
    async status(p, method = 'GET') {
      const res = await fetch(`http://127.0.0.1:${ports.status}${p}`, { method, signal: AbortSignal.timeout(5000) });
      return { status: res.status, body: await res.text() };
    },
    async ready(timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      let last = 'no answer';
      while (Date.now() < deadline && running()) {
        try {
          const res = await fetch(`http://127.0.0.1:${ports.envoyStatus}/healthz/ready`, { signal: AbortSignal.timeout(1000) });
          last = `${res.status} ${await res.text()}`;
          if (res.status === 200) return;
        } catch (e) { last = (e as Error).message; }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`the agent did not become ready (${running() ? last : `exited ${child.exitCode ?? child.signalCode}`}); stderr:\n${err.slice(-4000)}`);
    },
    async stop(graceMs = 3000) {
      if (running()) {
        child.kill('SIGTERM');
        const t = setTimeout(() => { if (running()) child.kill('SIGKILL'); }, graceMs);
        await exited;
        clearTimeout(t);
      }
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
  return agent;
}

/** The process exits within `ms`: its exit, or undefined if it is still running. */
export async function exitWithin(agent: RunningAgent, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((r) => { timer = setTimeout(() => r(undefined), ms); });
  const r = await Promise.race([agent.exited, timeout]);
  clearTimeout(timer);
  return r;
}
