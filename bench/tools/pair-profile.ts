/**
 * The sidecar pair of `--only sidecar-pair` (fortio 1,000 req/s, 16 connections, 1 KB, mTLS between two
 * `skua-proxy proxy sidecar`) under a profiler, to find where its CPU and memory go.
 *   node bench/tools/pair-profile.ts [--protocol http|http2] [--seconds 20] [--out DIR]
 *        [--node-args "--cpu-prof --heapsnapshot-signal=SIGUSR2"] [--snapshot] [--skua PATH]
 * The proxies run with the proxy image's NODE_OPTIONS (Dockerfile) unless --bare.
 * --v8-stats: process.memoryUsage() and V8's heap spaces of each side at the end (over the inspector).
 * --heap-sampling all|promoted|retained: V8's sampling heap profiler on both during the run
 * (lib/heap-sampling.ts): where the allocations come from, those that were promoted to the old
 * generation, or those still alive after a full GC at the end.
 * --nginx: the nginx pair instead (for side-by-side counts: perf stat, strace -c on the printed pids).
 * Saves each side's /config_dump?include_eds in DIR. Prints each side's CPU per 1,000 req/s, RSS, RssAnon and V8 heap (admin /memory) after the run; with
 * --snapshot sends SIGUSR2 to both (needs --heapsnapshot-signal=SIGUSR2) and waits for the snapshots.
 * --cpu-prof / --heap-prof files are written when the proxies exit (SIGTERM), into --out (their cwd
 * differs: the flags get --cpu-prof-dir/--heap-prof-dir DIR added; default DIR: a new one under /tmp,
 * kept; each proxy's output goes to DIR/<name>.log, e.g. for --trace-gc). Every process is stopped by PID; the rest of the temp dir is removed.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CertificateAuthority } from '../../packages/controlplane/src/ca/authority.ts';
import { startCaServer } from '../../packages/controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../packages/controlplane/src/ca/token.ts';
import { ensureFortio, runFortio } from '../lib/fortio.ts';
import { freePort, HOST, httpGet } from '../lib/net.ts';
import { makePairCerts, nginxFixedBodyConf, nginxPairClientConf, nginxPairServerConf } from '../lib/nginx-pair.ts';
import { runTool, stopProcess, type Proc } from '../lib/procs.ts';
import { treeCpuMs } from '../lib/proc-stats.ts';
import { startSkuaPair } from '../lib/skua-pair.ts';
import { DEFAULT_SKUA_MAIN, REPO_ROOT, startNginx } from '../lib/targets.ts';
import { shippedNodeOptions, warmCompileCaches } from '../lib/builds.ts';
import { inspectorUrl, memoryBreakdown, sampleHeap } from '../lib/heap-sampling.ts';

const { values } = parseArgs({ options: {
  protocol: { type: 'string', default: 'http' }, seconds: { type: 'string', default: '20' }, out: { type: 'string', default: '' },
  'node-args': { type: 'string', default: '' }, snapshot: { type: 'boolean', default: false }, skua: { type: 'string', default: DEFAULT_SKUA_MAIN },
  qps: { type: 'string', default: '1000' }, nginx: { type: 'boolean', default: false }, mtls: { type: 'string', default: 'STRICT' }, 'heap-sampling': { type: 'string', default: '' }, 'v8-stats': { type: 'boolean', default: false }, bare: { type: 'boolean', default: false },
} });
const sampling = (['all', 'promoted', 'retained'] as const).find((k) => k === values['heap-sampling']);
const protocol = values.protocol === 'http2' ? 'http2' : 'http';
const seconds = Number(values.seconds);
const qps = Number(values.qps);
const tmp = mkdtempSync(path.join(os.tmpdir(), 'skua-pair-profile-'));
const out = path.resolve(values.out || `${tmp}-out`);
mkdirSync(out, { recursive: true });
const nodeArgs = [...values['node-args'].split(' '), ...(sampling || values['v8-stats'] ? ['--inspect=127.0.0.1:0'] : [])].filter(Boolean).flatMap((a) => {
  if (a === '--cpu-prof') return [a, `--cpu-prof-dir=${out}`];
  if (a === '--heap-prof') return [a, `--heap-prof-dir=${out}`];
  return [a];
});

function status(pid: number): Record<string, number> {
  const text = readFileSync(`/proc/${pid}/status`, 'latin1');
  const kb = (f: string): number => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) / 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), hwm: kb('VmHWM') };
}

async function memoryLine(procs: ReadonlyArray<readonly [string, { pid: number }, number]>): Promise<string> {
  const parts = await Promise.all(procs.map(async ([name, p, admin]) => {
    const mem = JSON.parse((await httpGet(admin, '/memory')).body) as Record<string, string>;
    return `${name} RSS ${status(p.pid).rss.toFixed(0)} MB heap ${(Number(mem.allocated) / 2 ** 20).toFixed(0)}/${(Number(mem.heap_size) / 2 ** 20).toFixed(0)} MB`;
  }));
  return parts.join(', ');
}

/** The nginx pair of the sidecar-pair scenario, for side-by-side counts (perf stat, strace -c). */
async function nginxPair(backendPort: number): Promise<{ client: Proc; server: Proc; clientAdmin: number; serverAdmin: number; url: string; host: string; stop(): Promise<void> }> {
  const certs = makePairCerts(path.join(tmp, 'pair-certs'));
  const [serverPort, clientPort] = [await freePort(), await freePort()];
  const server = await startNginx('pair-server', tmp, nginxPairServerConf(tmp, serverPort, backendPort, certs), serverPort);
  const client = await startNginx('pair-client', tmp, nginxPairClientConf(tmp, clientPort, serverPort, certs), clientPort);
  return { client, server, clientAdmin: 0, serverAdmin: 0, url: `http://${HOST}:${clientPort}/`, host: 'echo', stop: async () => { await stopProcess(client); await stopProcess(server); } };
}

async function main(): Promise<void> {
  const skuaMain = path.resolve(REPO_ROOT, values.skua);
  // What ships: the proxy image's NODE_OPTIONS (V8 flags), unless --bare.
  if (!values.bare) process.env.NODE_OPTIONS = shippedNodeOptions();
  console.log(`NODE_OPTIONS="${process.env.NODE_OPTIONS ?? ''}"`);
  warmCompileCaches([{ name: '', main: skuaMain }], path.join(tmp, 'compile-cache'), (m) => console.log(m));
  const fortio = ensureFortio(console.log);
  const backendPort = await freePort();
  const backend = await startNginx('pair-backend', tmp, nginxFixedBodyConf(tmp, backendPort, 'x'.repeat(1024)), backendPort);
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: path.join(tmp, 'ca') });
  const tokens = TokenAuthority.create(path.join(tmp, 'ca'));
  const caServer = await startCaServer({ ca, tokens, listen: `${HOST}:0` });
  try {
    const pair = values.nginx ? await nginxPair(backendPort) : await startSkuaPair({ dir: tmp, protocol, backendPort, skuaMain, nodeArgs, logDir: out, mtls: values.mtls === 'DISABLE' ? 'DISABLE' : 'STRICT', ca: { ca, tokens, address: `${HOST}:${caServer.port}` } });
    try {
      const load = { url: pair.url, qps, connections: 16, headers: [`Host: ${pair.host}`] };
      console.log(`client pid ${pair.client.pid}, server pid ${pair.server.pid}; load average ${readFileSync('/proc/loadavg', 'utf8').trim()}; warm-up 3 s, then ${seconds} s of fortio ${qps} req/s (${protocol} between)`);
      await runFortio(fortio, { ...load, seconds: 3 });
      const procs = [['client', pair.client, pair.clientAdmin], ['server', pair.server, pair.serverAdmin]] as const;
      const cpu0 = procs.map(([, p]) => treeCpuMs(p.pid));
      const t0 = performance.now();
      // Memory every 10 s during the run: a heap that keeps growing with requests is a leak, not a working set.
      const timer = values.nginx ? undefined : setInterval(() => { void memoryLine(procs).then((l) => console.log(`  t+${((performance.now() - t0) / 1000).toFixed(0)} s  ${l}`)); }, 10_000);
      const heap = sampling ? Promise.all(procs.map(([name, p]) => sampleHeap(inspectorUrl(p.stderr) ?? '', (seconds - 2) * 1000, sampling, path.join(out, `${name}.heapprofile`)).then((t) => `${name} ${t}`))) : undefined;
      const r = await runFortio(fortio, { ...load, seconds }).finally(() => clearInterval(timer));
      if (heap) console.log((await heap).join('\n'));
      const wall = (performance.now() - t0) / 1000;
      console.log(`fortio: ${r.qps.toFixed(0)} req/s, p50 ${r.p50.toFixed(3)} ms, p90 ${r.p90.toFixed(3)}, p99 ${r.p99.toFixed(3)}, errors ${r.errors}`);
      for (const [i, [name, p, admin]] of procs.entries()) {
        const vcpu = (treeCpuMs(p.pid) - cpu0[i]) / 1000 / wall / (r.qps / 1000);
        const mem = admin ? JSON.parse((await httpGet(admin, '/memory')).body) as Record<string, string> : { allocated: 'NaN', heap_size: 'NaN' };
        const s = status(p.pid);
        console.log(`${name}: ${vcpu.toFixed(3)} vCPU per 1k req/s (${(vcpu * r.qps / 1000).toFixed(4)} vCPU); RSS ${s.rss.toFixed(1)} MB (peak ${s.hwm.toFixed(1)}), RssAnon ${s.anon.toFixed(1)} MB; V8 heap used ${(Number(mem.allocated) / 2 ** 20).toFixed(1)} MB of ${(Number(mem.heap_size) / 2 ** 20).toFixed(1)} MB`);
      }
      if (values['v8-stats']) for (const [name, p] of procs) console.log(`${name}: ${await memoryBreakdown(inspectorUrl(p.stderr) ?? '')}`);
      console.log(`load average ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
      for (const [name, , admin] of procs) if (admin) writeFileSync(path.join(out, `${name}-config_dump.json`), (await httpGet(admin, '/config_dump?include_eds')).body);
      if (values.snapshot) {
        for (const [, p] of procs) process.kill(p.pid, 'SIGUSR2');
        await new Promise((r) => setTimeout(r, 15_000));
      }
    } finally {
      await pair.stop();
    }
  } finally {
    await caServer.close();
    await stopProcess(backend);
  }
  const snaps = values.snapshot ? readdirSync(tmp, { recursive: true }).filter((f) => String(f).endsWith('.heapsnapshot')).map((f) => path.join(tmp, String(f))) : [];
  for (const f of snaps) renameSync(f, path.join(out, path.basename(f)));
  console.log(`profiles in ${out}: ${readdirSync(out).join(' ') || '(none)'}`);
}

void runTool(main).finally(() => rmSync(tmp, { recursive: true, force: true }));
