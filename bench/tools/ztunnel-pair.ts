/**
 * The ztunnel pair benchmark (needs root): two nodes in network namespaces, a client pod on one,
 * a server pod on the other, skua-ztunnel on each, HBONE between them — against plain TCP between
 * two plain pods and a stunnel (TLS) pair between the same two plain pods (bench/tools/ztunnel/pair.ts).
 *   node bench/tools/ztunnel-pair.ts [--mb 200] [--runs 3] [--seconds 5] [--rps-seconds 20] [--ref main,WORKTREE]
 * Measures: throughput with 1 and 8 streams; new connections (tunnels) per second; RSS per 1,000
 * open tunnels; CPU and RSS of the ztunnel pair per 1,000 rps of 1 KB HTTP responses (fortio,
 * Istio's load generator, at a fixed 1,000 qps over 16 connections). --ref runs each build (a git
 * ref, or WORKTREE for the files as they are) through the same measurements in one run, one after
 * the other, so that they are compared under the same load. Writes bench/results/ztunnel-<time>.json
 * and prints a table with Istio's published figures beside ours.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { describeRef, ztunnelBinForRef } from './ztunnel/builds.ts';
import { inPod, load, startPair } from './ztunnel/pair.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const LOAD = join(ROOT, 'bench/tools/ztunnel/load.ts');
const FORTIO = process.env.FORTIO ?? '/root/go/bin/fortio';
const { values } = parseArgs({ options: {
  mb: { type: 'string', default: '200' }, runs: { type: 'string', default: '3' }, seconds: { type: 'string', default: '5' },
  'rps-seconds': { type: 'string', default: '20' }, ref: { type: 'string', default: 'WORKTREE' },
} });
const MB = Number(values.mb), RUNS = Number(values.runs), SECONDS = Number(values.seconds), RPS_SECONDS = Number(values['rps-seconds']);
type Json = Record<string, unknown>;

/** Istio's published figures (istio.io performance and scalability; ztunnel HBONE vs plain TCP). */
const ISTIO = { vcpuPer1000rps: 0.06, mbPer1000rps: 12, hboneShareOfTcp: 0.42 };

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** utime+stime (clock ticks) and RSS (kB) of a process. */
function usage(pid: number): { ticks: number; rssKb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return { ticks: Number(f[11]) + Number(f[12]), rssKb: Number(rss?.[1] ?? 0) };
}

async function benchBuild(bin: string): Promise<Json> {
  const pair = await startPair(6, {}, bin);
  const { client, server, plainClient: plainC, plainServer: plainS, ztunnelPids: zt } = pair;
  const out: Json = {};
  try {
    // Idle: both ztunnels after start-up (pods known, certificates fetched), before any tunnel.
    await sleep(2000);
    out.idleRssMb = zt.map((p) => usage(p).rssKb / 1024);
    const paths: Array<[string, string, string, number]> = [
      ['plain TCP', plainC.netns, plainS.ip, 8080], ['stunnel pair', plainC.netns, '127.0.0.1', 9000], ['ztunnel pair (HBONE)', client.netns, server.ip, 8080],
    ];
    const throughput: Json = {};
    for (const [name, ns, host, port] of paths) {
      for (const streams of [1, 8]) {
        const runs: number[] = [];
        await load(ns, 'throughput', host, String(port), '16', String(streams));
        for (let i = 0; i < RUNS; i++) runs.push((await load(ns, 'throughput', host, String(port), String(MB), String(streams))).gbps as number);
        throughput[`${name}, ${streams} stream${streams > 1 ? 's' : ''}`] = { gbps: median(runs), runs };
        process.stderr.write(`${name} ${streams}: ${median(runs).toFixed(2)} Gb/s\n`);
      }
    }
    out.throughputGbps = throughput;

    const connrate: Json = {};
    for (const [name, ns, host, port] of [paths[0], paths[2]]) {
      const r = await load(ns, 'connrate', host, String(port), String(SECONDS), '8');
      connrate[name] = r;
      process.stderr.write(`${name} connections/s: ${Math.round(r.perSecond as number)}\n`);
    }
    out.newConnectionsPerSecond = connrate;

    // RSS per 1,000 open tunnels: both ztunnels after a quiet spell, then with 2,000 connections held open.
    // The spell is long enough for V8's memory reducer and the ztunnel's idle heap trim (checked every 5 s)
    // to give back what the bursts before left, else that trim lands in the count below and makes it negative.
    await sleep(15_000);
    const rssBefore = zt.map((p) => usage(p).rssKb);
    const holder = spawn('ip', ['netns', 'exec', client.netns, process.execPath, LOAD, 'hold', server.ip, '8080', '2000'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const held = await new Promise<Json>((resolve) => holder.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()) as Json)));
    await sleep(5000);
    const rssHeld = zt.map((p) => usage(p).rssKb);
    holder.stdin.end();
    await new Promise((r) => holder.once('exit', r));
    out.tunnels = { open: held.open, rssBeforeMb: rssBefore.map((k) => k / 1024), rssWithMb: rssHeld.map((k) => k / 1024),
      mbPer1000: rssHeld.reduce((a, b, i) => a + b - rssBefore[i], 0) / 1024 / ((held.open as number) / 1000) };
    process.stderr.write(`RSS per 1,000 open tunnels (both ztunnels): ${(out.tunnels as Json).mbPer1000} MB\n`);
    // The 2,000 tunnels' teardown (records, access log lines, GC) is over before CPU is counted again.
    await sleep(5000);

    // CPU and RSS per 1,000 rps of 1 KB (fortio, fixed qps), the ztunnel pair vs direct.
    const rps: Json = {};
    const idle = zt.map(usage);
    for (const [name, ns, host] of [['direct (plain pods)', plainC.netns, plainS.ip], ['ztunnel pair', client.netns, server.ip]] as const) {
      const before = zt.map(usage);
      const t0 = performance.now();
      const json = await inPod(ns, FORTIO, 'load', '-qps', '1000', '-c', '16', '-t', `${RPS_SECONDS}s`, '-json', '-', '-quiet', `http://${host}:8081/`);
      const secs = (performance.now() - t0) / 1000;
      const after = zt.map(usage);
      const r = JSON.parse(json.slice(json.indexOf('{'))) as { ActualQPS: number; DurationHistogram: { Percentiles: Array<{ Percentile: number; Value: number }> }; RetCodes: Record<string, number> };
      const p = (q: number): number => (r.DurationHistogram.Percentiles.find((x) => x.Percentile === q)?.Value ?? NaN) * 1000;
      const vcpu = after.reduce((a, u, i) => a + u.ticks - before[i].ticks, 0) / 100 / secs;
      rps[name] = { qps: r.ActualQPS, p50ms: p(50), p99ms: p(99), codes: r.RetCodes, ztunnelVcpuPer1000rps: vcpu / (r.ActualQPS / 1000), ztunnelRssMb: after.map((u) => u.rssKb / 1024),
        ztunnelRssGrowthMb: after.map((u, i) => (u.rssKb - idle[i].rssKb) / 1024) };
      process.stderr.write(`${name}: ${Math.round(r.ActualQPS)} qps p50 ${p(50).toFixed(2)} ms p99 ${p(99).toFixed(2)} ms, ztunnels ${(vcpu / (r.ActualQPS / 1000)).toFixed(3)} vCPU/1000 rps\n`);
    }
    out.rps1k = rps;
  } finally {
    await pair.cluster.destroy();
  }
  return out;
}

function table(builds: Array<{ ref: string; commit: string; result: Json }>): string {
  const get = (r: Json, ...path: string[]): number => path.reduce<unknown>((o, k) => (o as Json | undefined)?.[k], r) as number;
  const f = (n: number, d = 2): string => (Number.isFinite(n) ? n.toFixed(d) : '–');
  const rows: Array<[string, (r: Json) => string, string]> = [
    ['idle RSS per ztunnel, MB', (r) => (r.idleRssMb as number[]).map((x) => f(x, 0)).join(' / '), '–'],
    ['HBONE 1 stream, Gb/s', (r) => f(get(r, 'throughputGbps', 'ztunnel pair (HBONE), 1 stream', 'gbps')), '–'],
    ['HBONE 8 streams, Gb/s', (r) => f(get(r, 'throughputGbps', 'ztunnel pair (HBONE), 8 streams', 'gbps')), '–'],
    ['HBONE / plain TCP, 1 stream', (r) => `${f((100 * get(r, 'throughputGbps', 'ztunnel pair (HBONE), 1 stream', 'gbps')) / get(r, 'throughputGbps', 'plain TCP, 1 stream', 'gbps'), 0)}%`, `${ISTIO.hboneShareOfTcp * 100}%`],
    ['stunnel pair 1 / 8 streams, Gb/s', (r) => `${f(get(r, 'throughputGbps', 'stunnel pair, 1 stream', 'gbps'))} / ${f(get(r, 'throughputGbps', 'stunnel pair, 8 streams', 'gbps'))}`, '–'],
    ['plain TCP 1 / 8 streams, Gb/s', (r) => `${f(get(r, 'throughputGbps', 'plain TCP, 1 stream', 'gbps'))} / ${f(get(r, 'throughputGbps', 'plain TCP, 8 streams', 'gbps'))}`, '–'],
    ['new tunnels/s (plain TCP)', (r) => `${f(get(r, 'newConnectionsPerSecond', 'ztunnel pair (HBONE)', 'perSecond'), 0)} (${f(get(r, 'newConnectionsPerSecond', 'plain TCP', 'perSecond'), 0)})`, '–'],
    ['RSS per 1,000 open tunnels (pair), MB', (r) => f(get(r, 'tunnels', 'mbPer1000'), 1), '–'],
    ['RSS before / with 2,000 tunnels, MB', (r) => `${(get(r, 'tunnels', 'rssBeforeMb') as unknown as number[]).map((x) => f(x, 0)).join('/')} → ${(get(r, 'tunnels', 'rssWithMb') as unknown as number[]).map((x) => f(x, 0)).join('/')}`, '–'],
    ['vCPU per 1,000 rps (pair)', (r) => f(get(r, 'rps1k', 'ztunnel pair', 'ztunnelVcpuPer1000rps'), 3), `${ISTIO.vcpuPer1000rps} per ztunnel`],
    ['RSS at 1,000 rps per ztunnel, MB', (r) => (get(r, 'rps1k', 'ztunnel pair', 'ztunnelRssMb') as unknown as number[]).map((x) => f(x, 0)).join(' / '), `${ISTIO.mbPer1000rps}`],
    ['p50 / p99 at 1,000 rps, ms (direct)', (r) => `${f(get(r, 'rps1k', 'ztunnel pair', 'p50ms'))} / ${f(get(r, 'rps1k', 'ztunnel pair', 'p99ms'))} (${f(get(r, 'rps1k', 'direct (plain pods)', 'p50ms'))} / ${f(get(r, 'rps1k', 'direct (plain pods)', 'p99ms'))})`, '–'],
  ];
  const head = `| | ${builds.map((b) => `${b.ref} (${b.commit})`).join(' | ')} | Istio ztunnel |`;
  const sep = `|---|${builds.map(() => '---|').join('')}---|`;
  return [head, sep, ...rows.map(([name, cell, istio]) => `| ${name} | ${builds.map((b) => cell(b.result)).join(' | ')} | ${istio} |`)].join('\n');
}

const tmp = mkdtempSync(join(tmpdir(), 'skua-zt-bench-'));
const out: Json = { date: new Date().toISOString(), command: `node bench/tools/ztunnel-pair.ts ${process.argv.slice(2).join(' ')}`.trim(), mb: MB, runs: RUNS, loadavgAtStart: loadavg(), istio: ISTIO };
const builds: Array<{ ref: string; commit: string; result: Json }> = [];
try {
  for (const ref of values.ref.split(',')) {
    process.stderr.write(`== ${ref} (load ${loadavg().map((x) => x.toFixed(2)).join(' ')})\n`);
    builds.push({ ref, commit: describeRef(ref), result: await benchBuild(ztunnelBinForRef(ref, tmp)) });
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
out.builds = builds;
out.loadavgAtEnd = loadavg();
const md = table(builds);
out.table = md;
const file = join(ROOT, `bench/results/ztunnel-${new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19)}Z.json`);
writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
process.stdout.write(`${md}\nload average at start ${(out.loadavgAtStart as number[]).join(' ')}, at end ${(out.loadavgAtEnd as number[]).join(' ')}\nwritten ${file}\n`);
