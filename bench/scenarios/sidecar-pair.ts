/**
 * Sidecar-pair scenario (`--only sidecar-pair`), Istio's published set-up: fortio sends 1,000
 * requests/s over 16 connections, 1 KB responses, through a client sidecar, mutual TLS, a server
 * sidecar, to the backend. Each case in turn, in the same run:
 *   direct            fortio → backend (the baseline the added latency is measured against)
 *   nginx pair        two nginx, one worker each, HTTP/1.1 + mTLS between them (lib/nginx-pair.ts)
 *   skua pair h1/h2   two `skua-proxy proxy sidecar --concurrency 1` configured by skua-controlplane,
 *                     HTTP/1.1 or HTTP/2 between them (lib/skua-pair.ts)
 * Reported: achieved rate, p50/p90/p99 and what the pair adds to direct's, CPU of the two proxies
 * per 1,000 requests/s (utime+stime over the measured run), each proxy's RSS at the end, errors,
 * and the machine's load average while the case ran (the machine is shared).
 */
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { CertificateAuthority } from '../../packages/controlplane/src/ca/authority.ts';
import { startCaServer, type CaServer } from '../../packages/controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../packages/controlplane/src/ca/token.ts';
import { progress } from '../lib/progress.ts';
import { stopProcess, tailOf, type Proc } from '../lib/procs.ts';
import { freePort, HOST } from '../lib/net.ts';
import { startNginx } from '../lib/targets.ts';
import { ensureFortio, fortioVersion, runFortio, type FortioResult } from '../lib/fortio.ts';
import { makePairCerts, nginxFixedBodyConf, nginxPairClientConf, nginxPairServerConf } from '../lib/nginx-pair.ts';
import { startSkuaPair } from '../lib/skua-pair.ts';
import { peakRssMb, treeCpuMs, treeRssMb } from '../lib/proc-stats.ts';
import type { Column, Options, Row, ScenarioResult, TargetName } from '../lib/types.ts';
import { buildSuffix, type SkuaBuild } from '../lib/builds.ts';

/** Istio's published set-up. */
export const PAIR_LOAD = { qps: 1000, connections: 16, bodyBytes: 1024 } as const;

type CaseKey = 'direct' | 'nginx' | 'skua-h1' | 'skua-h2';
interface Case { key: CaseKey; target: TargetName; label: string; build?: SkuaBuild }
const CASES: readonly Case[] = [
  { key: 'direct', target: 'direct', label: 'direct (no proxy)' },
  { key: 'nginx', target: 'nginx', label: 'nginx pair, HTTP/1.1 + mTLS' },
  { key: 'skua-h1', target: 'skua', label: 'skua pair, HTTP/1.1 + mTLS' },
  { key: 'skua-h2', target: 'skua', label: 'skua pair, HTTP/2 + mTLS' },
];

const COLUMNS: Column[] = [
  { key: 'qps', title: 'req/s', digits: 0, better: 'higher' },
  { key: 'p50', title: 'p50 ms', digits: 3, better: 'lower' },
  { key: 'p90', title: 'p90 ms', digits: 3, better: 'lower' },
  { key: 'p99', title: 'p99 ms', digits: 3, better: 'lower' },
  { key: 'addedP50', title: '+p50 ms', digits: 3, better: 'lower' },
  { key: 'addedP90', title: '+p90 ms', digits: 3, better: 'lower' },
  { key: 'addedP99', title: '+p99 ms', digits: 3, better: 'lower' },
  { key: 'vcpuPer1k', title: 'vCPU per 1k rps (pair)', digits: 3, better: 'lower' },
  { key: 'clientRssMb', title: 'client RSS MB', digits: 1, better: 'lower' },
  { key: 'serverRssMb', title: 'server RSS MB', digits: 1, better: 'lower' },
  { key: 'errors', title: 'errors', digits: 0, better: 'lower' },
  { key: 'load1', title: 'load avg', digits: 2, better: 'lower' },
];

interface Pair { client?: Proc; server?: Proc; url: string; host?: string; config?: string; stop(): Promise<void> }

/** One request through the pair: it must answer 200 with the backend's 1 KB body. */
function check(url: string, host: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: 5000, headers: host ? { host } : {} }, (res) => {
      let n = 0;
      res.on('data', (d: Buffer) => { n += d.length; });
      res.on('end', () => (res.statusCode === 200 && n === PAIR_LOAD.bodyBytes ? resolve() : reject(new Error(`GET ${url} answered ${res.statusCode} with ${n} bytes`))));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

async function nginxPair(dir: string, backendPort: number): Promise<Pair> {
  const certs = makePairCerts(path.join(dir, 'pair-certs'));
  const [serverPort, clientPort] = [await freePort(), await freePort()];
  const serverConf = nginxPairServerConf(dir, serverPort, backendPort, certs), clientConf = nginxPairClientConf(dir, clientPort, serverPort, certs);
  const server = await startNginx('pair-server', dir, serverConf, serverPort);
  try {
    const client = await startNginx('pair-client', dir, clientConf, clientPort);
    return { client, server, url: `http://${HOST}:${clientPort}/`, config: `${serverConf}\n${clientConf}`, stop: async () => { await stopProcess(client); await stopProcess(server); } };
  } catch (err) {
    await stopProcess(server);
    throw err;
  }
}

async function measure(c: Case, opts: Options, fortio: string, start: () => Promise<Pair>): Promise<Row> {
  const row: Row = { target: c.target, key: c.key + (c.build?.name ? `@${c.build.name}` : ''), label: c.label + (c.build ? buildSuffix(c.build) : ''), metrics: {} };
  const scope = `sidecar-pair ${row.key}`;
  let pair: Pair | undefined;
  try {
    progress(scope, 'starting');
    pair = await start();
    row.config = pair.config;
    await check(pair.url, pair.host);
    const load = { url: pair.url, qps: PAIR_LOAD.qps, connections: PAIR_LOAD.connections, headers: pair.host ? [`Host: ${pair.host}`] : [] };
    if (opts.warmup > 0) await runFortio(fortio, { ...load, seconds: opts.warmup });
    const procs = [pair.client, pair.server].filter((p): p is Proc => p !== undefined);
    const cpu0 = procs.map((p) => treeCpuMs(p.pid));
    const load0 = os.loadavg()[0];
    const t0 = performance.now();
    progress(scope, `measuring: fortio load -qps ${PAIR_LOAD.qps} -c ${PAIR_LOAD.connections} -t ${opts.duration}s`);
    const r: FortioResult = await runFortio(fortio, { ...load, seconds: opts.duration });
    const wall = (performance.now() - t0) / 1000;
    const cpuMs = procs.reduce((sum, p, i) => sum + treeCpuMs(p.pid) - cpu0[i], 0);
    row.metrics = {
      qps: r.qps, p50: r.p50, p90: r.p90, p99: r.p99, p999: r.p999, errors: r.errors, requests: r.count,
      load1: (load0 + os.loadavg()[0]) / 2, responseBytes: r.responseBytes,
    };
    if (procs.length === 2 && pair.client && pair.server) {
      row.metrics.vcpuPer1k = (cpuMs / 1000 / wall) / (r.qps / 1000);
      row.metrics.clientRssMb = treeRssMb(pair.client.pid);
      row.metrics.serverRssMb = treeRssMb(pair.server.pid);
      row.metrics.clientPeakRssMb = peakRssMb(pair.client.pid);
      row.metrics.serverPeakRssMb = peakRssMb(pair.server.pid);
    }
    progress(scope, `${Math.round(r.qps)} req/s, p50 ${r.p50.toFixed(3)} ms, p99 ${r.p99.toFixed(3)} ms, errors ${r.errors}` +
      (row.metrics.vcpuPer1k === undefined ? '' : `, ${row.metrics.vcpuPer1k.toFixed(3)} vCPU per 1k rps`));
  } catch (err) {
    const logs = [pair?.client, pair?.server].filter((p): p is Proc => p !== undefined).map((p) => tailOf(p)).join('\n');
    row.error = (err as Error).message + (logs ? `\n${logs}` : '');
    progress(scope, `FAILED: ${row.error}`);
  } finally {
    await pair?.stop();
  }
  return row;
}

export async function runSidecarPair(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const fortio = ensureFortio((m) => progress('sidecar-pair', m));
  const backendPort = await freePort();
  const backendConf = nginxFixedBodyConf(dir, backendPort, 'x'.repeat(PAIR_LOAD.bodyBytes));
  const backend = await startNginx('pair-backend', dir, backendConf, backendPort);
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: path.join(dir, 'pair-ca') });
  const tokens = TokenAuthority.create(path.join(dir, 'pair-ca'));
  let caServer: CaServer | undefined;
  const rows: Row[] = [];
  try {
    caServer = await startCaServer({ ca, tokens, listen: `${HOST}:0` });
    const caInfo = { ca, tokens, address: `${HOST}:${caServer.port}` };
    // With --ref, each skua case runs once per build, one after the other (h1 A, h1 B, h2 A, h2 B).
    const cases = CASES.flatMap((c): Case[] => (c.target === 'skua' ? opts.builds.map((build) => ({ ...c, build })) : [c]));
    for (const c of cases) {
      const start = (): Promise<Pair> => {
        if (c.key === 'direct') return Promise.resolve({ url: `http://${HOST}:${backendPort}/`, stop: async () => {} });
        if (c.key === 'nginx') return nginxPair(dir, backendPort);
        return startSkuaPair({ dir, protocol: c.key === 'skua-h2' ? 'http2' : 'http', backendPort, skuaMain: c.build?.main ?? opts.skuaMain, env: c.build?.env, ca: caInfo })
          .then((p) => ({ ...p, config: p.mesh }));
      };
      rows.push(await measure(c, opts, fortio, start));
    }
  } finally {
    await caServer?.close();
    await stopProcess(backend);
  }
  const direct = rows[0];
  for (const r of rows) {
    if (r.error || !direct || direct.error) continue;
    for (const p of ['p50', 'p90', 'p99'] as const) r.metrics[`added${p.toUpperCase()}`] = r.metrics[p] - direct.metrics[p];
  }
  return {
    scenario: 'sidecar-pair', title: `sidecar pair with mTLS: fortio ${PAIR_LOAD.qps} req/s over ${PAIR_LOAD.connections} connections, ${PAIR_LOAD.bodyBytes}-byte responses`,
    startedAt, seconds: (performance.now() - t0) / 1000, primary: 'vcpuPer1k', columns: COLUMNS, rows,
    helperConfigs: { backend: backendConf },
    settings: {
      fortio: `${fortioVersion(fortio)}: load -qps ${PAIR_LOAD.qps} -c ${PAIR_LOAD.connections} -t ${opts.duration}s -r 0.00001 -uniform (after ${opts.warmup} s of warm-up)`,
      path: 'fortio → client sidecar (plaintext listener) → mTLS → server sidecar → nginx backend (1 KB body)',
      workers: 'nginx worker_processes 1 each; skua-proxy proxy sidecar --concurrency 1 each (pilot-agent, config from skua-controlplane --mesh, certificates from the local CA)',
      cpu: 'utime+stime of both proxies (nginx: master and worker) over the measured run, per 1,000 achieved req/s',
      ratios: 'x nginx: the pair\'s vCPU per 1k req/s against the nginx pair\'s',
      nginxHttp2: 'not measured: nginx proxies upstream in HTTP/1.1 only',
    },
  };
}
