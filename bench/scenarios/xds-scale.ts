/**
 * xDS at scale (`--only xds-scale`): one push of N EDS clusters (default 20,000, `--xds-clusters`)
 * with their ClusterLoadAssignments to a running skua-proxy, then a shrink back to one cluster.
 * The ADS server is skua-controlplane's (SotW + Delta) running in this process; the proxy is a
 * child process; an external probe (tools/latency-probe.ts, its own process) sends 200 req/s
 * over 8 keep-alive connections to a static direct_response listener of the proxy, so every
 * stall of the proxy's event loops shows up as request latency. Measured per row:
 *   push s         the push leaving the server → the last service's route reaching its endpoint
 *   max block ms   the probe's longest request during the push minus the idle p50 (≈ the longest
 *                  time an event loop serving traffic was blocked, in wall time)
 *   longest task   the longest synchronous task of any proxy thread during the push by that thread's
 *                  CPU time (tools/loop-monitor.ts, preloaded): what a busy machine does not inflate;
 *                  and how many tasks took over 50 ms
 *   loop gap wall  the longest time any proxy thread's loop did not come round, in wall time, seen
 *                  from inside the proxy: a task, a GC pause, or the thread waiting for a CPU
 *   GC pause       the longest GC pause of any proxy thread during the push (PerformanceObserver 'gc')
 *   CPU s          the proxy's CPU time (all threads, utime + stime) during the push
 *   p99 idle/push  the probe's p99 in a 5 s idle window before the push, and during the push
 *   RSS MB         after the push settled (1 or 2 workers), and after shrinking to one cluster (after the GC below)
 *   heap MB        V8 heap in use after a full GC, summed over the proxy's threads (what is retained)
 *   assignments    ClusterLoadAssignments in /config_dump?include_eds after the shrink
 * Acceptance (issue 16): per row of the build under test, the longest block ≤ 50 ms and p99 during the
 * push ≤ 2× idle p99. `--skua-before REF` runs a git ref's build too, each flavour before and after
 * side by side (rows marked "before"); checks apply to the build under test only.
 * The proxy runs with the V8 flags the proxy image ships (SHIPPED_V8_FLAGS).
 * For profiling: XDS_SCALE_ONLY=delta-1|delta-2|sotw-1 runs one row; XDS_SCALE_NODE_ARGS adds node flags to
 * the proxy (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof --trace-gc"); the proxy's stdout and stderr are kept
 * whole in proxy-<row>.log next to the loop monitor's files, in a directory removed after the run unless
 * XDS_SCALE_KEEP=DIR names one (which then also gets the probe's samples, probe-<row>.json) (bench/tools/cpuprofile-tasks.ts lists a profile's long tasks;
 * bench/tools/probe-timeline.ts DIR splits the slow requests' time into GC pauses, loop gaps and CPU waits).
 */
import http from 'node:http';
import path from 'node:path';
import { writeFileSync, mkdirSync } from 'node:fs';
import { AdsServer } from '../../packages/controlplane/src/ads/server.ts';
import { Snapshot } from '../../packages/controlplane/src/ads/snapshot.ts';
import { groupOf } from '../../packages/controlplane/src/files.ts';
import type { ResourceGroup } from '../../packages/controlplane/src/ads/resources.ts';
import { progress } from '../lib/progress.ts';
import { startProcess, stopProcess, type Proc } from '../lib/procs.ts';
import { freePort, HOST, httpGet, waitForReady } from '../lib/net.ts';
import { meshResources, svcHost } from '../lib/mesh-resources.ts';
import { REPO_ROOT } from '../lib/targets.ts';
import { skuaEntryForRef } from '../lib/refs.ts';
import { cpuMs, rssMb } from '../lib/proc-stats.ts';
import { pausesIn, retainedHeap, tasksIn } from '../lib/monitor-files.ts';
import type { CheckOutcome, Column, Options, Row, ScenarioResult } from '../lib/types.ts';

type Json = Record<string, unknown>;
const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const ROUTE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const PROBE_RPS = 200;
const PROBE_CONNECTIONS = 8;
const IDLE_MS = 5000;
const PUSH_LIMIT_MS = 600_000;
/** Issue 16's goals for the push. */
const MAX_BLOCK_MS = 50;
const MAX_P99_RATIO = 2;
/**
 * What a sidecar runs with: the proxy image's NODE_OPTIONS cap V8's young generation at 2 x 4 MB and
 * bin/skua-proxy.js starts with --heap-growing-percent=50 (bin/v8-flags.js; named here for a
 * --skua-before build older than that). The young generation's size decides how long each scavenge
 * of a push's garbage takes, so a push measured with V8's default 2 x 16 MB would not be the push that ships.
 */
const SHIPPED_V8_FLAGS = ['--max-semi-space-size=4', '--heap-growing-percent=50'];
/** Rows of the `--skua-before` build start with this. */
const BEFORE = 'before';

const COLUMNS: Column[] = [
  { key: 'pushS', title: 'push s', digits: 1, better: 'lower' },
  { key: 'maxBlockMs', title: 'max block ms', digits: 0, better: 'lower' },
  { key: 'longestTaskMs', title: 'longest task CPU ms', digits: 0, better: 'lower' },
  { key: 'tasksOver50', title: 'tasks > 50 ms CPU', digits: 0, better: 'lower' },
  { key: 'loopGapWallMs', title: 'loop gap wall ms', digits: 0, better: 'lower' },
  { key: 'gcLongestMs', title: 'longest GC pause ms', digits: 0, better: 'lower' },
  { key: 'cpuPushS', title: 'CPU s', digits: 1, better: 'lower' },
  { key: 'p99IdleMs', title: 'p99 idle ms', digits: 1, better: 'lower' },
  { key: 'p99PushMs', title: 'p99 push ms', digits: 1, better: 'lower' },
  { key: 'probeErrors', title: 'probe errors', digits: 0, better: 'lower' },
  { key: 'rssPushMb', title: 'RSS after push MB', digits: 0, better: 'lower' },
  { key: 'rssShrunkMb', title: 'RSS after shrink MB', digits: 0, better: 'lower' },
  { key: 'heapPushMb', title: 'heap after push MB (GC)', digits: 0, better: 'lower' },
  { key: 'heapShrunkMb', title: 'heap after shrink MB (GC)', digits: 0, better: 'lower' },
  { key: 'assignments', title: 'assignments after shrink', digits: 0, better: 'lower' },
];

const epoch = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function quantile(sorted: readonly number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;
}

/** The route config names only the first and the last service (the push is about CDS/EDS). */
function resources(n: number, port: number, backendPort: number): Json[] {
  const mesh = meshResources(n, port, backendPort);
  const vhost = (i: number): Json => ({ name: svcHost(i), domains: [svcHost(i)], routes: [{ match: { prefix: '/' }, route: { cluster: (mesh.clusters[i] as Json).name } }] });
  const route = { '@type': ROUTE, name: '9080', virtual_hosts: [...new Set([0, n - 1])].map(vhost) };
  return [...mesh.clusters, ...mesh.endpoints, route, mesh.listeners.at(-1)!];
}

function bootstrap(adminPort: number, probePort: number, adsPort: number, delta: boolean): Json {
  return {
    node: { id: 'sidecar~127.0.0.1~bench.bench~bench.svc.cluster.local', cluster: 'bench' },
    admin: { address: { socket_address: { address: HOST, port_value: adminPort } } },
    dynamic_resources: {
      ads_config: { api_type: delta ? 'DELTA_GRPC' : 'GRPC', set_node_on_first_message_only: true, grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] },
      lds_config: { ads: {}, initial_fetch_timeout: '0s' }, cds_config: { ads: {}, initial_fetch_timeout: '0s' },
    },
    static_resources: {
      listeners: [{ name: 'probe', address: { socket_address: { address: HOST, port_value: probePort } }, filter_chains: [{ filters: [{
        name: 'envoy.filters.network.http_connection_manager', typed_config: { '@type': HCM, stat_prefix: 'probe',
          route_config: { virtual_hosts: [{ name: 'probe', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'ok' } } }] }] },
          http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } }] },
      }] }] }],
      clusters: [{ name: 'xds-grpc', type: 'STATIC', connect_timeout: '1s', http2_protocol_options: {},
        load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: HOST, port_value: adsPort } } } }] }] } }],
    },
  };
}

function answers(port: number, host: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: '/', agent: false, timeout: 2000, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
  });
}

async function until(what: string, check: () => Promise<boolean>, limitMs: number, everyMs = 50): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

async function statValue(adminPort: number, name: string): Promise<number> {
  // (A build that blocks its loop for minutes answers late: wait as long as a push may take.)
  const r = await httpGet(adminPort, `/stats?format=json&filter=${encodeURIComponent(`^${name.replaceAll('.', '\\.')}$`)}`, PUSH_LIMIT_MS);
  const s = (JSON.parse(r.body) as { stats: Array<{ name: string; value: number }> }).stats.find((x) => x.name === name);
  return s?.value ?? NaN;
}

/** Dynamic active clusters in the main thread's /config_dump. */
async function activeClusters(adminPort: number): Promise<number> {
  const r = await httpGet(adminPort, '/config_dump?resource=dynamic_active_clusters', PUSH_LIMIT_MS);
  return (JSON.parse(r.body) as { configs: unknown[] }).configs.length;
}

async function edsAssignments(adminPort: number): Promise<number> {
  const r = await httpGet(adminPort, '/config_dump?include_eds', 60_000);
  const dump = JSON.parse(r.body) as { configs: Json[] };
  const eds = dump.configs.find((c) => String(c['@type']).endsWith('EndpointsConfigDump'));
  return ((eds?.dynamic_endpoint_configs as unknown[] | undefined) ?? []).length;
}

interface Flavour { readonly delta: boolean; readonly workers: number }

/** `build` is '' for the build under test, else the git ref of the `--skua-before` build. */
async function runOne(f: Flavour, n: number, skuaMain: string, build: string, dir: string, small: ResourceGroup, big: ResourceGroup,
  snapshot: Snapshot, adsPort: number, listenerPort: number): Promise<Row> {
  const label = `${build ? `${BEFORE} (${build}): ` : ''}skua-proxy, ${n.toLocaleString('en-US')} EDS clusters, ${f.delta ? 'Delta' : 'SotW'}, ${f.workers} worker${f.workers > 1 ? 's' : ''}`;
  snapshot.set([small]);
  const adminPort = await freePort(), probePort = await freePort();
  const file = path.join(dir, `xds-scale-${f.delta ? 'delta' : 'sotw'}-${f.workers}.json`);
  writeFileSync(file, JSON.stringify(bootstrap(adminPort, probePort, adsPort, f.delta)));
  const row = `${f.delta ? 'delta' : 'sotw'}-${f.workers}${build ? '-before' : ''}`;
  const monitorDir = path.join(dir, `loop-${row}`);
  mkdirSync(monitorDir, { recursive: true });
  const nodeArgs = [...SHIPPED_V8_FLAGS, ...(process.env.XDS_SCALE_NODE_ARGS ?? '').split(' ').filter(Boolean)];
  const proxy = startProcess('skua-proxy', process.execPath, [...nodeArgs, '--expose-gc', '--import', path.join(REPO_ROOT, 'bench/tools/loop-monitor.ts'), path.resolve(REPO_ROOT, skuaMain),
    '-c', file, '-l', 'warn', '--concurrency', String(f.workers)], { cwd: REPO_ROOT, env: { LOOP_MONITOR_DIR: monitorDir }, logFile: path.join(dir, `proxy-${row}.log`) });
  let probe: Proc | undefined;
  try {
    await waitForReady(adminPort, proxy, 60_000);
    const first = svcHost(0), last = svcHost(n - 1);
    await until(`${first} to answer`, async () => (await answers(listenerPort, first)) === 200, 30_000);
    probe = startProcess('latency-probe', process.execPath, [path.join(REPO_ROOT, 'bench/tools/latency-probe.ts'), String(probePort), String(PROBE_RPS), String(PROBE_CONNECTIONS), '3600'], { fullStdout: true });
    const idleFrom = epoch();
    await sleep(IDLE_MS);
    const pushFrom = epoch();
    const cpuFrom = cpuMs(proxy.pid);
    snapshot.set([big]);
    await until(`${last} to answer after the push`, async () => (await answers(listenerPort, last)) === 200, PUSH_LIMIT_MS);
    const pushTo = epoch();
    const cpuPushS = (cpuMs(proxy.pid) - cpuFrom) / 1000;
    progress('xds-scale', `${label}: pushed in ${((pushTo - pushFrom) / 1000).toFixed(1)} s`);
    await sleep(3000);
    const tasks = tasksIn(monitorDir, proxy.pid, pushFrom, pushTo + 500);
    const pauses = pausesIn(monitorDir, proxy.pid, pushFrom, pushTo + 500);
    const rssPushMb = rssMb(proxy.pid);
    const active = await activeClusters(adminPort);
    await stopProcess(probe, 10_000);
    const heapPushMb = (await retainedHeap(monitorDir, proxy.pid, f.workers, 'push')).usedMb;
    const samples = JSON.parse(probe.stdout.trim().split('\n').at(-1) || '[]') as Array<[number, number, number]>;
    // Kept with the monitor's files: each request's due time, latency and status, for timelines.
    if (process.env.XDS_SCALE_KEEP) writeFileSync(path.join(dir, `probe-${row}.json`), JSON.stringify({ idleFrom, pushFrom, pushTo, samples }));
    probe = undefined;
    snapshot.set([small]);
    await until(`${last} to go away after the shrink`, async () => (await answers(listenerPort, last)) !== 200, PUSH_LIMIT_MS);
    // The main thread's config_dump, not /stats: with workers, a /stats read snapshots every thread's
    // whole store (1.7 million stats at 20,000 clusters), which would be what RSS measures.
    await until('one dynamic cluster left on the main thread', async () => (await activeClusters(adminPort)) <= 1, PUSH_LIMIT_MS, 1000);
    // Workers follow; V8 gets idle time (both builds get the same). The gauge sums threads: one dynamic and one static each.
    await sleep(10_000);
    const activeAfterShrink = await statValue(adminPort, 'cluster_manager.active_clusters');
    if (activeAfterShrink > 2 * f.workers) throw new Error(`${activeAfterShrink} clusters active over ${f.workers} threads after the shrink`);
    const shrunk = await retainedHeap(monitorDir, proxy.pid, f.workers, 'shrunk');
    await sleep(2000);
    const rssShrunkMb = rssMb(proxy.pid);
    const assignments = await edsAssignments(adminPort);
    const idle = samples.filter(([due]) => due >= idleFrom && due < pushFrom).map(([, ms]) => ms).sort((a, b) => a - b);
    const push = samples.filter(([due]) => due >= pushFrom && due < pushTo);
    const pushMs = push.map(([, ms]) => ms).sort((a, b) => a - b);
    const metrics = {
      pushS: (pushTo - pushFrom) / 1000, maxBlockMs: Math.max(0, (pushMs.at(-1) ?? NaN) - quantile(idle, 0.5)),
      // What the machine alone did to the probe: the idle window's longest request over its p50.
      maxBlockIdleMs: Math.max(0, (idle.at(-1) ?? NaN) - quantile(idle, 0.5)),
      longestTaskMs: tasks.all.at(-1) ?? 0, tasksOver50: tasks.all.filter((t) => t > 50).length,
      loopGapWallMs: tasks.longestWallMs, gcLongestMs: pauses.longestMs, gcTotalMs: pauses.totalMs, cpuPushS,
      p99IdleMs: quantile(idle, 0.99), p99PushMs: quantile(pushMs, 0.99), probeErrors: push.filter(([, , s]) => s !== 200).length,
      rssPushMb, rssShrunkMb, heapPushMb, heapShrunkMb: shrunk.usedMb, heapCommittedShrunkMb: shrunk.committedMb,
      assignments, activeClustersAfterPush: active,
    };
    progress('xds-scale', `${label}: max block ${metrics.maxBlockMs.toFixed(0)} ms (idle ${metrics.maxBlockIdleMs.toFixed(0)}), longest task ${metrics.longestTaskMs.toFixed(0)} ms CPU (${tasks.longest}), loop gap ${tasks.longestWallMs.toFixed(0)} ms wall, longest GC pause ${pauses.longestMs.toFixed(0)} ms (${pauses.totalMs.toFixed(0)} ms in all), CPU ${cpuPushS.toFixed(1)} s, p99 ${metrics.p99IdleMs.toFixed(1)} → ${metrics.p99PushMs.toFixed(1)} ms, heap ${heapPushMb.toFixed(0)} → ${shrunk.usedMb.toFixed(0)} MB (committed ${shrunk.committedMb.toFixed(0)}), RSS ${rssPushMb.toFixed(0)} → ${rssShrunkMb.toFixed(0)} MB, ${assignments} assignments left`);
    return { target: 'skua', label, metrics, samples: pushMs };
  } catch (e) {
    return { target: 'skua', label, metrics: {}, error: `${(e as Error).message}\n${proxy.stderr.slice(-2000)}` };
  } finally {
    if (probe) await stopProcess(probe);
    await stopProcess(proxy);
  }
}

export async function runXdsScale(opts: Options, tmpDir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const n = opts.xdsClusters;
  const dir = process.env.XDS_SCALE_KEEP ? path.resolve(process.env.XDS_SCALE_KEEP) : path.join(tmpDir, 'xds-scale');
  mkdirSync(dir, { recursive: true });
  const backend = http.createServer((_req, res) => res.end('a'));
  const backendPort = await new Promise<number>((r) => backend.listen(0, HOST, () => r((backend.address() as { port: number }).port)));
  const listenerPort = await freePort();
  const small = groupOf('small', resources(1, listenerPort, backendPort));
  const tb = performance.now();
  const big = groupOf('big', resources(n, listenerPort, backendPort));
  progress('xds-scale', `${n} clusters + assignments encoded in ${((performance.now() - tb) / 1000).toFixed(1)} s`);
  const snapshot = new Snapshot();
  const ads = new AdsServer(snapshot);
  const adsPort = await ads.listen(`${HOST}:0`);
  const before = opts.skuaBefore ? skuaEntryForRef(opts.skuaBefore, dir) : undefined;
  const rows: Row[] = [];
  try {
    for (const f of [{ delta: true, workers: 1 }, { delta: true, workers: 2 }, { delta: false, workers: 1 }].filter((x) => !process.env.XDS_SCALE_ONLY || process.env.XDS_SCALE_ONLY === `${x.delta ? 'delta' : 'sotw'}-${x.workers}`)) {
      if (before) rows.push(await runOne(f, n, before, opts.skuaBefore!, dir, small, big, snapshot, adsPort, listenerPort));
      rows.push(await runOne(f, n, opts.skuaMain, '', dir, small, big, snapshot, adsPort, listenerPort));
    }
  } finally {
    await ads.close();
    backend.close();
  }
  const res: ScenarioResult = {
    scenario: 'xds-scale', title: `xDS at scale: ${n.toLocaleString('en-US')} EDS clusters pushed to a live proxy, then shrunk to one`,
    startedAt, seconds: (performance.now() - t0) / 1000, primary: 'maxBlockMs', columns: COLUMNS, rows,
    settings: { clusters: n, v8Flags: SHIPPED_V8_FLAGS.join(' '), probeRps: PROBE_RPS, probeConnections: PROBE_CONNECTIONS, idleMs: IDLE_MS, skua: opts.skuaMain, ...(opts.skuaBefore ? { skuaBefore: opts.skuaBefore } : {}) },
  };
  xdsScaleChecks([res]).forEach((c, i) => { res.settings[`acceptance${i + 1}`] = `${c.status} ${c.name} (${c.detail})`; });
  return res;
}

/**
 * Issue 16's goals, per row of the build under test: no event-loop block over 50 ms during the push (as
 * the probe saw it, in wall time; the detail adds the CPU-time view and what the idle machine alone
 * did), and p99 during the push within 2× of idle.
 */
export function xdsScaleChecks(results: readonly ScenarioResult[]): CheckOutcome[] {
  const res = results.find((r) => r.scenario === 'xds-scale');
  if (!res) return [];
  const out: CheckOutcome[] = [];
  for (const row of res.rows.filter((r) => !r.label.startsWith(BEFORE))) {
    const block = `xds-scale ${row.label}: longest block during the push <= ${MAX_BLOCK_MS} ms`;
    const p99 = `xds-scale ${row.label}: p99 during the push <= ${MAX_P99_RATIO}x idle`;
    if (row.error) {
      const detail = `failed: ${row.error.split('\n')[0]}`;
      out.push({ name: block, status: 'FAIL', min: MAX_BLOCK_MS, detail }, { name: p99, status: 'FAIL', min: MAX_P99_RATIO, detail });
      continue;
    }
    const m = row.metrics;
    out.push({
      name: block, status: m.maxBlockMs <= MAX_BLOCK_MS ? 'PASS' : 'FAIL', ratio: m.maxBlockMs, min: MAX_BLOCK_MS, need: `need <= ${MAX_BLOCK_MS}`,
      detail: `${m.maxBlockMs.toFixed(0)} ms wall as the probe saw it (the idle window alone: ${m.maxBlockIdleMs.toFixed(0)} ms); inside the proxy: longest loop gap ${m.loopGapWallMs.toFixed(0)} ms wall, longest task ${m.longestTaskMs.toFixed(0)} ms CPU (${m.tasksOver50} over 50), longest GC pause ${m.gcLongestMs.toFixed(0)} ms`,
    });
    const ratio = m.p99PushMs / m.p99IdleMs;
    out.push({
      name: p99, status: ratio <= MAX_P99_RATIO && m.probeErrors === 0 ? 'PASS' : 'FAIL', ratio, min: MAX_P99_RATIO, need: `need <= ${MAX_P99_RATIO}`,
      detail: `p99 ${m.p99IdleMs.toFixed(1)} → ${m.p99PushMs.toFixed(1)} ms = ${ratio.toFixed(2)}x${m.probeErrors ? `, ${m.probeErrors} probe errors` : ''}`,
    });
  }
  return out;
}
