/**
 * Idle footprint (issue 13): a bare Node process, nginx (one worker, an HTTP proxy config) and
 * skua-proxy with a trivial static config (one HCM listener, a direct_response route, the router),
 * each left idle. VmRSS, RssAnon (what the process itself allocated: heap, code, wasm, malloc) and
 * V8's heapUsed (skua: the admin's /memory; bare node: its own), for nginx summed over master and
 * worker. skua-proxy starts as shipped (bin/skua-proxy.js) over whatever compile cache
 * NODE_COMPILE_CACHE names (warm, as the image ships it), or none (`cold`).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, HOST, waitForPort } from './net.ts';
import { nginxHttpProxyConf } from './peer-configs.ts';
import { startProcess, stopProcess, systemBinary, type Proc } from './procs.ts';
import { processTree } from './proc-stats.ts';

export interface IdleSample { rssMb: number; anonMb: number; heapUsedMb?: number }
export interface IdleOptions { waitMs: number; skuaMain: string; cold: boolean; dir: string; env?: Record<string, string> }

export function trivialSkuaConfig(port: number, adminPort: number): string {
  return `static_resources:
  listeners:
  - name: idle
    address: { socket_address: { address: ${HOST}, port_value: ${port} } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: idle
          route_config:
            virtual_hosts:
            - { name: all, domains: ["*"], routes: [{ match: { prefix: "/" }, direct_response: { status: 200, body: { inline_string: ok } } }] }
          http_filters:
          - { name: envoy.filters.http.router, typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router } }
admin:
  address: { socket_address: { address: ${HOST}, port_value: ${adminPort} } }
`;
}

function statusMb(pid: number, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch { return 0; }
}

/** VmRSS and RssAnon of a process and its children (nginx's worker). */
function treeSample(pid: number): IdleSample {
  const pids = processTree(pid);
  return { rssMb: pids.reduce((s, p) => s + statusMb(p, 'VmRSS'), 0), anonMb: pids.reduce((s, p) => s + statusMb(p, 'RssAnon'), 0) };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function idleThen<T>(proc: Proc, ms: number, read: () => Promise<T>): Promise<T> {
  try {
    await sleep(ms);
    if (proc.exitStatus !== undefined) throw new Error(`${proc.name} exited (${String(proc.exitStatus)}) while idle: ${proc.stderr.trim()}`);
    return await read();
  } finally { await stopProcess(proc); }
}

/** Bare Node: prints its own heapUsed after the wait and keeps idling until stopped. */
export function sampleBareNode(o: IdleOptions): Promise<IdleSample> {
  const script = `setTimeout(() => { process.stdout.write(JSON.stringify(process.memoryUsage()) + '\\n'); }, ${o.waitMs}); setInterval(() => {}, 1 << 30);`;
  const proc = startProcess('idle-node', process.execPath, ['-e', script], { fullStdout: true });
  return idleThen(proc, o.waitMs + 200, async () => {
    for (let i = 0; i < 50 && !proc.stdout.includes('\n'); i++) await sleep(100);
    return { ...treeSample(proc.pid), heapUsedMb: (JSON.parse(proc.stdout) as { heapUsed: number }).heapUsed / 2 ** 20 };
  });
}

/** nginx, one worker, an HTTP proxy config (its upstream is never called). */
export async function sampleNginx(o: IdleOptions): Promise<IdleSample> {
  const port = await freePort();
  const file = path.join(o.dir, 'idle-nginx.conf');
  writeFileSync(file, nginxHttpProxyConf(o.dir, port, 9));
  const proc = startProcess('idle-nginx', systemBinary('nginx'), ['-p', o.dir, '-c', file, '-e', 'stderr']);
  await waitForPort(port, proc);
  return idleThen(proc, o.waitMs, async () => treeSample(proc.pid));
}

/** skua-proxy over the trivial config; heapUsed from the admin's /memory (Envoy's shape). */
export async function sampleSkua(o: IdleOptions): Promise<IdleSample> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const cfg = path.join(o.dir, 'idle-skua.yaml');
  writeFileSync(cfg, trivialSkuaConfig(port, adminPort));
  const env: Record<string, string> = { ...o.env, ...(o.cold ? { NODE_DISABLE_COMPILE_CACHE: '1' } : {}) };
  const proc = startProcess('idle-skua', process.execPath, [o.skuaMain, '-c', cfg, '-l', 'warn'], { env });
  await waitForPort(port, proc, 20_000);
  return idleThen(proc, o.waitMs, async () => {
    const res = await fetch(`http://${HOST}:${adminPort}/memory`);
    const heapUsedMb = Number((await res.json() as { allocated: string }).allocated) / 2 ** 20;
    return { ...treeSample(proc.pid), heapUsedMb };
  });
}

export function medianSample(s: IdleSample[]): IdleSample {
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const heaps = s.map((x) => x.heapUsedMb).filter((x): x is number => x !== undefined);
  return { rssMb: med(s.map((x) => x.rssMb)), anonMb: med(s.map((x) => x.anonMb)), heapUsedMb: heaps.length ? med(heaps) : undefined };
}
