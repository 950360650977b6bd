// Certificate rotation under load: SECRET_TTL=3s makes each proxy's secret manager
// fetch a new certificate about every 1.5 s (SECRET_GRACE_PERIOD_RATIO 0.5). A client
// keeps sending through the mTLS pair across at least three rotations of each side:
// no request may fail; new connections present the new certificate (the upstream
// cluster recycles connections every 25 requests) while open ones keep working. The
// server runs two worker threads: each gets every rotated secret from the main thread.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request as httpRequest } from 'node:http';
import { connect as tlsConnect } from 'node:tls';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { sleep } from './lib/client.ts';
import { bootstrap, chain, hcm, listener, routeTo, vhost, cluster, T } from './lib/config.ts';
import { istioDownstreamTls, meshCluster, startLocalCa, workload, type LocalCa, type Workload } from './lib/mesh.ts';

const REVIEWS = 'spiffe://cluster.local/ns/default/sa/reviews';
const ROTATION_ENV = { SECRET_TTL: '3s', SECRET_GRACE_PERIOD_RATIO: '0.5' };

let local: LocalCa, backend: Backend, server: RunningProxy, client: RunningProxy, wlServer: Workload, wlClient: Workload;

before(async () => {
  local = await startLocalCa();
  backend = await startHttpBackend();
  wlServer = workload(local, 'default', 'reviews', ROTATION_ENV);
  wlClient = workload(local, 'default', 'productpage', ROTATION_ENV);
  server = await startProxy((p) => bootstrap([
    listener(p('inbound'), [
      chain(hcm([vhost([routeTo('backend')])], { statPrefix: 'inbound' }), {
        filter_chain_match: { transport_protocol: 'tls' }, transport_socket: istioDownstreamTls(),
      }),
    ], { listenerFilters: [{ name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': T.tlsInspector } }] }),
  ], [cluster('backend', [backend.port])]), { ports: ['inbound'], env: wlServer.env, cwd: wlServer.dir, args: ['--concurrency', '2'] });
  client = await startProxy((p) => bootstrap([
    listener(p('outbound'), [chain(hcm([vhost([routeTo('reviews')])], { statPrefix: 'outbound' }))]),
  ], [meshCluster('reviews', server.ports.inbound, [REVIEWS], { extra: { max_requests_per_connection: 25 } })]),
  { ports: ['outbound'], env: wlClient.env, cwd: wlClient.dir });
});

after(() => cleanup(() => client?.stop(), () => server?.stop(), () => backend?.close(), () => local?.close(), () => wlServer?.remove(), () => wlClient?.remove()));

/** The serial of the certificate the server presents to a new connection (no client cert: we only look). */
function presentedSerial(port: number, ca: string): Promise<string> {
  return new Promise((resolve) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['istio'], checkServerIdentity: () => undefined });
    s.once('secureConnect', () => { const serial = s.getPeerCertificate().serialNumber; s.destroy(); resolve(serial); });
    s.once('error', () => resolve(''));
  });
}

function get(agent: Agent, port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent }, (res) => { res.resume(); res.once('end', () => resolve(res.statusCode ?? 0)); });
    req.once('error', () => resolve(-1));
    req.end();
  });
}

test('a client keeps sending through the mTLS pair across three rotations of each side without a failure', { timeout: 60_000 }, async () => {
  const issued = local.server.issuedTo;
  const startServer = issued.get(REVIEWS) ?? 0, startClient = issued.get(wlClient.spiffe) ?? 0;
  const rotations = (): { server: number; client: number } => ({ server: (issued.get(REVIEWS) ?? 0) - startServer, client: (issued.get(wlClient.spiffe) ?? 0) - startClient });
  const agent = new Agent({ keepAlive: true, maxSockets: 6 });
  const statuses = new Map<number, number>();
  const serials = new Set<string>();
  let stop = false;
  const worker = async (): Promise<void> => {
    for (let i = 0; !stop && i < 100_000; i++) {
      const st = await get(agent, client.ports.outbound, `/load/${i}`);
      statuses.set(st, (statuses.get(st) ?? 0) + 1);
    }
  };
  const sampler = async (): Promise<void> => {
    while (!stop) { serials.add(await presentedSerial(server.ports.inbound, local.ca.rootCertPem)); await sleep(250); }
  };
  const runs = [...Array.from({ length: 6 }, worker), sampler()];
  const deadline = Date.now() + 20_000;
  // Until each proxy has rotated at least three times.
  while (Date.now() < deadline && (rotations().server < 3 || rotations().client < 3)) await sleep(200);
  await sleep(500);
  stop = true;
  await Promise.all(runs);
  agent.destroy();
  const total = [...statuses.values()].reduce((a, b) => a + b, 0);
  if (process.env.SKUA_TEST_DEBUG) console.log({ total, rotations: rotations(), serials: serials.size, handshakes: await client.stat('cluster.reviews.ssl.handshake') });
  const r = rotations();
  assert.ok(r.server >= 3 && r.client >= 3, `rotations during the run: ${JSON.stringify(r)}`);
  assert.deepEqual([...statuses.keys()], [200], `every request answered 200 (${JSON.stringify([...statuses])} of ${total})`);
  assert.ok(total > 200, `load was sent (${total} requests)`);
  serials.delete('');
  assert.ok(serials.size >= 3, `new connections saw ${serials.size} server certificates`);
  // The client side opened connections with several certificates too (connections recycle every 25 requests).
  assert.ok((await client.stat('cluster.reviews.ssl.handshake'))! > total / 25 - 6);
  assert.equal(await client.stat('cluster.reviews.ssl.connection_error'), 0);
  assert.equal(await server.stat(`listener.127.0.0.1_${server.ports.inbound}.ssl.fail_verify_error`), 0);
});
