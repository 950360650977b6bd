// HBONE's HTTP/2 settings checked by a real peer (python3-h2 over OpenSSL, mutual TLS 1.3): our
// server advertises 4 MiB stream windows, 100 streams and 1 MiB frames and opens the connection
// window to 16 MiB; our client pool does the same towards a python server, sends no SNI, puts the
// final destination in :authority, and echoes every byte. Identity checks hold against it too.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { HboneClientPool, HboneConnectError, type HboneKey } from '../src/hbone/client-pool.ts';
import { mtlsDialer } from '../src/hbone/mtls.ts';
import { HBONE_CONNECTION_WINDOW, HBONE_FRAME_SIZE, HBONE_STREAM_WINDOW } from '../src/hbone/settings.ts';
import { fixture, id, roundTrip, type Fixture } from './lib/hbone-fixture.ts';

const PEER = fileURLToPath(new URL('./lib/h2peer.py', import.meta.url));
const CLIENT = id('front', 'web'), SERVER = id('back', 'api');
const DEFAULT_WINDOW = 65_535;

let f: Fixture;
const children = new Set<ChildProcess>();
before(async () => { f = await fixture(); });
after(async () => {
  for (const c of children) c.kill('SIGKILL');
  await f.close();
});

/** Runs the python peer; resolves each JSON line it prints, in order. */
function python(args: string[]): { lines: AsyncIterator<string>; done: Promise<number | null> } {
  const child = spawn('/usr/bin/python3', [PEER, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  const done = new Promise<number | null>((resolve) => child.once('exit', (code) => { children.delete(child); resolve(code); }));
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return { lines, done };
}

async function nextJson(lines: AsyncIterator<string>): Promise<Record<string, unknown>> {
  const r = await lines.next();
  assert.ok(!r.done, 'the peer printed a result');
  return JSON.parse(r.value) as Record<string, unknown>;
}

describe('HBONE against python3-h2', { timeout: 60_000 }, () => {
  test('our server: 4 MiB stream window, 100 streams, 1 MiB frames, connection window raised to 16 MiB; the CONNECT echoes', async () => {
    const { port, inbound } = await f.server(SERVER);
    const files = f.files(await f.certs.get(CLIENT));
    const peer = python(['client', '127.0.0.1', String(port), files.cert, files.key, files.ca, `127.0.0.1:${f.echoPort}`, '200000']);
    const r = await nextJson(peer.lines);
    assert.equal(await peer.done, 0);
    assert.equal(r.error, undefined);
    assert.equal(r.tls, 'TLSv1.3');
    assert.equal(r.alpn, 'h2');
    const settings = r.settings as Record<string, number>;
    assert.equal(settings.INITIAL_WINDOW_SIZE, HBONE_STREAM_WINDOW);
    assert.equal(settings.MAX_CONCURRENT_STREAMS, 100);
    assert.equal(settings.MAX_FRAME_SIZE, HBONE_FRAME_SIZE);
    assert.equal((r.connection_window_updates as number[]).reduce((a, b) => a + b, 0) + DEFAULT_WINDOW, HBONE_CONNECTION_WINDOW, 'connection window 16 MiB');
    assert.equal(r.status, 200);
    assert.equal(r.echoed, 200_000, 'every byte came back');
    assert.equal(inbound.at(-1)?.peerIdentity, CLIENT);
  });

  test('our server refuses a python client presenting a certificate the server does not accept', async () => {
    const { server, port } = await f.server(SERVER, { verifyPeer: (peer) => peer === SERVER });
    const files = f.files(await f.certs.get(CLIENT));
    const peer = python(['client', '127.0.0.1', String(port), files.cert, files.key, files.ca, `127.0.0.1:${f.echoPort}`, '10']);
    const r = await nextJson(peer.lines);
    await peer.done;
    assert.equal(r.status, null, `no CONNECT answered (the peer saw ${String(r.error ?? 'the connection end')})`);
    assert.equal(r.echoed, 0);
    assert.equal(server.refused.identity, 1);
  });

  async function pythonServer(identity: string): Promise<{ port: number; lines: AsyncIterator<string>; done: Promise<number | null> }> {
    const files = f.files(await f.certs.get(identity));
    const peer = python(['server', files.cert, files.key, files.ca]);
    const { port } = (await nextJson(peer.lines)) as { port: number };
    return { port, ...peer };
  }

  test('our client: 4 MiB stream window, 1 MiB frames, connection window 16 MiB, no SNI, :authority = final destination, ≤ 100 streams', async () => {
    const srv = await pythonServer(SERVER);
    const pool = new HboneClientPool(mtlsDialer((i) => f.certs.get(i)));
    const key: HboneKey = { sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${srv.port}` };
    try {
      const tunnels = await Promise.all(Array.from({ length: 100 }, (_, i) => pool.connect(key, `10.1.2.${i}:8080`)));
      assert.equal(pool.connectionsFor(key).length, 1, '100 streams fit on one connection');
      const echoed = await Promise.all(tunnels.map((t) => roundTrip(t.stream, 1000)));
      assert.equal(echoed.reduce((a, b) => a + b, 0), 100_000, 'every byte came back');
    } finally {
      pool.close();
    }
    const r = await nextJson(srv.lines);
    await srv.done;
    assert.equal(r.sni, null, 'no SNI: HBONE dials by IP');
    assert.equal(r.alpn, 'h2');
    const settings = r.settings as Record<string, number>;
    assert.equal(settings.INITIAL_WINDOW_SIZE, HBONE_STREAM_WINDOW);
    assert.equal(settings.MAX_FRAME_SIZE, HBONE_FRAME_SIZE);
    assert.equal(settings.ENABLE_PUSH, 0);
    assert.equal((r.connection_window_updates as number[])[0] + DEFAULT_WINDOW, HBONE_CONNECTION_WINDOW, 'connection window opened to 16 MiB first');
    assert.deepEqual([...new Set(r.methods as string[])], ['CONNECT']);
    assert.equal((r.authorities as string[]).length, 100);
    assert.equal((r.authorities as string[])[7], '10.1.2.7:8080');
    assert.equal(r.max_open_streams, 100);
    assert.equal(r.echoed, 100_000);
  });

  test('our client refuses a python server presenting another identity', async () => {
    const srv = await pythonServer(id('back', 'impostor'));
    const pool = new HboneClientPool(mtlsDialer((i) => f.certs.get(i)));
    try {
      await assert.rejects(pool.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${srv.port}` }, '10.0.0.1:80'),
        (e: HboneConnectError) => e.kind === 'connect' && /impostor is not .*back\/sa\/api/.test(e.message));
    } finally {
      pool.destroy();
    }
    const r = await nextJson(srv.lines);
    await srv.done;
    assert.ok(r.handshake_failed, 'the client walked away during the handshake');
    assert.deepEqual(r.methods, [], 'no request reached it');
  });
});
