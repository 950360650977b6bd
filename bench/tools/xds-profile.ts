/**
 * The `xds` scenario's apply (N istiod-shaped services over ADS from skua-controlplane, from scratch)
 * for one or more builds in turns, to profile it and to compare builds on a busy machine: per start,
 * spawn → /ready ms, the proxy's CPU ms at /ready, RSS after one request through its HTTP listener (as the
 * scenario reads it) and 3 s later, V8 heap used (admin
 * /memory), each minus a static-bootstrap proxy's started just before. Medians over --rounds.
 *   node bench/tools/xds-profile.ts [--ref main,WORKTREE] [--rounds 3] [--services 5000] [--sotw]
 *        [--all-stats] [--mtls] [--node-args "--cpu-prof"] [--snapshot] [--out DIR] [--hold S]
 * --mtls gives every cluster Istio's ISTIO_MUTUAL transport_socket_matches (the scenario has none).
 * --snapshot adds --heapsnapshot-signal=SIGUSR2 and writes one heap snapshot per build and round once
 * ready (summarise with tools/heapsnapshot-top.ts); --cpu-prof files land in DIR when the proxy exits;
 * --hold keeps each ADS proxy up S s more (its pid is printed: /proc/PID/smaps).
 * Each ADS proxy's output goes to DIR/<ref>-<round>.log (for --node-args=--trace-gc). Every process is stopped by PID.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { extractRef, shippedNodeOptions, warmCompileCaches } from '../lib/builds.ts';
import { meshResources, svcHost } from '../lib/mesh-resources.ts';
import { freePort, HOST, httpGet, waitForReady } from '../lib/net.ts';
import { cpuMs, rssMb } from '../lib/proc-stats.ts';
import { killAllSync, startProcess, stopAll, stopProcess, type Proc } from '../lib/procs.ts';
import { REPO_ROOT } from '../lib/targets.ts';
import { adsBootstrap } from '../scenarios/xds.ts';

const { values } = parseArgs({ options: {
  ref: { type: 'string', default: 'WORKTREE' }, rounds: { type: 'string', default: '3' }, services: { type: 'string', default: '5000' },
  sotw: { type: 'boolean', default: false }, 'all-stats': { type: 'boolean', default: false }, 'node-args': { type: 'string', default: '' },
  snapshot: { type: 'boolean', default: false }, out: { type: 'string', default: '' }, hold: { type: 'string', default: '0' },
  mtls: { type: 'boolean', default: false },
} });
const services = Number(values.services);
const out = path.resolve(values.out || mkdtempSync(path.join(os.tmpdir(), 'xds-profile-out-')));
mkdirSync(out, { recursive: true });
const tmp = mkdtempSync(path.join(os.tmpdir(), 'xds-profile-'));
process.on('exit', () => { killAllSync(); rmSync(tmp, { recursive: true, force: true }); });
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const builds = values.ref.split(',').map((ref) => ({ ref, main: extractRef(ref, tmp), nodeOptions: shippedNodeOptions(ref) }));
warmCompileCaches(builds.map((b) => ({ name: b.ref, main: b.main })), path.join(tmp, 'compile-cache'), (m) => console.log(m));
const nodeArgs = [...values['node-args'].split(' ').filter(Boolean), ...(values.snapshot ? ['--heapsnapshot-signal=SIGUSR2'] : [])];
const profDirArgs = nodeArgs.some((a) => a.startsWith('--cpu-prof')) ? ['--cpu-prof-dir', out] : [];

interface Started { proc: Proc; readyMs: number; cpu: number }
async function start(b: typeof builds[number], name: string, bootstrap: unknown, adminPort: number, args: string[], logFile?: string): Promise<Started> {
  const file = path.join(tmp, `${name}.json`);
  writeFileSync(file, JSON.stringify(bootstrap));
  const t0 = performance.now();
  const proc = startProcess(name, process.execPath, [...args, b.main, '-c', file, '-l', 'warn'], { cwd: out, env: { NODE_OPTIONS: b.nodeOptions }, logFile });
  await waitForReady(adminPort, proc, 300_000);
  return { proc, readyMs: performance.now() - t0, cpu: cpuMs(proc.pid) };
}

function oneRequest(port: number, host: string): Promise<void> {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: '/', agent: false, timeout: 2000, headers: { host } }, (res) => { res.resume(); res.on('end', resolve); });
    req.on('error', () => resolve());
    req.on('timeout', () => req.destroy());
  });
}

async function heapMb(adminPort: number): Promise<{ used: number; total: number }> {
  const m = JSON.parse((await httpGet(adminPort, '/memory')).body) as { allocated: string; heap_size: string };
  return { used: Number(m.allocated) / 2 ** 20, total: Number(m.heap_size) / 2 ** 20 };
}

function rssAnonMb(pid: number): number {
  return Number(/^RssAnon:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1] ?? NaN) / 1024;
}

async function snapshot(proc: Proc, label: string): Promise<string> {
  const before = new Set(readdirSync(out));
  process.kill(proc.pid, 'SIGUSR2');
  for (let t = 0; t < 600; t++) {
    await sleep(500);
    const f = readdirSync(out).find((x) => x.endsWith('.heapsnapshot') && !before.has(x));
    // V8 writes the file in one go; wait until the process answers again (the write blocks it).
    if (f && (await httpGet(Number(label.split(':')[1]), '/ready').then(() => true, () => false))) {
      const dest = path.join(out, `${label.split(':')[0]}.heapsnapshot`);
      renameSync(path.join(out, f), dest);
      return dest;
    }
  }
  throw new Error('no heap snapshot');
}

async function main(): Promise<void> {
  const cpDir = path.join(tmp, 'cp');
  mkdirSync(cpDir);
  const listenPort = await freePort();
  const res = meshResources(services, listenPort, await freePort(), { mtls: values.mtls });
  for (const [k, list] of Object.entries(res)) writeFileSync(path.join(cpDir, `${k}.json`), JSON.stringify({ resources: list }));
  const cpPort = await freePort();
  const cp = startProcess('skua-controlplane', process.execPath, [path.join(REPO_ROOT, 'packages/controlplane/src/main.ts'), '--config-dir', cpDir, '--xds-address', `${HOST}:${cpPort}`], { cwd: REPO_ROOT });
  while (!cp.stderr.includes('ADS on')) {
    if (cp.exitStatus !== undefined) throw new Error(`skua-controlplane exited: ${cp.stderr}`);
    await sleep(20);
  }
  const rows = new Map<string, Record<string, number[]>>();
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const b of builds) {
      const baseAdmin = await freePort();
      const base = await start(b, 'static', { admin: { address: { socket_address: { address: HOST, port_value: baseAdmin } } } }, baseAdmin, []);
      const baseRss = rssMb(base.proc.pid), baseHeap = (await heapMb(baseAdmin)).used;
      await stopProcess(base.proc);
      const adminPort = await freePort();
      const p = await start(b, 'ads', adsBootstrap(adminPort, cpPort, !values.sotw, !values['all-stats']), adminPort, [...nodeArgs, ...profDirArgs], path.join(out, `${b.ref}-${round}.log`));
      // As the scenario does: one request through the HTTP listener before RSS is read.
      await oneRequest(listenPort, svcHost(services >> 1));
      const rssReady = rssMb(p.proc.pid);
      await sleep(3000);
      const m = {
        applyMs: p.readyMs - base.readyMs, cpuMs: p.cpu - base.cpu, rssMb: rssReady, rssGrowthMb: rssReady - baseRss,
        rss3sMb: rssMb(p.proc.pid), rssAnonMb: rssAnonMb(p.proc.pid), heapGrowthMb: (await heapMb(adminPort)).used - baseHeap, heapTotalMb: (await heapMb(adminPort)).total,
      };
      if (values.snapshot) console.log(`snapshot: ${await snapshot(p.proc, `${b.ref}-${round}:${adminPort}`)}`);
      if (Number(values.hold) > 0) {
        console.log(`holding pid ${p.proc.pid} (admin port ${adminPort}) for ${values.hold} s`);
        await sleep(Number(values.hold) * 1000);
      }
      await stopProcess(p.proc, 10_000);
      console.log(`${b.ref} round ${round}: ${Object.entries(m).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}  load ${os.loadavg()[0].toFixed(2)}`);
      const row = rows.get(b.ref) ?? {};
      for (const [k, v] of Object.entries(m)) (row[k] ??= []).push(v);
      rows.set(b.ref, row);
    }
  }
  await stopProcess(cp);
  console.log(`medians (${services} services, ${values.sotw ? 'SotW' : 'Delta'}${values['all-stats'] ? ', every stat' : ''}${values.mtls ? ', ISTIO_MUTUAL clusters' : ''}):`);
  for (const [ref, row] of rows) console.log(`  ${ref.padEnd(12)} ${Object.entries(row).map(([k, v]) => `${k} ${median(v).toFixed(1)}`).join(', ')}`);
  if (existsSync(out)) console.log(`output: ${out}`);
}

main().then(() => stopAll(), async (err: unknown) => { console.error(err); await stopAll(); process.exitCode = 1; });
