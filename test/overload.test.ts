// Overload protection (Envoy's overload manager): the global downstream connection cap refuses and
// counts connections past it; a fixed-heap monitor crossing its threshold turns on
// stop_accepting_requests (503 + x-envoy-overloaded), stop_accepting_connections and
// disable_http_keepalive, counted, and everything recovers when the heap falls again.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as netConnect, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { cleanup, startProxy, freePort, type Json } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { parseResponses, readUntil, hasResponses, sleep } from './lib/client.ts';
import { simpleHttp } from './lib/config.ts';
import { compileBootstrap, ProxyServer } from '../packages/proxy/src/api/envoy.ts';
import { overloadState } from '../packages/proxy/src/core/overload.ts';
import { ConfigError } from '../packages/proxy/src/api/core.ts';

const CONNECTIONS_MONITOR = {
  name: 'envoy.resource_monitors.global_downstream_max_connections',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig', max_active_downstream_connections: 3 },
};

/** Opens a connection and sends one request; 'served' with the status, or 'closed' if the proxy hung up first. */
async function tryRequest(port: number, keep: Socket[] = []): Promise<{ outcome: 'served'; status: number; connection: string | undefined } | { outcome: 'closed' }> {
  const s = netConnect(port, '127.0.0.1');
  s.on('error', () => { /* a refused connection is reset */ });
  await new Promise<void>((resolve) => { s.once('connect', () => resolve()); s.once('close', () => resolve()); });
  if (!s.destroyed) s.write('GET /overload HTTP/1.1\r\nHost: a\r\n\r\n');
  const buf = await readUntil(s, hasResponses(1), 5000).catch(() => Buffer.alloc(0));
  const r = parseResponses(buf).responses[0];
  if (r) keep.push(s); else s.destroy();
  return r ? { outcome: 'served', status: r.status, connection: r.headers.connection } : { outcome: 'closed' };
}

describe('overload manager', { timeout: 90_000 }, () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend(); });
  after(() => cleanup(() => backend?.close()));

  test('global_downstream_max_connections: connections past the cap are closed and counted; a freed slot is usable again', async (t) => {
    const proxy = await startProxy((p) => ({ ...simpleHttp(p('http'), backend.port), overload_manager: { resource_monitors: [CONNECTIONS_MONITOR] } }), { ports: ['http'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const port = proxy.ports.http;
    const open: Socket[] = [];
    t.after(() => { for (const s of open) s.destroy(); });
    for (let i = 0; i < 3; i++) assert.deepEqual(await tryRequest(port, open), { outcome: 'served', status: 200, connection: undefined });
    assert.deepEqual(await tryRequest(port, open), { outcome: 'closed' });
    assert.deepEqual(await tryRequest(port, open), { outcome: 'closed' });
    assert.equal(await proxy.stat(`listener.127.0.0.1_${port}.downstream_global_cx_overflow`), 2);
    assert.equal(await proxy.stat(`listener.127.0.0.1_${port}.downstream_cx_active`), 3);
    open.shift()!.destroy();
    let again: Awaited<ReturnType<typeof tryRequest>> = { outcome: 'closed' };
    for (let i = 0; i < 40 && again.outcome === 'closed'; i++) { await sleep(50); again = await tryRequest(port, open); }
    assert.equal(again.outcome, 'served', 'a slot freed by a closed connection is not reused');
  });

  test('--concurrency 2: the cap counts the connections of both worker threads, as Envoy\'s counts the process\'s', async (t) => {
    const proxy = await startProxy((p) => ({ ...simpleHttp(p('http'), backend.port), overload_manager: { resource_monitors: [CONNECTIONS_MONITOR] } }),
      { ports: ['http'], args: ['--concurrency', '2'] });
    t.after(() => proxy.stop({ allowExited: true }));
    const port = proxy.ports.http;
    const open: Socket[] = [];
    t.after(() => { for (const s of open) s.destroy(); });
    // The kernel spreads new connections over both threads (SO_REUSEPORT): per-thread caps would serve up to 6.
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) outcomes.push((await tryRequest(port, open)).outcome);
    assert.deepEqual(outcomes, ['served', 'served', 'served', ...Array<string>(7).fill('closed')]);
    assert.equal(await proxy.stat(`listener.127.0.0.1_${port}.downstream_global_cx_overflow`), 7);
    assert.equal(await proxy.stat(`listener.127.0.0.1_${port}.downstream_cx_active`), 3);
    assert.equal(await proxy.stat('overload.envoy.resource_monitors.global_downstream_max_connections.max'), 3, 'the limit once, not once per thread');
    open.shift()!.destroy();
    let again: Awaited<ReturnType<typeof tryRequest>> = { outcome: 'closed' };
    for (let i = 0; i < 40 && again.outcome === 'closed'; i++) { await sleep(50); again = await tryRequest(port, open); }
    assert.equal(again.outcome, 'served', 'a slot freed on either thread is usable again');
  });

  test('the runtime key overload.global_downstream_max_connections is a cap too; the monitor wins over it', () => {
    const base = simpleHttp(1, 2);
    const runtime = { layered_runtime: { layers: [{ name: 'static', static_layer: { 'overload.global_downstream_max_connections': 7 } }] } };
    assert.equal(compileBootstrap({ ...base, ...runtime }).overload.maxConnections, 7);
    const both = compileBootstrap({ ...base, ...runtime, overload_manager: { resource_monitors: [CONNECTIONS_MONITOR] } }).overload;
    assert.equal(both.maxConnections, 3);
    assert.equal(both.maxConnectionsSource, 'monitor');
    const none = compileBootstrap(base).overload;
    assert.equal(none.maxConnectionsSource, 'default');
    assert.ok(none.maxConnections >= 64, 'a default cap derived from the open-file limit');
  });

  test('bad overload_manager config is refused naming the field', () => {
    const base = simpleHttp(1, 2);
    const refuse = (om: Json, field: RegExp): void => {
      assert.throws(() => compileBootstrap({ ...base, overload_manager: om }), (e: unknown) => e instanceof ConfigError && field.test(e.path), JSON.stringify(om));
    };
    refuse({ resource_monitors: [{ name: 'envoy.resource_monitors.nope' }] }, /^overload_manager\.resource_monitors\[0\]\.name$/);
    refuse({ resource_monitors: [{ ...CONNECTIONS_MONITOR, typed_config: { ...CONNECTIONS_MONITOR.typed_config, max_active_downstream_connections: -1 } }] }, /max_active_downstream_connections$/);
    refuse({ actions: [{ name: 'envoy.overload_actions.reduce_timeouts', triggers: [] }] }, /actions\[0\]\.name$/);
    refuse({ actions: [{ name: 'envoy.overload_actions.stop_accepting_requests', triggers: [{ name: 'envoy.resource_monitors.fixed_heap', threshold: { value: 0.9 } }] }] }, /triggers\[0\]\.name$/);
  });

  test('fixed_heap: past the threshold requests get 503 + x-envoy-overloaded, connections are refused, keep-alive is off; all counted; recovery when the heap falls', async (t) => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // Compiling a bootstrap once first: what that loads for good (proto schemas) is part of the baseline.
    compileBootstrap(simpleHttp(await freePort(), backend.port, { statPrefix: 'warm' }));
    gc();
    const baseline = process.memoryUsage().heapUsed + process.memoryUsage().external;
    const maxHeap = Math.round(baseline / 0.55); // pressure starts near 0.55 (start-up garbage aside); 0.85 trips the actions
    const port = await freePort();
    const trigger = [{ name: 'envoy.resource_monitors.fixed_heap', threshold: { value: 0.85 } }];
    const raw = {
      ...simpleHttp(port, backend.port, { statPrefix: 'ovl' }),
      overload_manager: {
        refresh_interval: '0.05s',
        resource_monitors: [{ name: 'envoy.resource_monitors.fixed_heap', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig', max_heap_size_bytes: maxHeap } }],
        actions: ['stop_accepting_requests', 'stop_accepting_connections', 'disable_http_keepalive'].map((a) => ({ name: `envoy.overload_actions.${a}`, triggers: trigger })),
      },
    };
    const server = new ProxyServer(compileBootstrap(raw), { concurrency: 1, drainTimeS: 1, drainStrategy: 'immediate', configPath: '', configYaml: '', logLevel: 'error', reusePort: false, admin: false });
    await server.start();
    gc(); // start-up garbage is not load
    server.overload.refresh();
    const open: Socket[] = [];
    t.after(() => { for (const s of open) s.destroy(); server.overload.stop(); server.listeners.closeAll(); server.clusters.closeAll(); });
    const stat = (name: string): number | undefined => server.stats.find('counters', name)?.value ?? server.stats.find('gauges', name)?.value;

    assert.deepEqual(await tryRequest(port, open), { outcome: 'served', status: 200, connection: undefined });
    const early = netConnect(port, '127.0.0.1');
    open.push(early);
    await new Promise((r) => early.once('connect', r));

    // Real heap growth: ~0.3 of the limit in live JS objects.
    let ballast: number[][] | undefined = [];
    while (process.memoryUsage().heapUsed + process.memoryUsage().external < maxHeap * 0.95) ballast.push(new Array(100_000).fill(1.5));
    server.overload.refresh();
    assert.equal(overloadState.stopAcceptingRequests, true);
    assert.equal(stat('overload.envoy.overload_actions.stop_accepting_requests.active'), 1);
    assert.ok((stat('overload.envoy.resource_monitors.fixed_heap.pressure') ?? 0) >= 85);

    // A connection accepted before the overload: its request is answered 503 and the connection closes.
    early.write('GET /overload HTTP/1.1\r\nHost: a\r\n\r\n');
    const reply = parseResponses(await readUntil(early, hasResponses(1), 5000)).responses[0];
    assert.equal(reply.status, 503);
    assert.equal(reply.headers['x-envoy-overloaded'], 'true');
    assert.equal(reply.body.toString(), 'envoy overloaded');
    assert.equal(reply.headers.connection, 'close');
    assert.equal(stat('http.ovl.downstream_rq_overload_close'), 1);
    // New connections are closed at accept.
    assert.deepEqual(await tryRequest(port, open), { outcome: 'closed' });
    assert.equal(stat(`listener.127.0.0.1_${port}.downstream_cx_overload_reject`), 1);

    // The heap falls: everything recovers.
    ballast = undefined;
    gc();
    server.overload.refresh();
    assert.equal(overloadState.stopAcceptingRequests, false, `pressure still ${stat('overload.envoy.resource_monitors.fixed_heap.pressure')}%`);
    assert.equal(stat('overload.envoy.overload_actions.stop_accepting_requests.active'), 0);
    assert.deepEqual(await tryRequest(port, open), { outcome: 'served', status: 200, connection: undefined });
    assert.equal(stat('http.ovl.downstream_rq_overload_close'), 1);
  });
});
