// The splice(2) relay engine of the native addon, on real loopback sockets. Topology of every case:
//   client ──► proxy listener ═ splicePair(down, up) ═ upstream connection ──► server
// Also measures a 100 MB one-way transfer through a JS relay (pipe) and through splice, with the
// endpoints in a child process so the relay is the only thing running in this one.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { Worker } from 'node:worker_threads';
import { splicePair, spliceAvailable, type SplicedPair } from '../src/sys/splice.ts';

const MB = 1 << 20;

interface Result {
  aToB: number;
  bToA: number;
  err: string | null;
}

interface Relay {
  down: net.Socket; // accepted from the client (a)
  up: net.Socket; // connected to the server (b)
  pair: SplicedPair;
  done: Promise<Result>;
}

/**
 * Every listener and socket the tests open, closed after the file's tests: a test that failed before its
 * own clean-up must not keep the process (and with it the whole test run) alive.
 */
const LISTENERS = new Set<net.Server>();
const SOCKETS = new Set<net.Socket>();
after(() => {
  for (const l of LISTENERS) if (l.listening) l.close();
  for (const s of SOCKETS) s.destroy();
});

function track<T extends net.Socket>(s: T): T {
  SOCKETS.add(s);
  return s;
}

function listening<T extends net.Server>(server: T): T {
  LISTENERS.add(server);
  server.on('connection', (s: net.Socket) => SOCKETS.add(s));
  return server;
}

/** A listener whose connections are handed out in order. */
class Acceptor {
  readonly server: net.Server;
  private readonly queue: net.Socket[] = [];
  private readonly waiting: Array<(s: net.Socket) => void> = [];

  constructor(options: net.ServerOpts = {}) {
    this.server = net.createServer(options, (s) => {
      const w = this.waiting.shift();
      if (w) w(s);
      else this.queue.push(s);
    });
    listening(this.server);
  }

  async listen(): Promise<number> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return (this.server.address() as net.AddressInfo).port;
  }

  accept(): Promise<net.Socket> {
    const s = this.queue.shift();
    return s ? Promise.resolve(s) : new Promise((resolve) => this.waiting.push(resolve));
  }

  close(): void {
    this.server.close();
  }
}

interface ProxyOptions {
  pauseOnConnect?: boolean;
  beforeSplice?: (down: net.Socket, up: net.Socket) => Promise<void>;
}

/**
 * A splicing proxy in front of `upstreamPort`. `beforeSplice` runs once the upstream connection is
 * up (e.g. to let bytes pile up in Node's buffers first). When splicing ends both sockets are
 * destroyed, as a caller must do.
 */
class SpliceProxy {
  private readonly acceptor: Acceptor;
  private readonly relays: Relay[] = [];
  private readonly waiting: Array<(r: Relay) => void> = [];
  private readonly upstreamPort: number;
  private readonly options: ProxyOptions;
  port = 0;

  constructor(upstreamPort: number, options: ProxyOptions = {}) {
    this.upstreamPort = upstreamPort;
    this.options = options;
    this.acceptor = new Acceptor({ pauseOnConnect: options.pauseOnConnect ?? true });
    this.acceptor.server.on('connection', (down) => void this.relay(down));
  }

  async listen(): Promise<number> {
    this.port = await this.acceptor.listen();
    return this.port;
  }

  private async relay(down: net.Socket): Promise<void> {
    down.on('error', () => {});
    const up = track(net.connect(this.upstreamPort, '127.0.0.1'));
    up.on('error', () => {});
    await once(up, 'connect');
    await this.options.beforeSplice?.(down, up);
    let resolve!: (r: Result) => void;
    const done = new Promise<Result>((r) => (resolve = r));
    const pair = splicePair(down, up, (aToB, bToA, err) => {
      down.destroy();
      up.destroy();
      resolve({ aToB, bToA, err });
    });
    assert.ok(pair, 'splicePair refused plain TCP sockets');
    const r: Relay = { down, up, pair, done };
    const w = this.waiting.shift();
    if (w) w(r);
    else this.relays.push(r);
  }

  next(): Promise<Relay> {
    const r = this.relays.shift();
    return r ? Promise.resolve(r) : new Promise((resolve) => this.waiting.push(resolve));
  }

  close(): void {
    this.acceptor.close();
  }
}

/** Writes `total` random bytes (honouring backpressure), optionally ends, and returns their SHA-256. */
async function sendRandom(sock: net.Socket, total: number, end = true): Promise<string> {
  const h = createHash('sha256');
  for (let left = total; left > 0; ) {
    const buf = randomBytes(Math.min(MB, left));
    h.update(buf);
    left -= buf.length;
    if (!sock.write(buf)) await once(sock, 'drain');
  }
  if (end) sock.end();
  return h.digest('hex');
}

/** Reads until EOF: byte count and SHA-256. */
function receiveAll(sock: net.Socket): Promise<{ bytes: number; hash: string }> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    let bytes = 0;
    sock.on('data', (d: Buffer) => {
      h.update(d);
      bytes += d.length;
    });
    sock.once('end', () => resolve({ bytes, hash: h.digest('hex') }));
    sock.once('error', reject);
  });
}

function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

/** Resolves on 'close' (unlike once(), an 'error' first, e.g. ECONNRESET, does not reject). */
function closed(sock: net.Socket): Promise<void> {
  return new Promise((resolve) => (sock.destroyed && sock.closed ? resolve() : sock.once('close', () => resolve())));
}

/** Open socket fds of this process (Node's and the engine's dups). */
function socketFds(): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) n++;
    } catch {} // the directory's own fd is gone by now
  }
  return n;
}

/** Polls until socketFds() <= limit (the engine lets go asynchronously); returns the last count. */
async function socketFdsDownTo(limit: number): Promise<number> {
  let n = socketFds();
  for (let i = 0; i < 100 && n > limit; i++) {
    await sleep(10);
    n = socketFds();
  }
  return n;
}

const skip = spliceAvailable ? false : 'splice addon not built (scripts/build-native.sh)';

describe('splicePair on loopback', { skip, timeout: 120_000 }, () => {
  test('100 MB each way at once, SHA-256 equal at both ends', async () => {
    const server = new Acceptor({ allowHalfOpen: true });
    const proxy = new SpliceProxy(await server.listen());
    const client = track(net.connect({ port: await proxy.listen(), host: '127.0.0.1', allowHalfOpen: true }));
    const conn = await server.accept();
    const relay = await proxy.next();

    const size = 100 * MB;
    const [up, down, sentUp, sentDown] = await Promise.all([
      receiveAll(conn),
      receiveAll(client),
      sendRandom(client, size),
      sendRandom(conn, size),
    ]);
    assert.equal(up.bytes, size);
    assert.equal(down.bytes, size);
    assert.equal(up.hash, sentUp);
    assert.equal(down.hash, sentDown);
    assert.deepEqual(await relay.done, { aToB: size, bToA: size, err: null });
    assert.deepEqual(relay.pair.bytes(), [size, size]);
    client.destroy();
    conn.destroy();
    proxy.close();
    server.close();
  });

  test('half-close: the client ends first, the server still sends 10 MB, then closes', async () => {
    const server = new Acceptor({ allowHalfOpen: true });
    const proxy = new SpliceProxy(await server.listen());
    const client = track(net.connect({ port: await proxy.listen(), host: '127.0.0.1', allowHalfOpen: true }));
    const conn = await server.accept();
    const relay = await proxy.next();

    const request = randomBytes(300_000);
    const atServer = receiveAll(conn);
    const atClient = receiveAll(client);
    client.end(request);
    const got = await atServer; // EOF reached the server: the relay forwarded the half-close
    assert.equal(got.hash, sha256(request));
    assert.equal(client.writableEnded, true);
    const sent = await sendRandom(conn, 10 * MB); // then end()
    const back = await atClient;
    assert.equal(back.bytes, 10 * MB);
    assert.equal(back.hash, sent);
    assert.deepEqual(await relay.done, { aToB: request.length, bToA: 10 * MB, err: null });
    client.destroy();
    conn.destroy();
    proxy.close();
    server.close();
  });

  test('a peer reset ends the pair with an errno name, and the other side is closed after destroy', async () => {
    const server = new Acceptor();
    const proxy = new SpliceProxy(await server.listen());
    const client = track(net.connect(await proxy.listen(), '127.0.0.1'));
    client.on('error', () => {});
    const conn = await server.accept();
    const relay = await proxy.next();

    const clientClosed = closed(client);
    void sendRandom(client, 1000 * MB).catch(() => {}); // keeps sending until the reset
    let seen = 0;
    conn.on('data', (d: Buffer) => {
      seen += d.length;
      if (seen >= 5 * MB && !conn.destroyed) conn.resetAndDestroy();
    });
    const r = await relay.done;
    assert.ok(r.err === 'ECONNRESET' || r.err === 'EPIPE', `err = ${r.err}`);
    assert.ok(r.aToB >= 5 * MB, `aToB = ${r.aToB}`);
    await clientClosed; // the engine let go of its dups, so destroying `down` closed the connection
    proxy.close();
    server.close();
  });

  test('a reset on an idle pair is reported too', async () => {
    const server = new Acceptor();
    const proxy = new SpliceProxy(await server.listen());
    const client = track(net.connect(await proxy.listen(), '127.0.0.1'));
    client.on('error', () => {});
    const conn = await server.accept();
    const relay = await proxy.next();
    await sleep(20);
    client.resetAndDestroy();
    const r = await relay.done;
    assert.equal(r.err, 'ECONNRESET');
    assert.deepEqual([r.aToB, r.bToA], [0, 0]);
    await closed(conn);
    proxy.close();
    server.close();
  });

  test('stop() while transferring reports ECANCELED once, with the bytes moved so far', async () => {
    const server = new Acceptor();
    const proxy = new SpliceProxy(await server.listen());
    const client = track(net.connect(await proxy.listen(), '127.0.0.1'));
    client.on('error', () => {});
    const conn = await server.accept();
    conn.on('error', () => {});
    const relay = await proxy.next();

    void sendRandom(client, 1000 * MB).catch(() => {});
    let seen = 0;
    let reported = 0;
    conn.on('data', (d: Buffer) => {
      seen += d.length;
      if (seen >= 20 * MB && reported === 0) {
        reported = relay.pair.bytes()[0];
        relay.pair.stop();
        relay.pair.stop(); // idempotent
      }
    });
    const r = await relay.done;
    assert.equal(r.err, 'ECANCELED');
    // The engine adds a splice call's bytes once the call returns, and the receiver may hold them before
    // that: bytes() may trail what `conn` had seen (by at most one call), never the final count. That count
    // has the 20 MB `conn` had received when stop() ran.
    assert.ok(reported > 0 && r.aToB >= reported && r.aToB >= 20 * MB, `bytes() = ${reported}, final ${r.aToB}`);
    assert.ok(r.aToB < 1000 * MB);
    assert.deepEqual(relay.pair.bytes(), [r.aToB, r.bToA]);
    relay.pair.stop(); // after the end: a no-op
    await Promise.all([closed(client), closed(conn)]);
    proxy.close();
    server.close();
  });

  test('destroying a spliced socket from JS stops the pair', async () => {
    const server = new Acceptor();
    const port = await server.listen();
    const client = track(net.connect(port, '127.0.0.1'));
    const conn = await server.accept();
    const server2 = new Acceptor();
    const port2 = await server2.listen();
    const up = track(net.connect(port2, '127.0.0.1'));
    const far = await server2.accept();
    await once(up, 'connect');
    const done = new Promise<Result>((resolve) => {
      const p = splicePair(conn, up, (aToB, bToA, err) => resolve({ aToB, bToA, err }));
      assert.ok(p);
    });
    client.write('ping');
    const [d] = (await once(far, 'data')) as [Buffer];
    assert.equal(d.toString(), 'ping');
    conn.destroy(); // Node closes its fd; the engine still holds a dup until it stops
    const r = await done;
    assert.equal(r.err, 'ECANCELED');
    assert.equal(r.aToB, 4);
    up.destroy();
    await Promise.all([closed(client), closed(far)]);
    server.close();
    server2.close();
  });

  test('200 concurrent small pairs', async () => {
    // The server answers each request with its SHA-256 followed by 20 000 bytes derived from it.
    const server = net.createServer({ allowHalfOpen: true }, (s) => {
      const h = createHash('sha256');
      s.on('data', (d: Buffer) => h.update(d));
      s.on('end', () => {
        const digest = h.digest();
        s.end(Buffer.concat([digest, Buffer.alloc(20_000, digest[0])]));
      });
    });
    listening(server).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const proxy = new SpliceProxy((server.address() as net.AddressInfo).port);
    const port = await proxy.listen();
    const before = socketFds();

    const N = 200;
    const clients = Array.from({ length: N }, async () => {
      const c = track(net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }));
      const req = randomBytes(1 + Math.floor(Math.random() * 50_000));
      const chunks: Buffer[] = [];
      c.on('data', (d: Buffer) => chunks.push(d));
      await once(c, 'connect');
      c.end(req);
      await once(c, 'end');
      c.destroy();
      const res = Buffer.concat(chunks);
      const digest = createHash('sha256').update(req).digest();
      assert.equal(res.length, 32 + 20_000);
      assert.deepEqual(res.subarray(0, 32), digest);
      assert.ok(res.subarray(32).every((b) => b === digest[0]));
      return req.length;
    });
    const relays = await Promise.all(Array.from({ length: N }, () => proxy.next()));
    const sizes = await Promise.all(clients);
    const results = await Promise.all(relays.map((r) => r.done));
    for (const r of results) {
      assert.equal(r.err, null);
      assert.equal(r.bToA, 32 + 20_000);
    }
    assert.deepEqual(results.map((r) => r.aToB).sort(), sizes.sort());
    // All sockets destroyed and every dup closed.
    assert.equal(await socketFdsDownTo(before), before);
    proxy.close();
    server.close();
  });

  test('bytes Node already buffered, and a pending upstream write, go first and in order', async () => {
    const server = new Acceptor({ allowHalfOpen: true });
    const preface = randomBytes(16 * MB); // written by the proxy to the upstream just before splicing
    const early = randomBytes(200_000); // sent by the client before the proxy splices
    const late = randomBytes(5 * MB);
    let buffered = 0;
    let pendingWrite = 0;
    const proxy = new SpliceProxy(await server.listen(), {
      pauseOnConnect: false, // Node starts reading at once and buffers what the client sends
      async beforeSplice(down, up) {
        down.pause();
        for (let i = 0; i < 200 && down.readableLength === 0; i++) await sleep(10);
        buffered = down.readableLength;
        up.write(preface);
        pendingWrite = up.writableLength;
      },
    });
    const client = track(net.connect({ port: await proxy.listen(), host: '127.0.0.1', allowHalfOpen: true }));
    await once(client, 'connect');
    client.write(early);
    const conn = await server.accept();
    const atServer = receiveAll(conn);
    const relay = await proxy.next();
    client.end(late);
    const got = await atServer;
    assert.ok(buffered > 0, 'nothing was buffered by Node');
    assert.equal(got.bytes, preface.length + early.length + late.length);
    assert.equal(got.hash, sha256(Buffer.concat([preface, early, late])));
    conn.end();
    const r = await relay.done;
    assert.equal(r.err, null);
    assert.equal(r.aToB, early.length + late.length); // the bytes Node had buffered are counted
    assert.equal(r.bToA, 0);
    console.log(`# buffered case: ${buffered} bytes read by Node, ${pendingWrite} bytes pending upstream`);
    client.destroy();
    proxy.close();
    server.close();
  });

  test('a worker terminated mid-transfer: its pairs end without a report, their fds are released', async () => {
    const spliceUrl = new URL('../src/sys/splice.ts', import.meta.url).href;
    const code = `
      import net from 'node:net';
      import { once } from 'node:events';
      import { parentPort } from 'node:worker_threads';
      import { splicePair } from ${JSON.stringify(spliceUrl)};
      const sink = net.createServer((s) => {
        let n = 0;
        s.on('data', (d) => { n += d.length; if (n >= 20e6 && n - d.length < 20e6) parentPort.postMessage('flowing'); });
      });
      sink.listen(0, '127.0.0.1');
      await once(sink, 'listening');
      const proxy = net.createServer({ pauseOnConnect: true }, (down) => {
        const up = net.connect(sink.address().port, '127.0.0.1', () => {
          splicePair(down, up, (a, b, err) => parentPort.postMessage('reported ' + err));
        });
      });
      proxy.listen(0, '127.0.0.1');
      await once(proxy, 'listening');
      const c = net.connect(proxy.address().port, '127.0.0.1');
      c.on('error', () => {});
      const buf = Buffer.alloc(1 << 20);
      for (;;) if (!c.write(buf)) await once(c, 'drain');
    `;
    const before = socketFds();
    for (let i = 0; i < 3; i++) {
      const worker = new Worker(code, { eval: true });
      const messages: unknown[] = [];
      const flowing = new Promise((resolve) => worker.on('message', (m) => (m === 'flowing' ? resolve(m) : messages.push(m))));
      await flowing;
      await worker.terminate();
      assert.equal(await socketFdsDownTo(before), before);
      assert.deepEqual(messages, []);
    }
  });

  test('returns null (sockets untouched) for TLS, unconnected and listened-to sockets', async () => {
    const server = new Acceptor();
    const port = await server.listen();
    const a = track(net.connect(port, '127.0.0.1'));
    const b = track(net.connect(port, '127.0.0.1'));
    await Promise.all([once(a, 'connect'), once(b, 'connect')]);
    const peers = [await server.accept(), await server.accept()];
    const bPeer = peers.find((p) => p.remotePort === b.localPort)!;
    const noop = (): void => assert.fail('onDone must not run');

    assert.equal(splicePair(a, a, noop), null);
    assert.equal(splicePair(new net.Socket(), b, noop), null);
    const wrapped = new tls.TLSSocket(new net.Socket());
    assert.equal(splicePair(wrapped, b, noop), null);
    wrapped.destroy();
    const listened = (): void => {};
    a.on('data', listened);
    assert.equal(splicePair(a, b, noop), null);
    a.off('data', listened);

    // A connected TLS client (self-signed certificate from openssl).
    let haveOpenssl = true;
    const dir = mkdtempSync(path.join(tmpdir(), 'skua-splice-'));
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=localhost'],
        { stdio: 'ignore' });
    } catch {
      haveOpenssl = false;
    }
    if (haveOpenssl) {
      const key = readFileSync(path.join(dir, 'k.pem'));
      const cert = readFileSync(path.join(dir, 'c.pem'));
      const tlsServer = tls.createServer({ key, cert }, (s) => s.end());
      listening(tlsServer).listen(0, '127.0.0.1');
      await once(tlsServer, 'listening');
      const t = track(tls.connect({ port: (tlsServer.address() as net.AddressInfo).port, host: '127.0.0.1', rejectUnauthorized: false }));
      await once(t, 'secureConnect');
      assert.equal(splicePair(t, b, noop), null);
      assert.equal(splicePair(b, t, noop), null);
      t.destroy();
      tlsServer.close();
    }
    rmSync(dir, { recursive: true, force: true });

    // b was left alone: it still reads normally.
    bPeer.write('still mine');
    const [d] = (await once(b, 'data')) as [Buffer];
    assert.equal(d.toString(), 'still mine');
    for (const s of [a, b, ...peers]) s.destroy();
    server.close();
  });
});

// ---- measurement: JS relay vs splice, 100 MB one way ----

// Endpoints in a child process: a sink server and, per line read on stdin ("<port>"), a client that
// sends TOTAL bytes to that port and ends; the sink prints {"bytes", "ms"} when the stream ends.
const ENDPOINTS = `
import net from 'node:net';
import { once } from 'node:events';
const total = Number(process.argv[1]);
const buf = Buffer.alloc(1 << 20, 7);
let t0 = 0;
const sink = net.createServer((s) => {
  let n = 0;
  s.on('data', (d) => { n += d.length; });
  s.on('end', () => { process.stdout.write(JSON.stringify({ bytes: n, ms: performance.now() - t0 }) + '\\n'); s.end(); });
});
sink.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: sink.address().port }) + '\\n'));
process.stdin.setEncoding('utf8');
process.stdin.on('data', (line) => {
  const c = net.connect(Number(line.trim()), '127.0.0.1', async () => {
    t0 = performance.now();
    for (let left = total; left > 0; left -= buf.length) {
      if (!c.write(left >= buf.length ? buf : buf.subarray(0, left))) await once(c, 'drain');
    }
    c.end();
  });
  c.resume();
  c.on('error', () => {});
});
`;

describe('relay throughput, 100 MB one way (informational)', { skip, timeout: 120_000 }, () => {
  test('JS pipe vs splice', async () => {
    const total = 100 * MB;
    const child = spawn(process.execPath, ['--input-type=module', '-e', ENDPOINTS, String(total)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const nextLine = async (): Promise<Record<string, number>> => JSON.parse((await lines.next()).value as string);
    const sinkPort = (await nextLine()).port;

    const run = async (mode: 'pipe' | 'splice'): Promise<{ gbps: number; cpuMs: number }> => {
      const server = net.createServer({ pauseOnConnect: true }, (down) => {
        const up = track(net.connect(sinkPort, '127.0.0.1', () => {
          if (mode === 'pipe') {
            down.pipe(up);
            up.pipe(down);
            down.resume();
          } else {
            const p = splicePair(down, up, () => {
              down.destroy();
              up.destroy();
            });
            assert.ok(p);
          }
        }));
      });
      listening(server).listen(0, '127.0.0.1');
      await once(server, 'listening');
      const cpu0 = process.cpuUsage();
      child.stdin!.write(`${(server.address() as net.AddressInfo).port}\n`);
      const { bytes, ms } = await nextLine();
      const cpu = process.cpuUsage(cpu0);
      server.close();
      assert.equal(bytes, total);
      return { gbps: (total * 8) / (ms / 1000) / 1e9, cpuMs: (cpu.user + cpu.system) / 1000 };
    };

    const results: Record<string, { gbps: number; cpuMs: number }> = {};
    for (const mode of ['pipe', 'splice', 'pipe', 'splice'] as const) {
      const r = await run(mode);
      const best = results[mode];
      if (best === undefined || r.gbps > best.gbps) results[mode] = r;
    }
    child.kill();
    for (const [mode, r] of Object.entries(results)) {
      console.log(`# relay ${mode.padEnd(6)} ${r.gbps.toFixed(2)} Gb/s, relay process CPU ${r.cpuMs.toFixed(0)} ms per 100 MB`);
    }
    console.log(`# splice / pipe: ${(results['splice']!.gbps / results['pipe']!.gbps).toFixed(2)}x`);
  });
});
