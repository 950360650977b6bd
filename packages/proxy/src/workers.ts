import type { XdsUpdate } from './xds/types.ts';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { compileBootstrap, loadBootstrapSource } from './config/bootstrap.ts';
import { applyLogSettings, log, logSettings, type LogSettings } from './core/log.ts';
import { ProxyServer, type ListenerDrain } from './server.ts';
import type { ProxyArgs } from './agent/cli.ts';
import { StatsStore, Scope, Histogram as HistogramClass, type EachStat } from './stats/store.ts';
import { labelledFamily, type FamilyKind } from './stats/labelled.ts';
import { secrets } from './tls/secrets.ts';
import { WorkerFeed } from './worker-feed.ts';
import { newSharedBreakerMemory, useSharedBreakers } from './upstream/shared-breakers.ts';
import { newSharedOutlierMemory, useSharedOutlier } from './upstream/shared-outlier.ts';
import { newSharedConnectionCount, newSharedHeapSlots, useSharedConnectionCount, useSharedHeapSlots } from './core/overload.ts';
import { receivedUpdate } from './xds/follower-updates.ts';
import { addCounts, hostCounts } from './admin/clusters.ts';

type HistogramData = { buckets: number[]; count: number; sum: number };
interface StatsValues {
  counters: Array<[string, number]>;
  gauges: Array<[string, number]>;
  histograms: Array<[string, HistogramData]>;
}

/** A worker's stats, sent to the main thread at scrape time: unscoped ones by full name, scoped ones per scope. */
interface StatsSnapshot extends StatsValues {
  groups: Array<{ prefix: string; base: string; tags: Array<[string, string]>; stats: StatsValues }>;
  families: Array<{ namespace: string; name: string; kind: FamilyKind; series: Array<{ names: string[]; values: string[]; value: number; hist?: HistogramData }> }>;
}

function valuesOf(each: EachStat): StatsValues {
  const v: StatsValues = { counters: [], gauges: [], histograms: [] };
  each('counters', (k, c) => v.counters.push([k, c.value]));
  each('gauges', (k, g) => v.gauges.push([k, g.value]));
  each('histograms', (k, h) => v.histograms.push([k, { buckets: Array.from(h.buckets), count: h.count, sum: h.sum }]));
  return v;
}

function snapshot(store: StatsStore): StatsSnapshot {
  return {
    ...valuesOf((kind, fn) => store.eachUnscoped(kind, fn)),
    groups: [...store.groups.values()].map((g) => ({
      prefix: g.tags.prefix, base: g.tags.base, tags: g.tags.tags.map(([a, b]) => [a, b] as [string, string]), stats: valuesOf((kind, fn) => g.each(kind, fn)),
    })),
    families: [...store.families.values()].map((f) => ({
      namespace: f.namespace, name: f.name, kind: f.kind,
      series: [...f.series.values()].map((s) => {
        const m = s.metric;
        return m instanceof HistogramClass
          ? { names: [...s.names], values: [...s.values], value: 0, hist: { buckets: Array.from(m.buckets), count: m.count, sum: m.sum } }
          : { names: [...s.names], values: [...s.values], value: m.value };
      }),
    })),
  };
}

/**
 * Gauges of what every thread holds alike (clusters, their hosts, listeners, limits): the main thread's
 * value is the process's, where adding up N threads' copies would show N times the hosts. The other
 * gauges (active connections and requests) count each thread's own and add up.
 */
const SAME_ON_EVERY_THREAD = /(^|\.)(membership_(total|healthy|degraded|excluded)|max_host_weight|lb_subsets_active|version|(active|warming)_clusters|total_listeners_(active|warming|draining))$|^overload\./;

/** Adds values into stats got (or made) by `at`: the store's own maps or a scope's. A worker's gauges of shared state are left out. */
function addValues(at: Pick<StatsStore, 'counter' | 'gauge' | 'histogram'>, v: StatsValues, worker: boolean): void {
  for (const [k, n] of v.counters) at.counter(k).value += n;
  for (const [k, n] of v.gauges) if (!worker || !SAME_ON_EVERY_THREAD.test(k)) at.gauge(k).value += n;
  for (const [k, d] of v.histograms) {
    at.histogram(k).add(d.buckets, d.count, d.sum);
  }
}

function addInto(store: StatsStore, s: StatsSnapshot, worker: boolean): void {
  addValues(store, s, worker);
  for (const g of s.groups) addValues(new Scope(store, g.prefix, g.base, g.tags), g.stats, worker);
  for (const f of s.families) {
    const fam = labelledFamily(store, f.namespace, f.name, f.kind);
    for (const se of f.series) {
      const m = fam.get(se.names, se.values);
      if (m instanceof HistogramClass && se.hist) {
        m.add(se.hist.buckets, se.hist.count, se.hist.sum);
      } else if (!(m instanceof HistogramClass)) {
        // Labelled gauges (istio_build) describe the process, not a worker: merged by max.
        m.value = f.kind === 'gauge' ? Math.max(m.value, se.value) : m.value + se.value;
      }
    }
  }
}

/**
 * What every thread of the process counts together, as Envoy keeps it once per process: circuit
 * breakers, outlier detection, the downstream connection cap and the fixed_heap monitor's heap.
 */
interface SharedState {
  readonly breakers: SharedArrayBuffer;
  readonly outliers: SharedArrayBuffer;
  readonly connections: SharedArrayBuffer;
  readonly heaps: SharedArrayBuffer;
}

function newSharedState(threads: number): SharedState {
  return { breakers: newSharedBreakerMemory(), outliers: newSharedOutlierMemory(), connections: newSharedConnectionCount(), heaps: newSharedHeapSlots(threads) };
}

/** Thread `index` (0: the main thread, which publishes the shared gauges and sweeps outliers) uses `s`. */
function useSharedState(s: SharedState, index: number): void {
  useSharedBreakers(s.breakers, index === 0);
  useSharedOutlier(s.outliers, index === 0);
  useSharedConnectionCount(s.connections);
  useSharedHeapSlots(s.heaps, index);
}

/** Asks every worker `what` ('stats' or 'hosts') and waits for each one's answer, the message field of that name. */
function askWorkers<T>(workers: readonly Worker[], what: 'stats' | 'hosts'): Promise<T[]> {
  return Promise.all(workers.map((w) => new Promise<T>((resolve) => {
    const onReply = (m: unknown): void => {
      if (typeof m === 'object' && m !== null && what in m) { w.off('message', onReply); resolve((m as Record<string, T>)[what]); }
    };
    w.on('message', onReply);
    w.postMessage(what);
  })));
}

/**
 * --concurrency N: the main thread serves as worker 0 and owns admin; N-1
 * worker_threads run the same listeners with SO_REUSEPORT, so the kernel
 * spreads connections across event loops (Envoy's worker model).
 */
export async function startWorkers(server: ProxyServer, args: ProxyArgs): Promise<void> {
  const workers: Worker[] = [];
  // State Envoy keeps once per process, made before any cluster or listener is.
  const shared = newSharedState(args.concurrency);
  useSharedState(shared, 0);
  for (let i = 1; i < args.concurrency; i++) {
    // Secrets live per thread: a worker starts with the main thread's and hears of every change.
    const initialSecrets = secrets.all().map((s) => [s.name, s.raw]);
    const w = new Worker(new URL(import.meta.url), { workerData: { configPath: args.configPath, configYaml: args.configYaml, logLevel: args.logLevel, log: logSettings(), index: i, secrets: initialSecrets, shared } });
    workers.push(w);
    await new Promise<void>((resolve, reject) => {
      w.once('message', (m: { ready?: boolean; error?: string }) => (m.ready ? resolve() : reject(new Error(m.error))));
      w.once('error', reject);
    });
  }
  secrets.onChange((name, secret) => {
    for (const w of workers) w.postMessage({ secret: name, raw: secret?.raw ?? null });
  });
  const feeds = workers.map((w) => {
    const feed = new WorkerFeed(w);
    w.on('message', (m: { applied?: boolean }) => { if (m?.applied) feed.applied(); });
    w.once('exit', () => feed.exited());
    return feed;
  });
  server.collectStats = async () => {
    // Shared breaker counts and ejections change on every thread; the main thread's gauges publish them.
    for (const c of server.clusters.all()) c.refreshSharedGauges();
    const merged = new StatsStore();
    addInto(merged, snapshot(server.stats), false);
    for (const s of await askWorkers<StatsSnapshot>(workers, 'stats')) addInto(merged, s, true);
    return merged;
  };
  server.collectHostCounts = async () => {
    const sums = new Map<string, number[]>();
    for (const counts of await askWorkers<Array<[string, number[]]>>(workers, 'hosts')) addCounts(sums, counts);
    return sums;
  };
  // Only the main thread talks to the control plane; workers apply the same updates, in order.
  server.onXdsUpdate = (update) => Promise.all(feeds.map((f) => f.send({ xds: update }))).then(() => undefined);
  server.onFetchTimeout = (key) => { for (const f of feeds) void f.send({ fetchTimeout: key }); };
  server.drainWorkerListeners = (drain) => { for (const w of workers) w.postMessage({ drainListeners: drain }); };
  server.drainWorkers = (ms) => Promise.all(workers.map((w) => new Promise<void>((resolve) => {
    w.once('exit', () => resolve());
    w.postMessage({ drain: ms });
  }))).then(() => undefined);
  await server.start();
}

async function runWorker(): Promise<void> {
  const data = workerData as { configPath: string; configYaml: string; logLevel: string; log: LogSettings; index: number; secrets: Array<[string, Record<string, unknown>]>;
    shared: SharedState };
  applyLogSettings(data.log);
  useSharedState(data.shared, data.index);
  try {
    for (const [name, raw] of data.secrets) secrets.update(name, raw);
    // The main thread validated field names already (and counts what --allow-unknown-static-fields let through).
    const bootstrap = compileBootstrap(loadBootstrapSource(data.configPath || undefined, data.configYaml || undefined), { unknownFields: 'skip' });
    const server = new ProxyServer(bootstrap, { concurrency: 1, drainTimeS: 0, drainStrategy: 'gradual', configPath: data.configPath, configYaml: data.configYaml, logLevel: data.logLevel, reusePort: true, admin: false, xdsFollower: true });
    await server.start();
    // Updates apply one at a time, in the order the main thread applied them; each done one asks for the next (worker-feed.ts).
    let applying: Promise<unknown> = Promise.resolve();
    const applied = (): void => parentPort!.postMessage({ applied: true });
    type Message = string | { xds: XdsUpdate } | { fetchTimeout: string } | { secret: string; raw: Record<string, unknown> | null } | { drain: number }
      | { drainListeners: ListenerDrain };
    parentPort!.on('message', (m: Message) => {
      if (m === 'stats') parentPort!.postMessage({ stats: snapshot(server.stats) });
      else if (m === 'hosts') parentPort!.postMessage({ hosts: hostCounts(server) });
      else if (typeof m === 'object' && 'drainListeners' in m) {
        const d = m.drainListeners;
        server.drainListeners(d.inboundOnly, d.graceful, d.ms, d.strategy);
      }
      else if (typeof m === 'object' && 'drain' in m) {
        // The main thread's drain settings; this thread's own connections decide when it is done.
        void server.drainAndExit(m.drain);
      } else if (typeof m === 'object' && 'xds' in m) {
        applying = applying.then(() => server.dynamic?.apply(receivedUpdate(m.xds))).catch((err: Error) => log.error(`worker ${data.index}: xDS update: ${err.message}`)).finally(applied);
      } else if (typeof m === 'object' && 'fetchTimeout' in m) {
        applying = applying.then(() => server.dynamic?.expireFetch(m.fetchTimeout)).finally(applied);
      }
      else if (typeof m === 'object' && 'secret' in m) {
        try {
          if (m.raw) secrets.update(m.secret, m.raw); else secrets.remove(m.secret);
        } catch (err) {
          log.error(`worker ${data.index}: secret ${m.secret}: ${(err as Error).message}`);
        }
      }
    });
    parentPort!.postMessage({ ready: true });
  } catch (err) {
    parentPort!.postMessage({ error: (err as Error).message });
  }
}

if (!isMainThread && (workerData as { index?: number } | null)?.index !== undefined) void runWorker();
