/**
 * The waypoint benchmark (needs root; fortio): the ambient mesh of packages/waypoint/test/lib/mesh.ts
 * (two nodes, skua-ztunnel each, skua-controlplane from Istio YAML, skua-waypoint as Istio runs it)
 * with nginx answering 1 KB in one server pod. Side by side in one run, alternating:
 *   - through the waypoint: client → ztunnel → waypoint → ztunnel → nginx (the service VIP, bound to it);
 *   - the same ztunnel path without it: client → ztunnel → ztunnel → the same nginx (its pod address).
 * fortio (Istio's load generator) sends 1 KB POSTs at a fixed rate over 16 connections; measured: the
 * latency percentiles of both paths (the waypoint's added p50/p90/p99) and the waypoint's CPU (vCPU per
 * 1,000 rps) and RSS, beside Istio's published 0.25 vCPU and 60 MB per 1,000 rps.
 *   node bench/tools/waypoint.ts [--rps 1000] [--seconds 20] [--runs 2] [--concurrency 1]
 * Writes bench/results/waypoint-<time>.json and prints it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { VIP, WaypointMesh } from '../../packages/waypoint/test/lib/mesh.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const FORTIO = process.env.FORTIO ?? '/root/go/bin/fortio';
const { values } = parseArgs({ options: { rps: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '20' }, runs: { type: 'string', default: '2' }, concurrency: { type: 'string', default: '1' } } });
const RPS = Number(values.rps), SECONDS = Number(values.seconds), RUNS = Number(values.runs), CONCURRENCY = Number(values.concurrency);
/** Istio's published waypoint cost (istio.io performance and scalability, 1 KB payload). */
const ISTIO_WAYPOINT = { vcpuPer1000Rps: 0.25, mbPer1000Rps: 60 };
type Json = Record<string, unknown>;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const round = (x: number, d = 3): number => Math.round(x * 10 ** d) / 10 ** d;

/** utime+stime (clock ticks), VmRSS and RssAnon (kB) of a process (all its threads). */
function usage(pid: number): { ticks: number; rssKb: number; anonKb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { ticks: Number(f[11]) + Number(f[12]), rssKb: kb('VmRSS'), anonKb: kb('RssAnon') };
}

/** The node process below `ip netns exec` / `sh -c exec` wrappers. */
function nodeProcess(pid: number): number {
  for (let p = pid, depth = 0; depth < 4; depth++) {
    if (readFileSync(`/proc/${p}/comm`, 'utf8').trim() !== 'ip') return p;
    const children = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    if (children.length === 0) return p;
    p = children[0];
  }
  return pid;
}

interface FortioResult { ActualQPS: number; DurationHistogram: { Percentiles: Array<{ Percentile: number; Value: number }> }; RetCodes: Record<string, number> }

async function fortio(mesh: WaypointMesh, url: string, seconds: number): Promise<FortioResult> {
  const out = await mesh.inPod('cl', FORTIO, 'load', '-qps', String(RPS), '-c', '16', '-t', `${seconds}s`, '-p', '50,90,99', '-payload-size', '1024',
    '-json', '-', '-quiet', url);
  return JSON.parse(out.slice(out.indexOf('{'))) as FortioResult;
}

async function main(): Promise<void> {
  const mesh = new WaypointMesh({ subnet: 9, apps: false, concurrency: CONCURRENCY });
  const out: Json = {
    date: new Date().toISOString(), command: `node bench/tools/waypoint.ts ${process.argv.slice(2).join(' ')}`.trim(),
    rps: RPS, seconds: SECONDS, runs: RUNS, waypointConcurrency: CONCURRENCY, payloadBytes: 1024, responseBytes: 1024, connections: 16,
    loadavgAtStart: loadavg(), istioPublished: ISTIO_WAYPOINT,
  };
  try {
    await mesh.start();
    // nginx answers any method with 1 KB, in the echo-v1 pod (service echo-v1, bound to the waypoint).
    const dir = mesh.cluster.dir, server = mesh.pod('e1');
    const conf = join(dir, 'nginx.conf');
    writeFileSync(conf, `daemon off; user root; worker_processes 1; pid ${dir}/nginx.pid; error_log /dev/null; events { worker_connections 1024; }
http { access_log off; client_body_buffer_size 16k; server { listen 8080; location / { return 200 "${'x'.repeat(1024)}"; } } }\n`);
    mesh.cluster.topo.spawnIn(server.netns, 'nginx', ['-c', conf]);
    const paths: Array<[string, string]> = [['through the waypoint', `http://${VIP.echoV1}/`], ['ztunnels only', `http://${server.ip}:8080/`]];
    const wpPid = nodeProcess(mesh.waypoint!.pid as number);
    await new Promise((r) => setTimeout(r, 2000));
    const fresh = usage(wpPid);
    for (const [, url] of paths) await fortio(mesh, url, 3);
    const idle = usage(wpPid);
    const results = new Map<string, Array<{ qps: number; p50: number; p90: number; p99: number; codes: Record<string, number>; vcpu: number; rssMb: number; anonMb: number }>>();
    for (let run = 0; run < RUNS; run++) {
      for (const [name, url] of paths) {
        const before = usage(wpPid);
        const t0 = performance.now();
        const r = await fortio(mesh, url, SECONDS);
        const secs = (performance.now() - t0) / 1000;
        const after = usage(wpPid);
        const p = (q: number): number => (r.DurationHistogram.Percentiles.find((x) => x.Percentile === q)?.Value ?? NaN) * 1000;
        const vcpu = (after.ticks - before.ticks) / 100 / secs;
        const row = { qps: r.ActualQPS, p50: p(50), p90: p(90), p99: p(99), codes: r.RetCodes, vcpu, rssMb: after.rssKb / 1024, anonMb: after.anonKb / 1024 };
        let list = results.get(name);
        if (!list) { list = []; results.set(name, list); }
        list.push(row);
        process.stderr.write(`${name} #${run + 1}: ${Math.round(r.ActualQPS)} qps p50 ${p(50).toFixed(2)} p90 ${p(90).toFixed(2)} p99 ${p(99).toFixed(2)} ms, codes ${JSON.stringify(r.RetCodes)}, waypoint ${vcpu.toFixed(3)} vCPU, RSS ${(after.rssKb / 1024).toFixed(1)} MB\n`);
      }
    }
    const summary = (name: string): Json => {
      const list = results.get(name)!;
      const m = (k: 'qps' | 'p50' | 'p90' | 'p99' | 'vcpu' | 'rssMb' | 'anonMb'): number => median(list.map((x) => x[k]));
      return { qps: round(m('qps'), 1), p50ms: round(m('p50')), p90ms: round(m('p90')), p99ms: round(m('p99')), waypointVcpu: round(m('vcpu')), waypointRssMb: round(m('rssMb'), 1), runs: list };
    };
    const wp = summary(paths[0][0]), base = summary(paths[1][0]);
    const qpsK = (wp.qps as number) / 1000;
    out.paths = { [paths[0][0]]: wp, [paths[1][0]]: base };
    out.waypoint = {
      addedP50ms: round((wp.p50ms as number) - (base.p50ms as number)), addedP90ms: round((wp.p90ms as number) - (base.p90ms as number)), addedP99ms: round((wp.p99ms as number) - (base.p99ms as number)),
      vcpuPer1000Rps: round((wp.waypointVcpu as number) / qpsK), vcpuPer1000RpsWithoutLoad: round((base.waypointVcpu as number) / qpsK),
      rssMbBeforeLoad: round(fresh.rssKb / 1024, 1), rssAnonMbBeforeLoad: round(fresh.anonKb / 1024, 1),
      rssMbUnderLoad: wp.waypointRssMb, rssMbAfterWarmup: round(idle.rssKb / 1024, 1), rssAnonMbAfterWarmup: round(idle.anonKb / 1024, 1),
      rssAnonMbUnderLoad: round(median(results.get(paths[0][0])!.map((x) => x.anonMb)), 1),
    };
    out.loadavgAtEnd = loadavg();
  } finally {
    await mesh.destroy();
  }
  const file = join(ROOT, `bench/results/waypoint-${new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19)}Z.json`);
  writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(out, null, 2)}\nwritten ${file}\n`);
}

await main();
