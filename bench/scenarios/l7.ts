/**
 * L7 scenario: HTTP/1.1 keep-alive load with wrk through each target, against
 * one nginx backend (worker_processes 1) answering a fixed 5-byte body.
 * Targets run one after another; only the target under test is up.
 */
import { progress } from '../lib/progress.ts';
import { stopProcess } from '../lib/procs.ts';
import { freePort, httpGet } from '../lib/net.ts';
import { BACKEND_BODY, nginxBackendConf } from '../lib/peer-configs.ts';
import { startNginx, startTarget, stopTarget, targetLabel, type RunningTarget } from '../lib/targets.ts';
import { runWrk, type WrkLoad } from '../lib/wrk.ts';
import type { Column, Options, Row, ScenarioResult, TargetName } from '../lib/types.ts';

export const L7_COLUMNS: Column[] = [
  { key: 'rps', title: 'req/s', digits: 0, better: 'higher' },
  { key: 'p50', title: 'p50 ms', digits: 3, better: 'lower' },
  { key: 'p90', title: 'p90 ms', digits: 3, better: 'lower' },
  { key: 'p99', title: 'p99 ms', digits: 3, better: 'lower' },
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

async function measure(target: TargetName, opts: Options, dir: string, backendPort: number): Promise<Row> {
  const label = targetLabel(target, 'http');
  const scope = `l7 ${target}`;
  progress(scope, `starting ${label}`);
  const running = await startTarget(target, 'http', backendPort, dir);
  try {
    await checkPath(running);
    const load: WrkLoad = { threads: opts.threads, connections: opts.connections, seconds: opts.warmup };
    if (opts.warmup > 0) {
      progress(scope, `warm-up: wrk -t${load.threads} -c${load.connections} -d${opts.warmup}s`);
      await runWrk(running.port, load);
    }
    progress(scope, `measuring: wrk -t${load.threads} -c${load.connections} -d${opts.duration}s --latency`);
    const r = await runWrk(running.port, { ...load, seconds: opts.duration });
    progress(scope, `${Math.round(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, errors ${r.errors}`);
    return {
      target, label,
      metrics: { rps: r.rps, p50: r.p50, p75: r.p75, p90: r.p90, p99: r.p99, errors: r.errors, requests: r.requests },
    };
  } finally {
    await stopTarget(running);
  }
}

export async function runL7(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const backendPort = await freePort();
  progress('l7', `starting backend nginx on 127.0.0.1:${backendPort} (worker_processes 1)`);
  const backend = await startNginx('backend', dir, nginxBackendConf(dir, backendPort), backendPort);
  const rows: Row[] = [];
  try {
    for (const target of opts.targets) {
      try {
        rows.push(await measure(target, opts, dir, backendPort));
      } catch (err) {
        const error = (err as Error).message;
        progress(`l7 ${target}`, `FAILED: ${error}`);
        rows.push({ target, label: targetLabel(target, 'http'), metrics: {}, error });
      }
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
    settings: {
      wrk: `-t${opts.threads} -c${opts.connections} -d${opts.duration}s --latency`,
      warmupSeconds: opts.warmup,
      backend: 'nginx worker_processes 1, return 200 "hello"',
      workers: 'nginx worker_processes 1; haproxy nbthread 1; skua-proxy --concurrency 1',
    },
  };
}
