/**
 * Profiles the ztunnel pair (bench/tools/ztunnel/pair.ts; needs root) phase by phase: after each
 * phase, each ztunnel's memory as V8 and the kernel see it (RSS, anonymous, V8 spaces, external)
 * and the CPU it used during the phase.
 *   node bench/tools/ztunnel-profile.ts [--phases idle,stream1,stream8,connrate,hold,rps,sleepN] [--mb 200]
 *     [--seconds 5] [--tunnels 2000] [--node-options='--cpu-prof --cpu-prof-dir=/tmp/p'] [--v8-flags=F] [--out FILE]
 *     [--keep DIR [--snapshots] [--smaps]] [--ref GIT-REF]
 * --node-options go to the ztunnels only (with the memory probe, bench/tools/ztunnel/mem-probe.mjs), and
 * --v8-flags='--trace-gc' (flags NODE_OPTIONS refuses; the probe sets them at start);
 * --ref: another build (bench/tools/ztunnel/builds.ts). --keep DIR: the probe's files stay in DIR, with --snapshots a heap snapshot of each ztunnel after
 * each phase, with --smaps a copy of its /proc/PID/smaps; each ztunnel's stdout in ztunnel-N.log.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ztunnelBinForRef } from './ztunnel/builds.ts';
import { inPod, load, startPair } from './ztunnel/pair.ts';

const { values } = parseArgs({ options: {
  phases: { type: 'string', default: 'idle,stream1,stream8,connrate,hold,rps' }, mb: { type: 'string', default: '200' }, seconds: { type: 'string', default: '5' },
  tunnels: { type: 'string', default: '2000' }, 'node-options': { type: 'string', default: '' }, 'v8-flags': { type: 'string', default: '' }, out: { type: 'string' },
  keep: { type: 'string' }, ref: { type: 'string', default: 'WORKTREE' }, snapshots: { type: 'boolean', default: false }, smaps: { type: 'boolean', default: false },
} });
const FORTIO = process.env.FORTIO ?? '/root/go/bin/fortio';
const LOAD = new URL('ztunnel/load.ts', import.meta.url).pathname;
const PROBE = new URL('ztunnel/mem-probe.mjs', import.meta.url).pathname;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
type Json = Record<string, unknown>;

const probeDir = values.keep ?? mkdtempSync(join(tmpdir(), 'skua-zt-probe-'));
const env = {
  NODE_OPTIONS: `--import=${PROBE} ${values['node-options']}`.trim(), MEM_PROBE_V8_FLAGS: values['v8-flags'], MEM_PROBE_DIR: probeDir,
  MEM_PROBE_SNAPSHOT: values.keep && values.snapshots ? '1' : '0', MEM_PROBE_SMAPS: values.keep && values.smaps ? '1' : '0',
};
const buildDir = mkdtempSync(join(tmpdir(), 'skua-zt-build-'));
const pair = await startPair(7, env, ztunnelBinForRef(values.ref, buildDir));
const { client, server, ztunnelPids: zt } = pair;
process.stderr.write(`ztunnel pids ${zt.join(" ")}\n`);
const out: Json = { date: new Date().toISOString(), nodeOptions: values['node-options'], loadavgAtStart: loadavg(), phases: [] };

/** utime and stime of a process in seconds. */
function cpu(pid: number): { user: number; sys: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]) / 100, sys: Number(f[12]) / 100 };
}

async function memory(): Promise<Json[]> {
  for (const pid of zt) { rmSync(join(probeDir, `${pid}.json`), { force: true }); process.kill(pid, 'SIGUSR2'); }
  for (let i = 0; i < 600 && !zt.every((pid) => existsSync(join(probeDir, `${pid}.json`))); i++) await sleep(100);
  return zt.map((pid) => JSON.parse(readFileSync(join(probeDir, `${pid}.json`), 'utf8')) as Json);
}

async function phase(name: string): Promise<Json> {
  const MB = values.mb, SECONDS = values.seconds;
  if (name === 'idle') { await sleep(3000); return {}; }
  if (/^sleep\d+$/.test(name)) { await sleep(Number(name.slice(5)) * 1000); return {}; }
  if (name === 'stream1' || name === 'stream8') return load(client.netns, 'throughput', server.ip, '8080', MB, name === 'stream1' ? '1' : '8');
  if (name === 'connrate') return load(client.netns, 'connrate', server.ip, '8080', SECONDS, '8');
  if (name === 'rps') {
    const json = await inPod(client.netns, FORTIO, 'load', '-qps', '1000', '-c', '16', '-t', `${SECONDS}s`, '-json', '-', '-quiet', `http://${server.ip}:8081/`);
    const r = JSON.parse(json.slice(json.indexOf('{'))) as { ActualQPS: number };
    return { qps: r.ActualQPS };
  }
  if (name === 'hold') {
    const holder = spawn('ip', ['netns', 'exec', client.netns, process.execPath, LOAD, 'hold', server.ip, '8080', values.tunnels], { stdio: ['pipe', 'pipe', 'inherit'] });
    const held = await new Promise<Json>((resolve) => holder.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()) as Json)));
    await sleep(3000);
    const mem = await memory();
    holder.stdin.end();
    await new Promise((r) => holder.once('exit', r));
    return { ...held, memoryWhileHeld: mem };
  }
  throw new Error(`unknown phase ${name}`);
}

try {
  for (const name of values.phases.split(',')) {
    const cpu0 = zt.map(cpu);
    const t0 = performance.now();
    const result = await phase(name);
    const secs = (performance.now() - t0) / 1000;
    const used = zt.map((p, i) => { const c = cpu(p); return { user: (c.user - cpu0[i].user) / secs, sys: (c.sys - cpu0[i].sys) / secs }; });
    const vcpu = used.map((u) => u.user + u.sys);
    await sleep(1000);
    const mem = await memory();
    (out.phases as Json[]).push({ name, seconds: secs, result, vcpu, vcpuUserSys: used, memory: mem });
    const gb = typeof result.bytes === 'number' ? result.bytes / 2 ** 30 : 0;
    const conns = typeof result.connections === 'number' ? result.connections : 0;
    const perGb = gb ? `, CPU s/GiB ${vcpu.map((v) => ((v * secs) / gb).toFixed(2)).join(' / ')}`
      : conns ? `, CPU ms per connection ${vcpu.map((v) => ((v * secs * 1000) / conns).toFixed(3)).join(' / ')}` : '';
    process.stderr.write(`${name} (${secs.toFixed(1)} s, vCPU user+sys ${used.map((u) => `${u.user.toFixed(2)}+${u.sys.toFixed(2)}`).join(' / ')}${perGb}) ${JSON.stringify(result).slice(0, 160)}\n`);
    for (const m of mem) process.stderr.write(`  rss ${m.rss} anon ${m.anon} heapTotal ${m.heapTotal} heapUsed ${m.heapUsed} external ${m.external} new ${JSON.stringify((m.spaces as Json).new_space)}\n`);
  }
  out.loadavgAtEnd = loadavg();
} finally {
  // Stop the ztunnels first (SIGTERM) so that --cpu-prof / --heap-prof write their files.
  await Promise.all(pair.cluster.ztunnels.map((p) => pair.cluster.topo.stop(p, 'SIGTERM')));
  await pair.cluster.destroy();
  rmSync(buildDir, { recursive: true, force: true });
  if (values.keep) pair.cluster.logs.forEach((lines, i) => writeFileSync(join(probeDir, `ztunnel-${i + 1}.log`), `${lines.join('\n')}\n`));
  else rmSync(probeDir, { recursive: true, force: true });
}
if (values.out) writeFileSync(values.out, `${JSON.stringify(out, null, 2)}\n`);
