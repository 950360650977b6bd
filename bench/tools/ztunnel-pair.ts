/**
 * The ztunnel pair benchmark (needs root): two nodes in network namespaces, a client pod on one,
 * a server pod on the other, skua-ztunnel on each, HBONE between them — against plain TCP between
 * two plain pods and a stunnel (TLS) pair between the same two plain pods.
 *   node bench/tools/ztunnel-pair.ts [--mb 200] [--runs 3] [--seconds 5] [--rps-seconds 20]
 * Measures: throughput with 1 and 8 streams; new connections (tunnels) per second; RSS per 1,000
 * open tunnels; CPU and RSS of the ztunnel pair per 1,000 rps of 1 KB HTTP responses (fortio,
 * Istio's load generator, at a fixed 1,000 qps over 16 connections). Writes
 * bench/results/ztunnel-<time>.json and prints a table.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { promisify } from 'node:util';
import { TYPE_URL } from '../../packages/ztunnel/src/core.ts';
import { ip4, ZtunnelCluster, type PodDef } from '../../packages/ztunnel/test/lib/cluster.ts';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const LOAD = join(ROOT, 'bench/tools/ztunnel/load.ts');
const FORTIO = process.env.FORTIO ?? '/root/go/bin/fortio';
const { values } = parseArgs({ options: { mb: { type: 'string', default: '200' }, runs: { type: 'string', default: '3' }, seconds: { type: 'string', default: '5' }, 'rps-seconds': { type: 'string', default: '20' } } });
const MB = Number(values.mb), RUNS = Number(values.runs), SECONDS = Number(values.seconds), RPS_SECONDS = Number(values['rps-seconds']);
type Json = Record<string, unknown>;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function inPod(netns: string, ...args: string[]): Promise<string> {
  return (await execFileAsync('ip', ['netns', 'exec', netns, ...args], { maxBuffer: 1 << 24 })).stdout;
}

async function load(netns: string, ...args: string[]): Promise<Json> {
  return JSON.parse(await inPod(netns, process.execPath, LOAD, ...args)) as Json;
}

/** utime+stime (clock ticks) and RSS (kB) of a process and its children. */
function usage(pid: number): { ticks: number; rssKb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return { ticks: Number(f[11]) + Number(f[12]), rssKb: Number(rss?.[1] ?? 0) };
}

/** The node process under `ip netns exec` (its only child). */
function nodePid(wrapperPid: number): number {
  const children = readFileSync(`/proc/${wrapperPid}/task/${wrapperPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return children[0] ?? wrapperPid;
}

async function main(): Promise<void> {
  const c = new ZtunnelCluster(2, 6, 'with-xds');
  const out: Json = { date: new Date().toISOString(), command: `node bench/tools/ztunnel-pair.ts ${process.argv.slice(2).join(' ')}`.trim(), mb: MB, runs: RUNS, loadavgAtStart: loadavg() };
  try {
    const pods: PodDef[] = [
      { node: 1, short: 'bc', host: 2, info: { name: 'client', namespace: 'default', serviceAccount: 'sleep' } },
      { node: 2, short: 'bs', host: 2, info: { name: 'server', namespace: 'default', serviceAccount: 'httpbin' } },
      { node: 1, short: 'pc', host: 3 },
      { node: 2, short: 'ps', host: 3 },
    ];
    c.addPods(pods);
    const [client, server, plainC, plainS] = ['bc', 'bs', 'pc', 'ps'].map((s) => c.pod(s));
    const wl = (name: string, ip: string, node: string, sa: string): Json => ({
      '@type': TYPE_URL.address, workload: { uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', service_account: sa, addresses: [ip4(ip)], node, tunnel_protocol: 'HBONE', workload_name: name },
    });
    c.publish([wl('client', client.ip, 'node1', 'sleep'), wl('server', server.ip, 'node2', 'httpbin')]);
    writeFileSync(join(c.dir, '1k'), 'x'.repeat(1024));
    for (const p of [server, plainS]) {
      const conf = join(c.dir, `nginx-${p.netns}.conf`);
      writeFileSync(conf, `daemon off; user root; worker_processes 1; pid ${c.dir}/nginx-${p.netns}.pid; error_log /dev/null; events { worker_connections 1024; }
http { access_log off; server { listen 8081; location / { root ${c.dir}; try_files /1k =404; } } }\n`);
      c.topo.spawnIn(p.netns, process.execPath, [LOAD, 'sink', '8080']);
      c.topo.spawnIn(p.netns, 'nginx', ['-c', conf]);
    }
    // stunnel between the plain pods: client side on 127.0.0.1:9000 → TLS → server side 9443 → 8080.
    await execFileAsync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=bench',
      '-keyout', join(c.dir, 'st.key'), '-out', join(c.dir, 'st.crt')]);
    writeFileSync(join(c.dir, 'sts.conf'), `foreground = yes\npid =\n[s]\naccept = 9443\nconnect = 127.0.0.1:8080\ncert = ${c.dir}/st.crt\nkey = ${c.dir}/st.key\n`);
    writeFileSync(join(c.dir, 'stc.conf'), `foreground = yes\npid =\n[c]\nclient = yes\naccept = 127.0.0.1:9000\nconnect = ${plainS.ip}:9443\n`);
    c.topo.spawnIn(plainS.netns, 'stunnel4', [join(c.dir, 'sts.conf')]);
    c.topo.spawnIn(plainC.netns, 'stunnel4', [join(c.dir, 'stc.conf')]);
    await c.start(pods);
    await new Promise((r) => setTimeout(r, 1000));
    const zt = c.ztunnels.map((p) => nodePid(p.pid as number));

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
    await new Promise((r) => setTimeout(r, 5000));
    const rssBefore = zt.map((p) => usage(p).rssKb);
    const holder = spawn('ip', ['netns', 'exec', client.netns, process.execPath, LOAD, 'hold', server.ip, '8080', '2000'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const held = await new Promise<Json>((resolve) => holder.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()) as Json)));
    await new Promise((r) => setTimeout(r, 5000));
    const rssHeld = zt.map((p) => usage(p).rssKb);
    holder.stdin.end();
    await new Promise((r) => holder.once('exit', r));
    out.tunnels = { open: held.open, rssBeforeMb: rssBefore.map((k) => k / 1024), rssWithMb: rssHeld.map((k) => k / 1024),
      mbPer1000: rssHeld.reduce((a, b, i) => a + b - rssBefore[i], 0) / 1024 / ((held.open as number) / 1000) };
    process.stderr.write(`RSS per 1,000 open tunnels (both ztunnels): ${(out.tunnels as Json).mbPer1000} MB\n`);

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
    out.loadavgAtEnd = loadavg();
  } finally {
    await c.destroy();
  }
  const file = join(ROOT, `bench/results/ztunnel-${new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19)}Z.json`);
  writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(out, null, 2)}\nwritten ${file}\n`);
}

await main();
