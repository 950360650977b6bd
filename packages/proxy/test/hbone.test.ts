// HBONE client pool and server over real mutual TLS 1.3 (certificates from a real CA through the
// certificate manager): bytes and half-close end to end, the pool key {source identity, destination
// identity, destination}, at most 100 streams on a connection and the 101st on a second one, idle
// release, a wrong identity refused both ways, and the server as a listener terminal.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { HboneClientPool, HboneConnectError, type HboneKey, type HboneStream } from '../src/hbone/client-pool.ts';
import { dialHbone, mtlsDialer } from '../src/hbone/mtls.ts';
import { connect as h2connect } from 'node:http2';
import { hboneTerminal } from '../src/hbone/terminal.ts';
import { CertificateManager } from '../src/tls/cert-manager.ts';
import { ActiveListener } from '../src/listener/active.ts';
import { plainListener } from '../src/listener/config.ts';
import { ClusterManager } from '../src/upstream/manager.ts';
import { StatsStore } from '../src/stats/store.ts';
import { CertificateAuthority } from '../../controlplane/src/ca/authority.ts';
import { fixture, id, roundTrip, type Fixture } from './lib/hbone-fixture.ts';

const CLIENT = id('front', 'web'), OTHER_CLIENT = id('front', 'batch'), SERVER = id('back', 'api'), IMPOSTOR = id('back', 'not-api');

let f: Fixture;
const pools: HboneClientPool[] = [];
before(async () => { f = await fixture(); });
after(async () => { for (const p of pools) p.destroy(); await f.close(); });

function pool(o: ConstructorParameters<typeof HboneClientPool>[1] = {}): HboneClientPool {
  const p = new HboneClientPool(mtlsDialer((identity) => f.certs.get(identity)), o);
  pools.push(p);
  return p;
}

const until = async (cond: () => boolean, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) { if (Date.now() > end) throw new Error('timed out'); await new Promise((r) => setTimeout(r, 20)); }
};

describe('HBONE over mutual TLS', { timeout: 60_000 }, () => {
  test('a tunnel carries every byte both ways with half-close; the server sees the client identity and the authority', async () => {
    const { port, inbound } = await f.server(SERVER);
    const p = pool();
    const before = f.echoed.length;
    const t = await p.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` }, `127.0.0.1:${f.echoPort}`);
    assert.equal(await roundTrip(t.stream, 3_000_000), 3_000_000, 'all 3 MB came back');
    await until(() => f.echoed.length > before && f.echoed[before] === 3_000_000);
    assert.equal(inbound[0].peerIdentity, CLIENT);
    assert.equal(inbound[0].authority, `127.0.0.1:${f.echoPort}`);
    assert.equal(inbound[0].localAddress, '127.0.0.1');
  });

  test('the pool key: one connection per {source identity, destination identity, destination}', async () => {
    const a = await f.server(SERVER), b = await f.server(SERVER);
    const p = pool();
    const k = (src: string, port: number): HboneKey => ({ sourceIdentity: src, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` });
    const open: HboneStream[] = [];
    for (let i = 0; i < 5; i++) open.push(await p.connect(k(CLIENT, a.port), `127.0.0.1:${f.echoPort}`));
    assert.equal(p.connectionsFor(k(CLIENT, a.port)).length, 1, 'five streams, one connection');
    open.push(await p.connect(k(OTHER_CLIENT, a.port), `127.0.0.1:${f.echoPort}`));
    open.push(await p.connect(k(CLIENT, b.port), `127.0.0.1:${f.echoPort}`));
    assert.equal(p.connectionCount, 3, 'another source identity or destination opens its own connection');
    assert.deepEqual(new Set(a.inbound.map((i) => i.peerIdentity)), new Set([CLIENT, OTHER_CLIENT]), 'each presents its own certificate');
    assert.equal(a.server.sessionCount, 2);
    for (const t of open) t.stream.destroy();
  });

  test('at most 100 streams on a connection: the 101st opens a second one', async () => {
    const { server, port } = await f.server(SERVER);
    const p = pool();
    const key: HboneKey = { sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` };
    const open = await Promise.all(Array.from({ length: 101 }, () => p.connect(key, `127.0.0.1:${f.echoPort}`)));
    assert.deepEqual(p.connectionsFor(key).map((c) => c.streams).sort((x, y) => y - x), [100, 1]);
    assert.equal(server.sessionCount, 2);
    // Every one of them is a working tunnel.
    const echoed = await Promise.all(open.slice(95).map((t) => roundTrip(t.stream, 1000)));
    assert.deepEqual(echoed, [1000, 1000, 1000, 1000, 1000, 1000]);
    for (const t of open) t.stream.destroy();
  });

  test('a connection without streams is released after the idle time', async () => {
    const { server, port } = await f.server(SERVER);
    const p = pool({ idleReleaseMs: 300 });
    const key: HboneKey = { sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` };
    const t = await p.connect(key, `127.0.0.1:${f.echoPort}`);
    assert.equal(await roundTrip(t.stream, 10), 10);
    assert.equal(p.connectionCount, 1);
    const released = Date.now();
    await until(() => p.connectionCount === 0 && server.sessionCount === 0);
    assert.ok(Date.now() - released >= 250, 'not before the idle time');
    // The next tunnel dials afresh.
    const t2 = await p.connect(key, `127.0.0.1:${f.echoPort}`);
    assert.equal(await roundTrip(t2.stream, 10), 10);
  });

  test('a server presenting another identity than expected is refused by the client', async () => {
    const { port, inbound } = await f.server(IMPOSTOR);
    const p = pool();
    await assert.rejects(p.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` }, `127.0.0.1:${f.echoPort}`),
      (e: HboneConnectError) => e instanceof HboneConnectError && e.kind === 'connect' && /not-api.*is not .*sa\/api/.test(e.message));
    assert.equal(inbound.length, 0, 'no stream reached the server');
    assert.equal(p.connectionCount, 0, 'the failed connection left the pool');
  });

  test('a client the server does not accept is refused by the server (verifyPeer, untrusted CA)', async () => {
    const { server, port, inbound } = await f.server(SERVER, { verifyPeer: (peer) => peer === OTHER_CLIENT });
    const p = pool();
    await assert.rejects(p.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` }, `127.0.0.1:${f.echoPort}`), HboneConnectError);
    assert.equal(server.refused.identity, 1);
    const ok = await p.connect({ sourceIdentity: OTHER_CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` }, `127.0.0.1:${f.echoPort}`);
    assert.equal(await roundTrip(ok.stream, 5), 5);
    // A certificate from another CA never gets through the handshake.
    const rogue = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
    const rogueCerts = new CertificateManager({ issue: (i, csr, ttl) => rogue.issue(csr, i, ttl), rootCertPem: f.ca.rootCertPem });
    const rp = new HboneClientPool(mtlsDialer((i) => rogueCerts.get(i)));
    pools.push(rp);
    await assert.rejects(rp.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` }, `127.0.0.1:${f.echoPort}`), HboneConnectError);
    assert.equal(inbound.filter((i) => i.peerIdentity === CLIENT).length, 0);
    rogueCerts.stop();
  });

  test('a refusal and a non-CONNECT method get their status', async () => {
    const { port } = await f.server(SERVER, { onStream: (req) => req.refuse(401) });
    const p = pool();
    await assert.rejects(p.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${port}` }, '10.0.0.1:80'),
      (e: HboneConnectError) => e.kind === 'status' && e.status === 401);
    const session = h2connect('https://hbone.invalid', { createConnection: () => dialHbone(f.certs.peek(CLIENT)!, '127.0.0.1', port, [SERVER]) });
    try {
      const status = await new Promise<unknown>((resolve, reject) => {
        const req = session.request({ ':method': 'GET', ':path': '/' });
        req.once('response', (h) => resolve(h[':status']));
        req.once('error', reject);
        req.end();
      });
      assert.equal(status, 405);
    } finally {
      session.destroy();
    }
  });

  test('as a listener terminal: the listener core accepts, counts and drains; HBONE serves', async () => {
    const store = new StatsStore();
    const { server } = await f.server(SERVER);
    const listener = new ActiveListener(plainListener({ name: 'hbone', address: '127.0.0.1', port: 0, terminal: hboneTerminal(server), statPrefix: 'hbone' }),
      new ClusterManager(store), store);
    await listener.listen(false);
    try {
      const p = pool();
      const t = await p.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${listener.boundPort}` }, `127.0.0.1:${f.echoPort}`);
      assert.equal(await roundTrip(t.stream, 100_000), 100_000);
      assert.equal(store.scope('listener', 'envoy_listener_address', 'hbone').counter('downstream_cx_total').value, 1);
      listener.drain();
      await until(() => server.sessionCount === 0);
    } finally {
      listener.close();
    }
  });
});
