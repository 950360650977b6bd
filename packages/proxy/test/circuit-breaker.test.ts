// Circuit breakers with Envoy's semantics: config compile, the *_open / remaining_* gauges, the
// request and retry breakers the router calls, and the HTTP/1.1 pool held to the cluster-wide
// max_connections and max_pending_requests against real loopback servers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Dispatcher } from 'undici';
import { Msg } from '../src/config/fields.ts';
import { StatsStore, statBase } from '../src/stats/store.ts';
import { compileCluster } from '../src/upstream/cluster-config.ts';
import { Cluster, isOverflow } from '../src/upstream/cluster.ts';
import type { Host } from '../src/upstream/host.ts';

type Json = Record<string, unknown>;

function clusterJson(ports: number[], cb: Json | undefined, extra: Json = {}): Json {
  return {
    name: 'svc', type: 'STATIC', connect_timeout: '1s', lb_policy: 'ROUND_ROBIN',
    ...(cb ? { circuit_breakers: cb } : {}),
    load_assignment: { cluster_name: 'svc', endpoints: [{ lb_endpoints: ports.map((p) => ({ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: p } } } })) }] },
    ...extra,
  };
}

function makeCluster(ports: number[], cb: Json | undefined): { c: Cluster; store: StatsStore; stat: (n: string) => number } {
  const store = new StatsStore();
  const c = new Cluster(compileCluster(new Msg(clusterJson(ports, cb), 'cluster')), store);
  const stat = (n: string): number => {
    const full = `cluster.svc.${n}`;
    const v = store.find('counters', full)?.value ?? store.find('gauges', full)?.value;
    assert.notEqual(v, undefined, `stat ${full} exists`);
    return v as number;
  };
  return { c, store, stat };
}

describe('circuit_breakers config', () => {
  const compile = (cb: Json) => compileCluster(new Msg(clusterJson([1], cb), 'cluster'));
  test("Envoy's defaults: 1024 / 1024 / 1024 / 3 for both priorities, per-host unlimited", () => {
    const c = compileCluster(new Msg(clusterJson([1], undefined), 'cluster'));
    assert.deepEqual(c.limits, { maxConnections: 1024, maxPendingRequests: 1024, maxRequests: 1024, maxRetries: 3, trackRemaining: false });
    assert.deepEqual(c.limitsHigh, c.limits);
    assert.equal(c.perHostMaxConnections, Infinity);
  });
  test('DEFAULT and HIGH thresholds, as istiod writes them', () => {
    const c = compile({ thresholds: [
      { max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295, max_retries: 4294967295, track_remaining: true },
      { priority: 'HIGH', max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 },
    ] });
    assert.equal(c.limits.maxRetries, 4294967295);
    assert.equal(c.limits.trackRemaining, true);
    assert.equal(c.limitsHigh.maxConnections, 100000);
    assert.equal(c.limitsHigh.maxRetries, 3);
  });
  test('per_host_thresholds max_connections', () => {
    assert.equal(compile({ per_host_thresholds: [{ max_connections: 7 }] }).perHostMaxConnections, 7);
  });
  test('refused: a repeated priority, retry_budget, max_connection_pools, unknown fields', () => {
    assert.throws(() => compile({ thresholds: [{ max_connections: 1 }, { priority: 'DEFAULT' }] }), /thresholds\[1\]\.priority: DEFAULT is given twice/);
    assert.throws(() => compile({ thresholds: [{ retry_budget: { budget_percent: { value: 20 } } }] }), /retry_budget: retry budgets are not supported/);
    assert.throws(() => compile({ thresholds: [{ max_connection_pools: 5 }] }), /max_connection_pools/);
    assert.throws(() => compile({ thresholds: [{ max_conections: 5 }] }), /max_conections: field is not supported/);
  });
});

describe('request and retry breakers (what the router calls)', () => {
  test('tryAcquireRequest: max_requests outstanding; overflow counts upstream_rq_pending_overflow', () => {
    const { c, stat } = makeCluster([1], { thresholds: [{ max_requests: 2, track_remaining: true }] });
    try {
      assert.equal(stat('circuit_breakers.default.rq_open'), 0);
      assert.equal(stat('circuit_breakers.default.remaining_rq'), 2);
      assert.equal(c.tryAcquireRequest(), true);
      assert.equal(c.tryAcquireRequest(), true);
      assert.equal(stat('circuit_breakers.default.rq_open'), 1);
      assert.equal(stat('circuit_breakers.default.remaining_rq'), 0);
      assert.equal(c.tryAcquireRequest(), false);
      assert.equal(stat('upstream_rq_pending_overflow'), 1);
      c.releaseRequest();
      assert.equal(stat('circuit_breakers.default.rq_open'), 0);
      assert.equal(c.tryAcquireRequest(), true);
    } finally { c.close(); }
  });
  test('tryAcquireRetry: max_retries outstanding; overflow counts upstream_rq_retry_overflow', () => {
    const { c, stat } = makeCluster([1], { thresholds: [{ max_retries: 1 }] });
    try {
      assert.equal(c.tryAcquireRetry(), true);
      assert.equal(stat('circuit_breakers.default.rq_retry_open'), 1);
      assert.equal(c.tryAcquireRetry(), false);
      assert.equal(stat('upstream_rq_retry_overflow'), 1);
      c.releaseRetry();
      assert.equal(stat('circuit_breakers.default.rq_retry_open'), 0);
    } finally { c.close(); }
  });
  test('gauges for both priorities; remaining_* only with track_remaining', () => {
    const { c, store } = makeCluster([1], { thresholds: [{ max_connections: 3 }] });
    try {
      for (const p of ['default', 'high']) {
        for (const g of ['cx_open', 'cx_pool_open', 'rq_pending_open', 'rq_open', 'rq_retry_open']) {
          assert.equal(store.find('gauges', `cluster.svc.circuit_breakers.${p}.${g}`)?.value, 0, `${p}.${g}`);
        }
      }
      assert.equal(store.gauges.has('cluster.svc.circuit_breakers.default.remaining_cx'), false);
      assert.equal(store.find('gauges', 'cluster.svc.circuit_breakers.high.remaining_cx'), undefined);
      assert.equal(statBase('cluster.svc.circuit_breakers.default.cx_open', store.tagsOf('cluster.svc.circuit_breakers.default.cx_open')!), 'cluster.circuit_breakers.default.cx_open');
    } finally { c.close(); }
  });
});

describe('HIGH priority (no route selects it): idle gauges', () => {
  test('remaining_* is the limit, *_open 0, or 1 for a limit of 0; they do not move with DEFAULT traffic', () => {
    const { c, stat } = makeCluster([1], { thresholds: [
      { max_requests: 1, track_remaining: true },
      { priority: 'HIGH', max_connections: 5, max_pending_requests: 0, max_requests: 9, max_retries: 2, track_remaining: true },
    ] });
    try {
      const high = (): number[] => ['cx_open', 'remaining_cx', 'rq_pending_open', 'remaining_pending', 'rq_open', 'remaining_rq',
        'rq_retry_open', 'remaining_retries', 'cx_pool_open', 'remaining_cx_pools'].map((g) => stat(`circuit_breakers.high.${g}`));
      assert.deepEqual(high(), [0, 5, 1, 0, 0, 9, 0, 2, 0, 4294967295]);
      assert.equal(c.tryAcquireRequest(), true);
      assert.equal(stat('circuit_breakers.default.rq_open'), 1);
      assert.deepEqual(high(), [0, 5, 1, 0, 0, 9, 0, 2, 0, 4294967295]);
      c.releaseRequest();
    } finally { c.close(); }
  });
});

// ---------------------------------------------------------------- the HTTP/1.1 pool

interface Held { readonly url: string; readonly res: ServerResponse }

/** A server that holds every request until the test releases it. */
class SlowServer {
  readonly held: Held[] = [];
  server!: Server;
  port = 0;
  accepted = 0;
  private waiters: Array<() => void> = [];
  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => { this.held.push({ url: req.url ?? '', res }); for (const w of this.waiters.splice(0)) w(); });
    });
    this.server.on('connection', () => { this.accepted++; });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }
  /** Resolves once `n` requests are being held. */
  async waitHeld(n: number): Promise<void> {
    while (this.held.length < n) await new Promise<void>((r) => this.waiters.push(r));
  }
  releaseAll(): void {
    for (const h of this.held.splice(0)) h.res.end('ok');
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

interface Outcome { status: number; error: Error | undefined }

/** A dispatch handler that records the outcome. */
class Collect implements Dispatcher.DispatchHandler {
  controller: Dispatcher.DispatchController | undefined;
  readonly done: Promise<Outcome>;
  private resolve!: (o: Outcome) => void;
  private status = 0;
  constructor() { this.done = new Promise((r) => { this.resolve = r; }); }
  onRequestStart(c: Dispatcher.DispatchController): void { this.controller = c; }
  onResponseStart(_c: Dispatcher.DispatchController, status: number): void { this.status = status; }
  onResponseData(): void { /* body ignored */ }
  onResponseEnd(): void { this.resolve({ status: this.status, error: undefined }); }
  onResponseError(_c: Dispatcher.DispatchController, err: Error): void { this.resolve({ status: 0, error: err }); }
}

function send(c: Cluster, host: Host, path = '/'): Collect {
  const h = new Collect();
  c.httpPool(host, false).dispatch({ path, method: 'GET', headers: { host: 'svc' }, body: null }, h);
  return h;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('HTTP/1.1 pool under the cluster breakers', { timeout: 20_000 }, () => {
  const a = new SlowServer(), b = new SlowServer();
  before(async () => { await a.start(); await b.start(); });
  after(async () => { await a.close(); await b.close(); });

  test('max_connections 1 + max_pending_requests 1: one in flight, one queued, the next overflows', async () => {
    const { c, stat } = makeCluster([a.port], { thresholds: [{ max_connections: 1, max_pending_requests: 1 }] });
    try {
      const host = c.hostSet.hosts[0];
      const r1 = send(c, host, '/1');
      await a.waitHeld(1);
      assert.equal(stat('circuit_breakers.default.cx_open'), 1);
      assert.equal(stat('upstream_rq_pending_active'), 0, 'r1 has its connection');
      const r2 = send(c, host, '/2');
      assert.equal(stat('upstream_rq_pending_active'), 1);
      assert.equal(stat('circuit_breakers.default.rq_pending_open'), 1);
      assert.equal(stat('upstream_cx_overflow'), 1, 'r2 could not open a second connection');
      const r3 = send(c, host, '/3');
      const o3 = await r3.done;
      assert.ok(o3.error && isOverflow(o3.error), `r3 overflowed: ${o3.error?.message}`);
      assert.equal(stat('upstream_rq_pending_overflow'), 1);
      a.releaseAll();
      await a.waitHeld(1);
      assert.equal(a.held[0].url, '/2', 'r2 reuses the connection');
      a.releaseAll();
      assert.equal((await r1.done).status, 200);
      assert.equal((await r2.done).status, 200);
      assert.equal(stat('upstream_rq_pending_total'), 2, 'r1 waited for its connection, r2 for a free one');
      assert.equal(stat('upstream_rq_pending_active'), 0);
      assert.equal(stat('circuit_breakers.default.rq_pending_open'), 0);
      assert.equal(stat('upstream_cx_total'), 1);
    } finally { c.close(); a.releaseAll(); }
  });

  test('a cold pool: the second request overflows while the first is still connecting (Envoy counts it pending)', async () => {
    const { c, stat } = makeCluster([a.port], { thresholds: [{ max_connections: 5, max_pending_requests: 1 }] });
    try {
      const host = c.hostSet.hosts[0];
      const r1 = send(c, host);
      const r2 = send(c, host);
      const o2 = await r2.done;
      assert.ok(o2.error && isOverflow(o2.error));
      await a.waitHeld(1);
      a.releaseAll();
      assert.equal((await r1.done).status, 200);
      assert.equal(stat('upstream_rq_pending_overflow'), 1);
    } finally { c.close(); a.releaseAll(); }
  });

  test('max_connections is cluster-wide; a host with no connection still gets one', async () => {
    const { c, stat } = makeCluster([a.port, b.port], { thresholds: [{ max_connections: 1 }] });
    try {
      const [ha, hb] = c.hostSet.hosts;
      const ra = send(c, ha, '/a1');
      await a.waitHeld(1);
      const rb = send(c, hb, '/b1');
      await b.waitHeld(1);
      assert.equal(stat('upstream_cx_overflow'), 1, 'host b went over the budget (and was let through)');
      assert.equal(stat('upstream_cx_active'), 2);
      const ra2 = send(c, ha, '/a2');
      await tick();
      assert.equal(a.held.length, 1, 'a second connection to host a is refused: /a2 waits');
      assert.equal(stat('upstream_cx_overflow'), 2);
      assert.equal(stat('upstream_rq_pending_active'), 1);
      b.releaseAll();
      a.releaseAll();
      await a.waitHeld(1);
      a.releaseAll();
      for (const r of [ra, rb, ra2]) assert.equal((await r.done).status, 200);
    } finally { c.close(); a.releaseAll(); b.releaseAll(); }
  });

  test('per_host_thresholds max_connections caps one host', async () => {
    const { c, stat } = makeCluster([a.port], { per_host_thresholds: [{ max_connections: 1 }] });
    try {
      const host = c.hostSet.hosts[0];
      const before = a.accepted;
      const r1 = send(c, host), r2 = send(c, host);
      await a.waitHeld(1);
      await tick();
      assert.equal(a.accepted - before, 1);
      assert.equal(stat('upstream_cx_overflow'), 1);
      a.releaseAll();
      await a.waitHeld(1);
      a.releaseAll();
      assert.equal((await r1.done).status, 200);
      assert.equal((await r2.done).status, 200);
    } finally { c.close(); a.releaseAll(); }
  });

  test('a queued request that is aborted stops counting (upstream_rq_cancelled)', async () => {
    const { c, stat } = makeCluster([a.port], { thresholds: [{ max_connections: 1 }] });
    try {
      const host = c.hostSet.hosts[0];
      const r1 = send(c, host);
      await a.waitHeld(1);
      const r2 = send(c, host);
      assert.equal(stat('upstream_rq_pending_active'), 1);
      r2.controller?.abort(new Error('downstream went away'));
      assert.equal(stat('upstream_rq_pending_active'), 0);
      assert.equal(stat('upstream_rq_cancelled'), 1);
      a.releaseAll();
      assert.equal((await r1.done).status, 200);
      await tick();
      assert.equal(a.held.length, 0, 'the aborted request never went upstream');
    } finally { c.close(); a.releaseAll(); }
  });

  test('a connect failure fails the pending request and frees its slot (upstream_rq_pending_failure_eject)', async () => {
    const dead = new SlowServer();
    await dead.start();
    const port = dead.port;
    await dead.close();
    const { c, stat } = makeCluster([port], { thresholds: [{ max_connections: 1, max_pending_requests: 1 }] });
    try {
      const o = await send(c, c.hostSet.hosts[0]).done;
      assert.equal((o.error as { code?: string } | undefined)?.code, 'ECONNREFUSED');
      assert.equal(stat('upstream_rq_pending_failure_eject'), 1);
      assert.equal(stat('upstream_rq_pending_active'), 0);
      assert.equal(stat('circuit_breakers.default.cx_open'), 0);
      assert.equal(c.breakers.connections.count, 0);
      assert.equal(c.breakers.pending.count, 0);
    } finally { c.close(); }
  });
});
