/**
 * L7 scenario: HTTP/1.1 keep-alive load with wrk through each target, against
 * one nginx backend (worker_processes 1) answering a fixed 5-byte body.
 * Targets run one after another; only the target under test is up.
 */
import { progress } from '../lib/progress.ts';
import { stopProcess, tailOf } from '../lib/procs.ts';
import { freePort, httpGet } from '../lib/net.ts';
import { BACKEND_BODY, nginxBackendConf } from '../lib/peer-configs.ts';
import { launchTarget, prepareTarget, startNginx, stopTarget, type RunningTarget } from '../lib/targets.ts';
import { runWrk, type WrkLoad } from '../lib/wrk.ts';
import { treeCpuMs, treeRssMb } from '../lib/proc-stats.ts';
import { buildSuffix, type SkuaBuild } from '../lib/builds.ts';
import type { Column, Options, Row, ScenarioResult, TargetName } from '../lib/types.ts';

export const L7_COLUMNS: Column[] = [
  { key: 'rps', title: 'req/s', digits: 0, better: 'higher' },
  { key: 'p50', title: 'p50 ms', digits: 3, better: 'lower' },
  { key: 'p90', title: 'p90 ms', digits: 3, better: 'lower' },
  { key: 'p99', title: 'p99 ms', digits: 3, better: 'lower' },
  { key: 'cpuUsPerReq', title: 'CPU µs/req', digits: 1, better: 'lower' },
  { key: 'rssMb', title: 'RSS MB', digits: 1, better: 'lower' },
  { key: 'errors', title: 'errors', digits: 0, better: 'lower' },
];

/** One request through the target must come back 200 with the backend's body. */
async function checkPath(t: RunningTarget): Promise<void> {
  const reply = await httpGet(t.port, '/');
  if (reply.status !== 200 || reply.body !== BACKEND_BODY) {
    throw new Error(`${t.label}: GET / answered ${reply.status} "${reply.body.slice(0, 80)}", ` +
      `expected 200 "${BACKEND_BODY}"`);
  }
}

async function load(running: RunningTarget, opts: Options): Promise<Row['metrics']> {
  const scope = `l7 ${running.target}`;
  await checkPath(running);
  const wrk: WrkLoad = { threads: opts.threads, connections: opts.connections, seconds: opts.warmup };
  if (opts.warmup > 0) {
    progress(scope, `warm-up: wrk -t${wrk.threads} -c${wrk.connections} -d${opts.warmup}s`);
    await runWrk(running.port, wrk);
  }
  progress(scope, `measuring: wrk -t${wrk.threads} -c${wrk.connections} -d${opts.duration}s --latency`);
  const pid = running.proc?.pid;
  const cpu0 = pid === undefined ? 0 : treeCpuMs(pid);
  const r = await runWrk(running.port, { ...wrk, seconds: opts.duration });
  const metrics: Row['metrics'] = { rps: r.rps, p50: r.p50, p75: r.p75, p90: r.p90, p99: r.p99, errors: r.errors, requests: r.requests };
  if (pid !== undefined && r.requests > 0) {
    // The proxy's own CPU (nginx: master + worker) per request moves less with the machine's load than req/s.
    metrics.cpuUsPerReq = ((treeCpuMs(pid) - cpu0) * 1000) / r.requests;
    metrics.rssMb = treeRssMb(pid);
  }
  progress(scope, `${Math.round(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, errors ${r.errors}` +
    (metrics.cpuUsPerReq === undefined ? '' : `, ${metrics.cpuUsPerReq.toFixed(1)} CPU µs/req, RSS ${metrics.rssMb.toFixed(1)} MB`));
  return metrics;
}

/** Start one target, load it, stop it; failures become the row's `error`. */
async function measure(target: TargetName, opts: Options, dir: string, backendPort: number, build?: SkuaBuild): Promise<Row> {
  const prepared = await prepareTarget(target, 'http', backendPort, dir);
  const row: Row = { target, key: build?.name || undefined, label: prepared.label + (build ? buildSuffix(build) : ''), metrics: {}, config: prepared.config };
  progress(`l7 ${target}`, `starting ${prepared.label}`);
  let running: RunningTarget | undefined;
  try {
    running = await launchTarget(prepared, build?.main ?? opts.skuaMain, build?.env);
    row.metrics = await load(running, opts);
  } catch (err) {
    const logs = running?.proc ? tailOf(running.proc) : '';
    row.error = (err as Error).message + (logs ? `\n${running?.label} output:\n${logs}` : '');
    progress(`l7 ${target}`, `FAILED: ${row.error}`);
  } finally {
    if (running) await stopTarget(running);
  }
  return row;
}

export async function runL7(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const backendPort = await freePort();
  progress('l7', `starting backend nginx on 127.0.0.1:${backendPort} (worker_processes 1)`);
  const backendConf = nginxBackendConf(dir, backendPort);
  const backend = await startNginx('backend', dir, backendConf, backendPort);
  const rows: Row[] = [];
  try {
    for (const target of opts.targets) {
      if (target !== 'skua') rows.push(await measure(target, opts, dir, backendPort));
      else for (const b of opts.builds) rows.push(await measure(target, opts, dir, backendPort, b));
    }
  } finally {
    await stopProcess(backend);
  }
  return {
    scenario: 'l7',
    title: 'HTTP/1.1 reverse proxy (wrk, keep-alive, 5-byte body)',
    startedAt,
    seconds: (performance.now() - t0) / 1000,
    primary: 'rps',
    columns: L7_COLUMNS,
    rows,
    helperConfigs: { backend: backendConf },
    settings: {
      wrk: `-t${opts.threads} -c${opts.connections} -d${opts.duration}s --latency`,
      warmupSeconds: opts.warmup,
      backend: 'nginx worker_processes 1, return 200 "hello"',
      workers: 'nginx worker_processes 1; haproxy nbthread 1; skua-proxy --concurrency 1',
      cpu: 'utime+stime of the proxy (nginx: master + worker) over the measured run, per request; RSS at its end',
    },
  };
}
