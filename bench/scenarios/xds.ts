/**
 * xDS scenario (`--only xds`): what applying a mesh costs skua-proxy. skua-controlplane
 * (a real child process) serves istiod-shaped resources for N services (bench/lib/mesh-resources.ts:
 * N EDS clusters + N endpoint sets, one RouteConfiguration with N virtual hosts, N/10 TCP
 * listeners, one HTTP listener). Measured per ADS flavour (Delta, as istiod uses, and SotW):
 *   apply ms    proxy spawn → /ready (CDS → EDS warm → LDS → RDS), minus a static-bootstrap
 *               proxy's spawn → /ready in the same run (process start-up)
 *   CPU ms      the proxy's utime+stime at /ready, minus the static proxy's
 *   RSS MB      the proxy's RSS once live, and the growth over the static proxy
 *   change ms   one service's endpoints change (a file the control plane watches) until that
 *               service's traffic reaches the new backend; median of 5 (includes the control
 *               plane's 100 ms file-watch debounce, reported separately)
 *   at proxy ms the same change from the push's first byte reaching the proxy's socket (a relay
 *               between proxy and control plane notes it) to the end of the first response from
 *               the new backend, requests sent back to back on one kept-alive connection: an upper
 *               bound of the proxy's own time by one request's round trip; median of 5
 *   request ms  one request's round trip on that connection while nothing changes (median of 200)
 * For profiling: XDS_NODE_ARGS adds node flags to the ADS proxies (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
 */
import { renameSync, writeFileSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { progress } from '../lib/progress.ts';
import { startProcess, stopProcess, type Proc } from '../lib/procs.ts';
import { freePort, HOST, waitForReady } from '../lib/net.ts';
import { claFor, meshResources, svcHost } from '../lib/mesh-resources.ts';
import { REPO_ROOT } from '../lib/targets.ts';
import { cpuMs, rssMb } from '../lib/proc-stats.ts';
import type { Column, Options, Row, ScenarioResult } from '../lib/types.ts';
import { startXdsRelay } from '../lib/xds-relay.ts';
import { istioStatsMatcher } from '../../packages/proxy/src/api/envoy.ts';

export const SERVICES = 5000;
const CP_MAIN = path.join(REPO_ROOT, 'packages/controlplane/src/main.ts');
const DEBOUNCE_MS = 100;

const COLUMNS: Column[] = [
  { key: 'applyMs', title: 'apply ms', digits: 0, better: 'lower' },
  { key: 'cpuMs', title: 'apply CPU ms', digits: 0, better: 'lower' },
  { key: 'rssMb', title: 'RSS MB', digits: 1, better: 'lower' },
  { key: 'rssGrowthMb', title: 'RSS growth MB', digits: 1, better: 'lower' },
  { key: 'changeMs', title: 'endpoint change ms (median)', digits: 1, better: 'lower' },
  { key: 'changeAtProxyMs', title: 'endpoint change at the proxy ms (median)', digits: 2, better: 'lower' },
  { key: 'requestMs', title: 'one request ms (median)', digits: 2, better: 'lower' },
  { key: 'cpStartMs', title: 'control plane load ms', digits: 0, better: 'lower' },
];

function backend(name: string): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((_req, res) => { res.setHeader('x-backend', name); res.end(name); });
  return new Promise((resolve) => server.listen(0, HOST, () => resolve({ server, port: (server.address() as { port: number }).port })));
}

function whoAnswers(port: number, host: string, agent: http.Agent | false = false): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: '/', agent, timeout: 1000, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.headers['x-backend'] ?? res.statusCode)));
    });
    req.on('error', () => resolve('error'));
    req.on('timeout', () => req.destroy());
  });
}

function writeAtomically(file: string, json: unknown): void {
  writeFileSync(file + '.tmp', JSON.stringify(json));
  renameSync(file + '.tmp', file);
}

/** The stats_matcher pilot-agent renders for a sidecar (Istio's default inclusion list). */
const ISTIO_STATS = { use_all_default_tags: false, stats_matcher: istioStatsMatcher({ annotations: undefined, proxyStatsMatcher: undefined, instanceIps: [HOST], exitOnZeroActiveConnections: false, metadataDiscovery: false }) };

export function adsBootstrap(adminPort: number, cpPort: number, delta: boolean, istioStats: boolean): unknown {
  return {
    node: { id: 'sidecar~127.0.0.1~bench.bench~bench.svc.cluster.local', cluster: 'bench' },
    ...(istioStats ? { stats_config: ISTIO_STATS } : {}),
    admin: { address: { socket_address: { address: HOST, port_value: adminPort } } },
    dynamic_resources: {
      ads_config: { api_type: delta ? 'DELTA_GRPC' : 'GRPC', set_node_on_first_message_only: true, grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] },
      lds_config: { ads: {}, initial_fetch_timeout: '0s' }, cds_config: { ads: {}, initial_fetch_timeout: '0s' },
    },
    static_resources: { clusters: [{ name: 'xds-grpc', type: 'STATIC', connect_timeout: '1s', http2_protocol_options: {},
      load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: HOST, port_value: cpPort } } } }] }] } }] },
  };
}

async function startProxy(skuaMain: string, dir: string, name: string, bootstrap: unknown, adminPort: number, nodeArgs: string[] = []): Promise<{ proc: Proc; readyMs: number; cpu: number }> {
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(bootstrap));
  const t0 = performance.now();
  const proc = startProcess(name, process.execPath, [...nodeArgs, path.resolve(REPO_ROOT, skuaMain), '-c', file, '-l', 'warn'], { cwd: REPO_ROOT });
  await waitForReady(adminPort, proc, 300_000);
  return { proc, readyMs: performance.now() - t0, cpu: cpuMs(proc.pid) };
}

export async function runXds(opts: Options, tmpDir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const dir = path.join(tmpDir, 'xds');
  const cpDir = path.join(dir, 'cp');
  mkdirSync(cpDir, { recursive: true });
  const a = await backend('a'), b = await backend('b');
  const rows: Row[] = [];
  try {
    // Baseline: a proxy with a static bootstrap (process start-up, admin).
    const baseAdmin = await freePort();
    const base = await startProxy(opts.skuaMain, dir, 'static', { admin: { address: { socket_address: { address: HOST, port_value: baseAdmin } } } }, baseAdmin);
    const baseRss = rssMb(base.proc.pid);
    await stopProcess(base.proc);
    progress('xds', `static proxy: ready in ${base.readyMs.toFixed(0)} ms, ${baseRss.toFixed(1)} MB`);

    const port = await freePort();
    const res = meshResources(SERVICES, port, a.port);
    for (const [k, list] of Object.entries(res)) writeAtomically(path.join(cpDir, `${k}.json`), { resources: list });
    const cpPort = await freePort();
    const tc = performance.now();
    const cp = startProcess('skua-controlplane', process.execPath, [CP_MAIN, '--config-dir', cpDir, '--xds-address', `${HOST}:${cpPort}`], { cwd: REPO_ROOT });
    while (!cp.stderr.includes('ADS on')) {
      if (cp.exitStatus !== undefined) throw new Error(`skua-controlplane exited: ${cp.stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const cpStartMs = performance.now() - tc;
    const relay = await startXdsRelay(cpPort);
    progress('xds', `control plane: ${SERVICES} services loaded in ${cpStartMs.toFixed(0)} ms`);
    // As a sidecar gets them (Istio's stats inclusion list in the bootstrap), and once keeping every stat.
    for (const [delta, istioStats] of [[true, true], [false, true], [true, false]] as const) {
      const label = `skua-proxy, ${SERVICES.toLocaleString('en-US')} services, ${delta ? 'Delta' : 'SotW'} ADS${istioStats ? '' : ', every stat (no stats_matcher)'}`;
      const adminPort = await freePort();
      writeAtomically(path.join(cpDir, 'zz-change.json'), { resources: [] });
      const p = await startProxy(opts.skuaMain, dir, delta ? 'delta' : 'sotw', adsBootstrap(adminPort, relay.port, delta, istioStats), adminPort, (process.env.XDS_NODE_ARGS ?? '').split(' ').filter(Boolean));
      const host = svcHost(SERVICES >> 1);
      if (await whoAnswers(port, host) !== 'a') throw new Error(`${label}: service ${host} does not reach backend a`);
      const rss = rssMb(p.proc.pid);
      const changes: number[] = [], atProxy: number[] = [];
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const rtts: number[] = [];
      for (let k = 0; k < 200; k++) {
        const t = performance.now();
        await whoAnswers(port, host, agent);
        rtts.push(performance.now() - t);
      }
      rtts.sort((x, y) => x - y);
      for (let k = 0; k < 5; k++) {
        const to = k % 2 === 0 ? b : a;
        const want = to === a ? 'a' : 'b';
        // Whatever the server still sends for the last change (window updates for a 5,000-name SotW ACK) would pass for the push.
        await relay.quiet(50);
        const tw = performance.now();
        writeAtomically(path.join(cpDir, 'zz-change.json'), { resources: [claFor(SERVICES >> 1, [to.port])] });
        while (await whoAnswers(port, host, agent) !== want) {
          if (performance.now() - tw > 30_000) throw new Error(`${label}: endpoint change not applied within 30 s`);
        }
        const done = performance.now();
        const pushed = relay.firstPushAfter(tw);
        if (pushed === undefined) throw new Error(`${label}: the change reached the proxy without a push through the relay`);
        changes.push(done - tw);
        atProxy.push(done - pushed);
      }
      agent.destroy();
      changes.sort((x, y) => x - y);
      atProxy.sort((x, y) => x - y);
      const metrics = {
        applyMs: p.readyMs - base.readyMs, cpuMs: p.cpu - base.cpu, rssMb: rss, rssGrowthMb: rss - baseRss,
        changeMs: changes[2], changeAtProxyMs: atProxy[2], requestMs: rtts[100], cpStartMs,
      };
      rows.push({ target: 'skua', key: `${delta ? 'delta' : 'sotw'}${istioStats ? '' : '-all-stats'}`, label, metrics, samples: changes, moreSamples: { changeAtProxyMs: atProxy } });
      progress('xds', `${label}: apply ${metrics.applyMs.toFixed(0)} ms, RSS ${rss.toFixed(1)} MB, change ${changes[2].toFixed(1)} ms (at the proxy ${atProxy[2].toFixed(2)} ms; one request ${rtts[100].toFixed(2)} ms)`);
      await stopProcess(p.proc);
    }
    relay.close();
    await stopProcess(cp);
  } finally {
    a.server.close();
    b.server.close();
  }
  return {
    scenario: 'xds', title: `xDS: ${SERVICES.toLocaleString('en-US')} istiod-shaped services applied from scratch, and one endpoint change`,
    startedAt, seconds: (performance.now() - t0) / 1000, primary: 'applyMs', columns: COLUMNS, rows,
    settings: {
      services: SERVICES, debounceMs: DEBOUNCE_MS, clusters: SERVICES, endpoints: SERVICES, virtualHosts: SERVICES + 1, tcpListeners: SERVICES / 10,
      stats: 'bootstrap stats_config.stats_matcher = Istio\'s default inclusion list (as pilot-agent renders it), except the "every stat" row',
    },
  };
}
