/**
 * Idle footprint (issue 13): a bare Node process and skua-proxy with a trivial static config (one HCM
 * listener, a direct_response route, the router), both left idle, side by side.
 *   node bench/tools/idle-footprint.ts [--wait-s 5] [--runs 3] [--cold]
 * Prints VmRSS, RssAnon (what the process itself allocated: heap, code, wasm, malloc) and V8's heapUsed
 * for each, medians over the runs; both processes are stopped by PID. skua-proxy starts as shipped
 * (bin/skua-proxy.js) over a compile cache warmed by one start first, as any restart finds it;
 * --cold disables the cache (NODE_DISABLE_COMPILE_CACHE): type stripping then loads its compiler.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../lib/net.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const BIN = join(ROOT, 'packages/proxy/bin/skua-proxy.js');
const { values } = parseArgs({ options: { 'wait-s': { type: 'string', default: '5' }, runs: { type: 'string', default: '3' }, cold: { type: 'boolean', default: false } } });
const WAIT_MS = Number(values['wait-s']) * 1000;
const RUNS = Number(values.runs);
const COLD = values.cold === true;

interface Sample { rssMb: number; anonMb: number; heapUsedMb: number }

function trivialConfig(port: number, adminPort: number): string {
  return `static_resources:
  listeners:
  - name: idle
    address: { socket_address: { address: 127.0.0.1, port_value: ${port} } }
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
  address: { socket_address: { address: 127.0.0.1, port_value: ${adminPort} } }
`;
}

function statusMb(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  if (!m) throw new Error(`no ${field} for pid ${pid}`);
  return Number(m[1]) / 1024;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise((r) => child.once('exit', r));
  process.kill(child.pid, 'SIGKILL');
  await exited;
}

/** Bare Node: waits, then prints its own heapUsed and keeps idling until killed. */
async function sampleBareNode(): Promise<Sample> {
  const script = `setTimeout(() => { process.stdout.write(JSON.stringify(process.memoryUsage()) + '\\n'); }, ${WAIT_MS}); setInterval(() => {}, 1 << 30);`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => { out += d; if (out.includes('\n')) resolve(out); });
      child.once('exit', (code) => reject(new Error(`bare node exited ${code}`)));
    });
    const pid = child.pid!;
    return { rssMb: statusMb(pid, 'VmRSS'), anonMb: statusMb(pid, 'RssAnon'), heapUsedMb: JSON.parse(line).heapUsed / 2 ** 20 };
  } finally { await stop(child); }
}

function proxyEnv(dir: string): NodeJS.ProcessEnv {
  return COLD ? { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1' } : { ...process.env, NODE_COMPILE_CACHE: join(dir, 'compile-cache') };
}

/** skua-proxy over the trivial config: heapUsed from the admin's /memory (Envoy's shape). */
async function sampleProxy(dir: string): Promise<Sample> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const cfg = join(dir, 'idle.yaml');
  writeFileSync(cfg, trivialConfig(port, adminPort));
  const child = spawn(process.execPath, [BIN, '-c', cfg, '-l', 'warn'], { stdio: ['ignore', 'inherit', 'inherit'], env: proxyEnv(dir) });
  try {
    await sleep(WAIT_MS);
    if (child.exitCode !== null) throw new Error(`skua-proxy exited ${child.exitCode}`);
    const pid = child.pid!;
    const [rssMb, anonMb] = [statusMb(pid, 'VmRSS'), statusMb(pid, 'RssAnon')];
    const res = await fetch(`http://127.0.0.1:${adminPort}/memory`);
    const heapUsedMb = Number((await res.json() as { allocated: string }).allocated) / 2 ** 20;
    return { rssMb, anonMb, heapUsedMb };
  } finally { await stop(child); }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = (s: Sample[]): Sample => ({ rssMb: median(s.map((x) => x.rssMb)), anonMb: median(s.map((x) => x.anonMb)), heapUsedMb: median(s.map((x) => x.heapUsedMb)) });

const dir = mkdtempSync(join(tmpdir(), 'skua-idle-'));
try {
  if (!COLD) execFileSync(process.execPath, [BIN, '--mode', 'validate', '--config-yaml', trivialConfig(1, 2)], { env: proxyEnv(dir), stdio: 'ignore' });
  const bare: Sample[] = [], proxy: Sample[] = [];
  for (let i = 0; i < RUNS; i++) { bare.push(await sampleBareNode()); proxy.push(await sampleProxy(dir)); }
  const [b, p] = [summary(bare), summary(proxy)];
  const row = (name: string, s: Sample): string => `${name.padEnd(12)}${s.rssMb.toFixed(1).padStart(10)}${s.anonMb.toFixed(1).padStart(10)}${s.heapUsedMb.toFixed(1).padStart(12)}`;
  process.stdout.write(`idle ${WAIT_MS / 1000} s, median of ${RUNS}, compile cache ${COLD ? 'off' : 'warm'} (MB)\n${''.padEnd(12)}${'VmRSS'.padStart(10)}${'RssAnon'.padStart(10)}${'heapUsed'.padStart(12)}\n`);
  process.stdout.write(`${row('bare node', b)}\n${row('skua-proxy', p)}\n`);
  process.stdout.write(`${row('difference', { rssMb: p.rssMb - b.rssMb, anonMb: p.anonMb - b.anonMb, heapUsedMb: p.heapUsedMb - b.heapUsedMb })}\n`);
} finally { rmSync(dir, { recursive: true, force: true }); }
