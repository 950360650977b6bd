/**
 * `./dev demo` (= `node demo/run.ts`): sample apps and skua-proxy on loopback, real traffic, a
 * summary. Topologies: `istio` (default: Bookinfo from Istio's YAML, a sidecar per app and an ingress
 * gateway, Istio's samples applied one by one), `mesh` (a sidecar per app, configured by
 * skua-controlplane from a compact mesh file, mTLS from its CA) and `bookinfo` (one skua-proxy on a static bootstrap). Everything it starts is stopped by PID at the end (or on Ctrl-C); exit 0 when every check
 * passed and the traffic went through, 1 otherwise. Options: see USAGE.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { waitForPort, waitForReady } from './lib/net.ts';
import { killAllSync, startNode, stopAll, tailOf, type Proc } from './lib/procs.ts';
import { runLoad } from './lib/load.ts';
import { printChecks, printLoad, printStats, splitVerdict, type CheckResult } from './lib/report.ts';
import { bookinfo, bookinfoBootstrap, bookinfoPorts } from './topologies/bookinfo.ts';
import { mesh, meshPorts } from './topologies/mesh.ts';
import { istio, istioPorts } from './topologies/istio.ts';
import type { Topology, TopologyOptions } from './lib/topology.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const USAGE = `usage: ./dev demo [options]   (node demo/run.ts)
  --topology T       istio (default): Bookinfo from Istio's YAML, a skua-proxy (pilot-agent mode) per workload
                     and one as the ingress gateway, Istio's bookinfo samples applied one by one and measured;
                     mesh: productpage and reviews v1/v2, a skua-proxy sidecar each, configured over ADS by
                     skua-controlplane from a compact mesh file, STRICT mTLS with its CA's certificates;
                     bookinfo: the apps behind one skua-proxy on a static Envoy bootstrap
  --duration S       seconds of load (default 5)
  --connections N    keep-alive connections for the load (default 8)
  --max-requests N   cap on the load's requests (default 50000)
  --concurrency N    skua-proxy worker threads (default 1)
  --log-level L      skua-proxy log level (default info)
  --keep             after the summary, keep everything running until Ctrl-C and echo the access log
  --print-bootstrap local
                     print bookinfo's generated Envoy bootstrap (fresh free loopback ports) and exit
  --containers       instead: compose.yaml's mesh in containers (podman as root, or Docker): build the
                     images, bring it up, the same kind of checks and load, then take it all down
    --base standin|public   base images: debootstrap + npm stand-ins (podman's default; no registry
                            needed) or the public node:24 images (Docker's default)
    --ingress-port N        where the ingress gateway is published on 127.0.0.1 (default 8080)
    --image-tag T           use images already built with tag T (skua/proxy:T, ...): no build, kept after
    --profile ambient       also compose.yaml's ambient profile (ztunnel, the CNI stand-in, a waypoint,
                            ambient Bookinfo pods) and its checks: HBONE with mTLS between ztunnels,
                            plaintext refused, an L7 denial at the waypoint, a live route edit there`;

function options() {
  const { values } = parseArgs({
    options: {
      topology: { type: 'string', default: 'istio' },
      duration: { type: 'string', default: '5' },
      connections: { type: 'string', default: '8' },
      'max-requests': { type: 'string', default: '50000' },
      concurrency: { type: 'string', default: '1' },
      'log-level': { type: 'string', default: 'info' },
      keep: { type: 'boolean', default: false },
      'print-bootstrap': { type: 'string' },
      containers: { type: 'boolean', default: false },
      base: { type: 'string' },
      'ingress-port': { type: 'string', default: '8080' },
      'image-tag': { type: 'string' },
      profile: { type: 'string', default: 'default' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const num = (k: 'duration' | 'connections' | 'max-requests' | 'concurrency' | 'ingress-port', min: number): number => {
    const n = Number(values[k]);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${k}: expected a number >= ${min}, got ${values[k]}`);
    return n;
  };
  return {
    durationMs: num('duration', 0.1) * 1000, connections: Math.floor(num('connections', 1)),
    maxRequests: Math.floor(num('max-requests', 1)), concurrency: Math.floor(num('concurrency', 1)),
    topology: values.topology, logLevel: values['log-level'], keep: values.keep, printBootstrap: values['print-bootstrap'], help: values.help,
    containers: values.containers, base: values.base, ingressPort: Math.floor(num('ingress-port', 1)), imageTag: values['image-tag'], profile: values.profile,
  };
}

const TOPOLOGIES: Record<string, (o: TopologyOptions) => Promise<Topology>> = {
  istio: async (o) => istio(await istioPorts(), o),
  mesh: async (o) => mesh(await meshPorts(), o),
  bookinfo: async (o) => bookinfo(await bookinfoPorts(), o),
};

async function start(topo: Topology, dir: string, echoAccessLog: () => boolean): Promise<Proc[]> {
  for (const [name, text] of Object.entries(topo.files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  const procs: Proc[] = [];
  // Processes marked `concurrent` start alongside the ones before them; the next other one waits for all.
  let pending: Promise<void>[] = [];
  for (const spec of topo.processes) {
    if (!spec.concurrent) { await Promise.all(pending); pending = []; }
    const onLine = spec.proxy ? (l: string) => { if (echoAccessLog()) console.log(`  [${spec.name}] ${l}`); } : undefined;
    await spec.prepare?.();
    if (spec.cwd) mkdirSync(spec.cwd, { recursive: true });
    const proc = startNode(spec.name, path.join(ROOT, spec.script), spec.args ?? [], { env: spec.env, cwd: spec.cwd, onLine });
    procs.push(proc);
    const r = typeof spec.ready === 'function' ? spec.ready() : spec.ready;
    const ready = 'admin' in r ? waitForReady(proc, r.admin, 60_000, r.host) : waitForPort(proc, r.port, 20_000, r.host);
    if (spec.concurrent) pending.push(ready); else await ready;
  }
  await Promise.all(pending);
  return procs;
}

async function main(): Promise<number> {
  const opts = options();
  if (opts.help) { console.log(USAGE); return 0; }
  if (opts.printBootstrap === 'local') { process.stdout.write(bookinfoBootstrap(await bookinfoPorts())); return 0; }
  if (opts.printBootstrap !== undefined) throw new Error(`--print-bootstrap: expected local, got ${opts.printBootstrap}`);
  if (opts.containers) {
    if (opts.base !== undefined && opts.base !== 'standin' && opts.base !== 'public') throw new Error(`--base: expected standin or public, got ${opts.base}`);
    if (opts.profile !== 'default' && opts.profile !== 'ambient') throw new Error(`--profile: expected ambient (or default), got ${opts.profile}`);
    const { runContainerDemo } = await import('./containers.ts');
    return runContainerDemo({ durationMs: opts.durationMs, connections: opts.connections, maxRequests: opts.maxRequests, keep: opts.keep, ingressPort: opts.ingressPort, base: opts.base, imageTag: opts.imageTag, profile: opts.profile });
  }
  const build = TOPOLOGIES[opts.topology];
  if (!build) throw new Error(`--topology: expected ${Object.keys(TOPOLOGIES).join(' or ')}, got ${opts.topology}`);

  const dir = mkdtempSync(path.join(tmpdir(), 'skua-demo-'));
  let echo = false;
  let interrupted = false;
  const cleanup = async (): Promise<void> => { await stopAll(); rmSync(dir, { recursive: true, force: true }); };
  process.on('exit', killAllSync);
  // First Ctrl-C: finish the current step and stop everything; a second one: kill and leave.
  const onSignal = (): void => {
    if (interrupted) { killAllSync(); rmSync(dir, { recursive: true, force: true }); process.exit(130); }
    interrupted = true;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const topo = await build({ dir, concurrency: opts.concurrency, logLevel: opts.logLevel });
  console.log(`skua demo — ${topo.title}\n`);
  try {
    const t0 = performance.now();
    const procs = await start(topo, dir, () => echo);
    console.log(`started ${procs.map((x) => `${x.name} (pid ${x.pid})`).join(', ')} in ${Math.round(performance.now() - t0)} ms\n`);

    const checks: CheckResult[] = [];
    for (const c of topo.checks) {
      if (interrupted) break;
      try { checks.push({ name: c.name, ok: true, detail: await c.run() }); } catch (err) { checks.push({ name: c.name, ok: false, detail: (err as Error).message }); }
    }
    printChecks(checks);
    // A failed check is easier to read next to what the control plane said.
    const cp = procs.find((x) => x.name === 'skua-controlplane');
    if (cp && checks.some((c) => !c.ok)) console.log(`skua-controlplane's last lines:\n${tailOf(cp, 25)}\n`);

    console.log(`load: ${opts.connections} keep-alive connections for ${opts.durationMs / 1000} s (at most ${opts.maxRequests} requests)...`);
    const load = await runLoad(topo.load, { durationMs: opts.durationMs, connections: opts.connections, maxRequests: opts.maxRequests, splitHeader: topo.split?.header, stopped: () => interrupted });
    printLoad(load);
    const split = topo.split ? splitVerdict(load.split, topo.split.expect) : { ok: true, line: '' };
    if (split.line) console.log(split.line + '\n');

    await printStats(topo.admins, topo.stats);
    const proxy = procs.find((x) => topo.processes.find((s) => s.name === x.name)?.proxy);
    if (proxy && proxy.stdout.trim()) {
      const lines = proxy.stdout.trim().split('\n').slice(-3);
      console.log(`${proxy.name} access log (last ${lines.length} lines):\n${lines.map((l) => `  ${l}`).join('\n')}\n`);
    }

    const dead = procs.filter((x) => x.status !== undefined);
    for (const d of dead) console.log(`FAIL: ${d.name} exited early (${d.status}):\n${tailOf(d)}`);
    const failedChecks = checks.filter((c) => !c.ok).length;
    const bad = load.targets.reduce((a, t) => a + t.unexpected, 0) + [...load.errors.values()].reduce((a, b) => a + b, 0);
    const ok = failedChecks === 0 && load.sent > 0 && bad === 0 && split.ok && dead.length === 0;
    console.log(ok
      ? `OK: ${checks.length} checks passed, ${load.sent} requests, no failures`
      : `FAILED: ${failedChecks} of ${checks.length} checks failed, ${bad} of ${load.sent} requests failed${split.ok ? '' : ', split off'}`);

    if (!opts.keep) console.log('(run with --keep to leave it all running and try it with curl)');
    if (opts.keep && !interrupted) {
      console.log(`\nrunning until Ctrl-C (access log follows). Try:\n${topo.urls.map((u) => `  ${u}`).join('\n')}\n`);
      echo = true;
      await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
      echo = false;
      return ok ? 0 : 1;
    }
    return interrupted ? 130 : ok ? 0 : 1;
  } catch (err) {
    console.error(`demo failed: ${(err as Error).message}`);
    return 1;
  } finally {
    console.log('stopping...');
    await cleanup();
  }
}

process.exitCode = await main().catch((err: Error) => { console.error(`demo: ${err.message}\n${USAGE}`); return 2; });
