/**
 * Routes scenario (`--only routes`): what a large route table costs skua-proxy.
 * Same run, same nginx backend, same wrk load and request (a mesh-style Host
 * header, `x-tenant: acme`, GET /api/v1/products/42) against two skua-proxy
 * processes (--concurrency 1):
 *   single  one virtual host `*`, one prefix `/` route
 *   table   1,000 istiod-style virtual hosts (10 domains each) × 10 routes
 *           (path, prefix, regex, path_separated_prefix, header matches); the
 *           request hits the virtual host in the middle and route 5 of 10.
 * Both proxies stay up; each round measures both back to back (order alternating:
 * single, table | table, single | ...), so that drift on a shared machine hits
 * both alike. Reported: median req/s per case, and the median over rounds of the
 * per-round ratio table/single, which the acceptance uses (table >= 0.9 x single).
 * The proxy's CPU time per request (utime + stime from /proc, all threads) is
 * recorded too: it is what a route table actually costs, and it is far less
 * sensitive than req/s to other processes competing for the cores.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { progress } from '../lib/progress.ts';
import { runToCompletion, stopProcess, systemBinary, tailOf } from '../lib/procs.ts';
import { freePort, HOST } from '../lib/net.ts';
import { BACKEND_BODY, nginxBackendConf } from '../lib/peer-configs.ts';
import { largeRouteTable, REQUEST_HEADERS, REQUEST_PATH, ROUTE_HEADER } from '../lib/route-table.ts';
import { launchTarget, startNginx, stopTarget, type PreparedTarget, type RunningTarget } from '../lib/targets.ts';
import { parseWrk, type WrkReport } from '../lib/wrk.ts';
import type { CheckOutcome, Column, Options, Row, ScenarioResult } from '../lib/types.ts';

export const VHOSTS = 1000;
export const ROUNDS = 5;
export const MIN_RATIO = 0.9;
const CHECK_NAME = `Routes: ${VHOSTS.toLocaleString('en-US')} vhosts x 10 routes req/s >= ${MIN_RATIO}x single route`;

const COLUMNS: Column[] = [
  { key: 'rps', title: 'req/s (median)', digits: 0, better: 'higher' },
  { key: 'vsSingle', title: 'x single (paired)', digits: 3, better: 'higher' },
  { key: 'cpuUsPerReq', title: 'CPU us/req', digits: 2, better: 'lower' },
  { key: 'p50', title: 'p50 ms', digits: 3, better: 'lower' },
  { key: 'p99', title: 'p99 ms', digits: 3, better: 'lower' },
  { key: 'errors', title: 'errors', digits: 0, better: 'lower' },
  { key: 'readyMs', title: 'start ms', digits: 0, better: 'lower' },
  { key: 'rssMb', title: 'RSS MB', digits: 1, better: 'lower' },
];

type Case = 'single' | 'table';

function adminAndCluster(adminPort: number, backendPort: number): Record<string, unknown> {
  return {
    admin: { address: { socket_address: { address: HOST, port_value: adminPort } } },
    clusters: [{
      name: 'backend', type: 'STATIC', connect_timeout: '5s',
      load_assignment: { cluster_name: 'backend', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: HOST, port_value: backendPort } } } }] }] },
    }],
  };
}

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

/** An Envoy v3 bootstrap (JSON, valid for Envoy too) with one HTTP listener using `routeConfig`. */
function bootstrapJson(adminPort: number, port: number, backendPort: number, routeConfig: Record<string, unknown>): string {
  const { admin, clusters } = adminAndCluster(adminPort, backendPort);
  return JSON.stringify({
    admin,
    static_resources: {
      listeners: [{
        name: 'bench_routes',
        address: { socket_address: { address: HOST, port_value: port } },
        filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: {
          '@type': HCM, stat_prefix: 'bench_routes', codec_type: 'AUTO', route_config: routeConfig,
          http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } }],
        } }] }],
      }],
      clusters,
    },
  });
}

interface Prepared { target: PreparedTarget; host: string; expectRoute: string }

async function prepare(c: Case, dir: string, backendPort: number): Promise<Prepared> {
  const port = await freePort();
  const adminPort = await freePort();
  let routeConfig: Record<string, unknown>, host: string, expectRoute: string, summary: string;
  if (c === 'single') {
    expectRoute = 'single';
    routeConfig = { name: 'local_route', virtual_hosts: [{ name: 'backend', domains: ['*'], routes: [
      { match: { prefix: '/' }, route: { cluster: 'backend' }, response_headers_to_add: [{ header: { key: ROUTE_HEADER, value: expectRoute } }] },
    ] }] };
    const t = largeRouteTable({ vhosts: VHOSTS }); // same Host header as the table case
    host = t.host;
    summary = '';
  } else {
    const t = largeRouteTable({ vhosts: VHOSTS, cluster: () => 'backend', wildcardEvery: 10 });
    routeConfig = t.routeConfig; host = t.host; expectRoute = t.expectRoute;
    const vhosts = routeConfig.virtual_hosts as Array<Record<string, unknown>>;
    summary = `${vhosts.length - 1} virtual hosts (+ block_all) x 10 routes; target ${t.host} route ${t.expectRoute}`;
  }
  const text = bootstrapJson(adminPort, port, backendPort, routeConfig);
  const configFile = path.join(dir, `skua-routes-${c}.json`);
  writeFileSync(configFile, text);
  // The generated table is ~2 MB: the result records its shape, size, digest and target virtual host instead.
  const recorded = c === 'single' ? text
    : `${summary}; ${text.length} bytes, sha256 ${createHash('sha256').update(text).digest('hex').slice(0, 16)}; ` +
      `target virtual host: ${JSON.stringify((routeConfig.virtual_hosts as unknown[])[VHOSTS / 2])}`;
  const label = c === 'single' ? 'skua-proxy, 1 route' : `skua-proxy, ${VHOSTS.toLocaleString('en-US')} vhosts x 10 routes`;
  return { target: { target: 'skua', kind: 'http', label, port, adminPort, config: recorded, configFile }, host, expectRoute };
}

/** One GET with the benchmark's headers; must be 200 with the backend's body from the expected route. */
function check(p: Prepared): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: HOST, port: p.target.port, path: REQUEST_PATH, agent: false, timeout: 2000, headers: { host: p.host, ...REQUEST_HEADERS } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => { body += s; });
      res.on('end', () => {
        const route = res.headers[ROUTE_HEADER];
        if (res.statusCode === 200 && body === BACKEND_BODY && route === p.expectRoute) resolve();
        else reject(new Error(`${p.target.label}: GET ${REQUEST_PATH} (Host ${p.host}) answered ${res.statusCode} "${body.slice(0, 80)}" ` +
          `from route ${String(route)}, expected 200 "${BACKEND_BODY}" from route ${p.expectRoute}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${p.target.label}: check request timed out`)));
    req.on('error', reject);
  });
}

async function wrk(p: Prepared, opts: Options, seconds: number): Promise<WrkReport> {
  const args = [`-t${opts.threads}`, `-c${opts.connections}`, `-d${seconds}s`, '--latency', '-H', `Host: ${p.host}`,
    ...Object.entries(REQUEST_HEADERS).flatMap(([k, v]) => ['-H', `${k}: ${v}`]), `http://${HOST}:${p.target.port}${REQUEST_PATH}`];
  const r = await runToCompletion('wrk', systemBinary('wrk'), args, (seconds + 20) * 1000);
  if (r.timedOut) throw new Error(`wrk did not finish within ${seconds + 20} s`);
  if (r.code !== 0) throw new Error(`wrk exited ${String(r.code)}: ${r.stderr.trim() || r.stdout.trim()}`);
  return parseWrk(r.stdout);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const CLK_TCK = 100;

/** utime + stime of a process (all threads), in ms; undefined once it is gone. */
function cpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK; // fields 14 and 15 of proc(5)
  } catch {
    return undefined;
  }
}

function rssMb(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

interface Measured { report: WrkReport; cpuUsPerReq: number | undefined }
interface Running { prepared: Prepared; running: RunningTarget; readyMs: number; reports: Measured[] }

async function measured(r: Running, opts: Options): Promise<Measured> {
  const pid = r.running.proc?.pid;
  const before = cpuMs(pid);
  const report = await wrk(r.prepared, opts, opts.duration);
  const after = cpuMs(pid);
  const cpuUsPerReq = before !== undefined && after !== undefined && report.requests > 0 ? ((after - before) * 1000) / report.requests : undefined;
  return { report, cpuUsPerReq };
}

export async function runRoutes(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const backendPort = await freePort();
  progress('routes', `starting backend nginx on ${HOST}:${backendPort} (worker_processes 1)`);
  const backendConf = nginxBackendConf(dir, backendPort);
  const backend = await startNginx('routes-backend', dir, backendConf, backendPort);
  const cases: Case[] = ['single', 'table'];
  const live = new Map<Case, Running>();
  const rows: Row[] = [];
  let failure: string | undefined;
  try {
    for (const c of cases) {
      const prepared = await prepare(c, dir, backendPort);
      progress(`routes ${c}`, `starting ${prepared.target.label}`);
      const s = performance.now();
      const running = await launchTarget(prepared.target, opts.skuaMain);
      const readyMs = performance.now() - s;
      live.set(c, { prepared, running, readyMs, reports: [] });
      await check(prepared);
      progress(`routes ${c}`, `ready in ${readyMs.toFixed(0)} ms; route check OK (${ROUTE_HEADER}: ${prepared.expectRoute})`);
    }
    for (const c of cases) {
      const r = live.get(c) as Running;
      if (opts.warmup > 0) {
        progress(`routes ${c}`, `warm-up: wrk -t${opts.threads} -c${opts.connections} -d${opts.warmup}s`);
        await wrk(r.prepared, opts, opts.warmup);
      }
    }
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? cases : [...cases].reverse();
      for (const c of order) {
        const r = live.get(c) as Running;
        const m = await measured(r, opts);
        r.reports.push(m);
        const rep = m.report;
        progress(`routes ${c}`, `round ${round + 1}/${ROUNDS}: ${Math.round(rep.rps)} req/s, p50 ${rep.p50} ms, p99 ${rep.p99} ms, ` +
          `errors ${rep.errors}, CPU ${m.cpuUsPerReq?.toFixed(2) ?? '?'} us/req`);
      }
    }
  } catch (err) {
    failure = (err as Error).message;
    progress('routes', `FAILED: ${failure}`);
  } finally {
    for (const c of cases) {
      const r = live.get(c);
      if (!r) continue;
      const reps = r.reports.map((x) => x.report);
      const cpu = r.reports.flatMap((x) => (x.cpuUsPerReq === undefined ? [] : [x.cpuUsPerReq]));
      const row: Row = { target: 'skua', label: r.prepared.target.label, metrics: {}, config: r.prepared.target.config, samples: reps.map((x) => x.rps) };
      if (reps.length) {
        row.metrics = {
          rps: median(reps.map((x) => x.rps)), p50: median(reps.map((x) => x.p50)), p99: median(reps.map((x) => x.p99)),
          errors: reps.reduce((a, x) => a + x.errors, 0), requests: reps.reduce((a, x) => a + x.requests, 0), readyMs: r.readyMs,
        };
        if (cpu.length) row.metrics.cpuUsPerReq = median(cpu);
        const rss = rssMb(r.running.proc?.pid);
        if (rss !== undefined) row.metrics.rssMb = rss;
      }
      if (failure && reps.length < ROUNDS) row.error = failure + (r.running.proc ? `\n${r.running.label} output:\n${tailOf(r.running.proc)}` : '');
      rows.push(row);
      await stopTarget(r.running);
    }
    await stopProcess(backend);
  }
  if (failure && rows.length === 0) rows.push({ target: 'skua', label: 'skua-proxy', metrics: {}, error: failure });
  // Paired ratios: round i of the table against round i of the single route (measured back to back).
  const [singleRow, tableRow] = rows;
  if (singleRow?.samples?.length && tableRow?.samples?.length) {
    const n = Math.min(singleRow.samples.length, tableRow.samples.length);
    const pairs = Array.from({ length: n }, (_, i) => (tableRow.samples as number[])[i] / (singleRow.samples as number[])[i]);
    singleRow.metrics.vsSingle = 1;
    tableRow.metrics.vsSingle = median(pairs);
    if (singleRow.metrics.cpuUsPerReq && tableRow.metrics.cpuUsPerReq) {
      tableRow.metrics.cpuVsSingle = tableRow.metrics.cpuUsPerReq / singleRow.metrics.cpuUsPerReq;
    }
  }
  const res: ScenarioResult = {
    scenario: 'routes',
    title: `route table cost: 1 route vs ${VHOSTS.toLocaleString('en-US')} vhosts x 10 routes (wrk, keep-alive, 5-byte body)`,
    startedAt,
    seconds: (performance.now() - t0) / 1000,
    primary: 'rps',
    columns: COLUMNS,
    rows,
    helperConfigs: { backend: backendConf },
    settings: {
      wrk: `-t${opts.threads} -c${opts.connections} -d${opts.duration}s --latency -H 'Host: <target vhost>' -H 'x-tenant: acme' ${REQUEST_PATH}`,
      warmupSeconds: opts.warmup,
      rounds: `${ROUNDS}, both cases back to back per round (order alternating); medians; x single = median of per-round ratios`,
      backend: 'nginx worker_processes 1, return 200 "hello"',
      workers: 'skua-proxy --concurrency 1 (both processes up; only the measured one loaded)',
    },
  };
  const outcome = routesChecks([res])[0];
  if (outcome) res.settings.acceptance = `${outcome.status} ${outcome.name} (${outcome.detail})`;
  return res;
}

/** The scenario's acceptance line: table req/s >= MIN_RATIO x single-route req/s. */
export function routesChecks(results: readonly ScenarioResult[]): CheckOutcome[] {
  const res = results.find((r) => r.scenario === 'routes');
  if (!res) return [];
  const [single, table] = res.rows;
  const fail = (detail: string, ratio?: number): CheckOutcome => ({ name: CHECK_NAME, status: 'FAIL', min: MIN_RATIO, ratio, detail });
  if (!single || !table) return [fail('a case did not run')];
  if (single.error || table.error) return [fail(`failed: ${(single.error ?? table.error ?? '').split('\n')[0]}`)];
  const a = single.metrics.rps, b = table.metrics.rps, ratio = table.metrics.vsSingle;
  if (!a || b === undefined || ratio === undefined) return [fail('no req/s')];
  const errs = (single.metrics.errors ?? 0) + (table.metrics.errors ?? 0);
  const cpu = table.metrics.cpuVsSingle;
  const detail = `median req/s table ${Math.round(b)}, single ${Math.round(a)}; paired ratio ${ratio.toFixed(3)}, cost ${((1 - ratio) * 100).toFixed(1)}%` +
    (cpu === undefined ? '' : `; CPU/req x${cpu.toFixed(3)}`);
  if (errs > 0) return [fail(`${detail} but ${errs} errors`, ratio)];
  return [{ name: CHECK_NAME, status: ratio >= MIN_RATIO ? 'PASS' : 'FAIL', ratio, min: MIN_RATIO, detail }];
}
