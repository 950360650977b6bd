import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { MAX_CLIENT_HELLO, parseClientHello, type ClientHelloResult } from '../src/listener/client-hello.ts';

// ---- real ClientHellos: what tls.connect sends to a plain TCP server ----

async function captureHello(opts: tls.ConnectionOptions): Promise<Buffer> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const got = new Promise<Buffer>((resolve) => {
    server.once('connection', (sock) => {
      let buf = Buffer.alloc(0);
      sock.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        // Node sends the hello as one record: stop once that record is complete.
        if (buf.length >= 5 && buf.length >= 5 + buf.readUInt16BE(3)) {
          resolve(buf);
          sock.destroy();
        }
      });
    });
  });
  const client = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...opts });
  client.on('error', () => {});
  try {
    return await got;
  } finally {
    client.destroy();
    server.close();
  }
}

/** The handshake bytes inside a run of records (the inverse of `frame`). */
function unframe(records: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let p = 0; p < records.length;) {
    const len = records.readUInt16BE(p + 3);
    parts.push(records.subarray(p + 5, p + 5 + len));
    p += 5 + len;
  }
  return Buffer.concat(parts);
}

/** Handshake bytes as handshake records of at most `size` payload bytes each. */
function frame(hs: Buffer, size: number | number[], version = 0x0301): Buffer {
  const sizes = typeof size === 'number' ? [size] : size;
  const out: Buffer[] = [];
  for (let p = 0, i = 0; p < hs.length; i++) {
    const n = Math.min(sizes[i % sizes.length], hs.length - p);
    const h = Buffer.alloc(5);
    h[0] = 22;
    h.writeUInt16BE(version, 1);
    h.writeUInt16BE(n, 3);
    out.push(h, hs.subarray(p, p + n));
    p += n;
  }
  return Buffer.concat(out);
}

// ---- synthetic ClientHellos, for the cases a real client never sends ----

const u8 = (n: number) => Buffer.from([n]);
const u16 = (n: number) => Buffer.from([n >> 8, n & 255]);
const u24 = (n: number) => Buffer.from([n >> 16, (n >> 8) & 255, n & 255]);
const vec16 = (b: Buffer) => Buffer.concat([u16(b.length), b]);
const ext = (type: number, data: Buffer) => Buffer.concat([u16(type), vec16(data)]);
const sniExt = (name: string, type = 0) => ext(0, vec16(Buffer.concat([u8(type), vec16(Buffer.from(name, 'latin1'))])));
const alpnExt = (protos: string[]) =>
  ext(16, vec16(Buffer.concat(protos.map((p) => Buffer.concat([u8(p.length), Buffer.from(p)])))));

function helloMessage(exts: Buffer[] | undefined, opts: { version?: number; sid?: number; suites?: number; compression?: number; type?: number } = {}): Buffer {
  const body = Buffer.concat([
    u16(opts.version ?? 0x0303),
    Buffer.alloc(32, 7),
    u8(opts.sid ?? 32), Buffer.alloc(opts.sid ?? 32, 1),
    u16(opts.suites ?? 4), Buffer.alloc(opts.suites ?? 4, 0x13),
    u8(opts.compression ?? 1), Buffer.alloc(opts.compression ?? 1, 0),
    exts ? vec16(Buffer.concat(exts)) : Buffer.alloc(0),
  ]);
  return Buffer.concat([u8(opts.type ?? 1), u24(body.length), body]);
}

const tlsResult = (serverName: string, alpn: string[]): ClientHelloResult => ({ state: 'tls', serverName, alpn });
const NOT_TLS = { state: 'not-tls', tooLarge: false };
const TOO_LARGE = { state: 'not-tls', tooLarge: true };
const NEED_MORE = { state: 'need-more' };

/** Every strict prefix asks for more; the whole input gives `want`. */
function assertIncremental(buf: Buffer, want: ClientHelloResult): void {
  for (let n = 0; n < buf.length; n++) {
    assert.deepEqual(parseClientHello(buf.subarray(0, n)), NEED_MORE, `prefix of ${n}/${buf.length} bytes`);
  }
  assert.deepEqual(parseClientHello(buf), want);
}

describe('parseClientHello with real ClientHellos from tls.connect', () => {
  let h2: Buffer, plain: Buffer, istio: Buffer, tls12: Buffer, upper: Buffer;
  before(async () => {
    h2 = await captureHello({ servername: 'api.example.com', ALPNProtocols: ['h2', 'http/1.1'] });
    plain = await captureHello({}); // an IP host: no SNI, no ALPN
    istio = await captureHello({ servername: 'outbound_.9080_._.reviews.default.svc.cluster.local', ALPNProtocols: ['istio-peer-exchange', 'istio'] });
    tls12 = await captureHello({ servername: 'legacy.example.com', maxVersion: 'TLSv1.2', ALPNProtocols: ['http/1.1'] });
    upper = await captureHello({ servername: 'WWW.Example.COM' });
  });

  test('SNI and ALPN', () => {
    assert.deepEqual(parseClientHello(h2), tlsResult('api.example.com', ['h2', 'http/1.1']));
    assert.deepEqual(parseClientHello(istio), tlsResult('outbound_.9080_._.reviews.default.svc.cluster.local', ['istio-peer-exchange', 'istio']));
    assert.deepEqual(parseClientHello(tls12), tlsResult('legacy.example.com', ['http/1.1']));
  });

  test('no SNI and no ALPN', () => {
    assert.deepEqual(parseClientHello(plain), tlsResult('', []));
  });

  test('SNI is folded to lower case, as Envoy does', () => {
    assert.deepEqual(parseClientHello(upper), tlsResult('www.example.com', []));
  });

  test('every truncation asks for more bytes', () => {
    assertIncremental(h2, tlsResult('api.example.com', ['h2', 'http/1.1']));
    assertIncremental(plain, tlsResult('', []));
  });

  test('fragmented over many records, including 1-byte records', () => {
    const hs = unframe(h2);
    for (const size of [1, 2, 3, 5, 7, 16, 100, [1, 40, 3], [300, 1]]) {
      const records = frame(hs, size);
      assert.deepEqual(parseClientHello(records), tlsResult('api.example.com', ['h2', 'http/1.1']), `records of ${size}`);
    }
    assertIncremental(frame(hs, [3, 17, 1]), tlsResult('api.example.com', ['h2', 'http/1.1']));
  });

  test('bytes after the hello do not matter', () => {
    const more = Buffer.concat([h2, Buffer.from([20, 3, 3, 0, 1, 1]), Buffer.alloc(100, 9)]);
    assert.deepEqual(parseClientHello(more), tlsResult('api.example.com', ['h2', 'http/1.1']));
  });
});

describe('parseClientHello with synthetic input', () => {
  test('empty input and the first header bytes ask for more', () => {
    assert.deepEqual(parseClientHello(Buffer.alloc(0)), NEED_MORE);
    assert.deepEqual(parseClientHello(Buffer.from([22])), NEED_MORE);
    assert.deepEqual(parseClientHello(Buffer.from([22, 3])), NEED_MORE);
    assert.deepEqual(parseClientHello(Buffer.from([22, 3, 1, 0])), NEED_MORE);
  });

  test('plain text is not TLS from its first byte', () => {
    for (const text of ['G', 'GET / HTTP/1.1\r\nHost: a\r\n\r\n', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'SSH-2.0-OpenSSH_9.6\r\n', '\r\n']) {
      assert.deepEqual(parseClientHello(Buffer.from(text)), NOT_TLS, JSON.stringify(text));
    }
  });

  test('garbage is not TLS', () => {
    let seed = 7;
    for (let i = 0; i < 200; i++) {
      const b = Buffer.alloc(1 + (i % 64));
      for (let j = 0; j < b.length; j++) b[j] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
      if (b[0] === 22) b[0] = 23;
      assert.deepEqual(parseClientHello(b), NOT_TLS);
    }
  });

  test('results other than tls are shared constants (no allocation)', () => {
    assert.equal(parseClientHello(Buffer.from('GET')), parseClientHello(Buffer.from('POST')));
    assert.equal(parseClientHello(Buffer.alloc(0)), parseClientHello(Buffer.from([22])));
  });

  test('a minimal hello without extensions', () => {
    assertIncremental(frame(helloMessage(undefined), 1000), tlsResult('', []));
    assert.deepEqual(parseClientHello(frame(helloMessage([]), 1000)), tlsResult('', []));
  });

  test('SNI and ALPN in any order, other extensions skipped', () => {
    const msg = helloMessage([ext(10, Buffer.alloc(8, 1)), alpnExt(['h2']), ext(0xfafa, Buffer.alloc(0)), sniExt('a.b')]);
    assertIncremental(frame(msg, 1000), tlsResult('a.b', ['h2']));
  });

  test('SNI split across records', () => {
    const name = 'a-rather-long-service-name.namespace.svc.cluster.local';
    const msg = helloMessage([sniExt(name)]);
    const at = msg.indexOf(Buffer.from(name)) + 10;
    assert.deepEqual(parseClientHello(frame(msg, [at, 5, 1000])), tlsResult(name, []));
  });

  test('record framing errors are not TLS', () => {
    const msg = helloMessage([sniExt('a.b')]);
    const good = frame(msg, 1000);
    const wrongVersion = Buffer.from(good); wrongVersion[1] = 2;
    assert.deepEqual(parseClientHello(wrongVersion), NOT_TLS);
    const tooLong = Buffer.from(good); tooLong.writeUInt16BE(16385, 3);
    assert.deepEqual(parseClientHello(tooLong), NOT_TLS);
    // An alert record between two fragments of the hello.
    const split = frame(msg, 20);
    const withAlert = Buffer.concat([split.subarray(0, 25), Buffer.from([21, 3, 3, 0, 2, 2, 40]), split.subarray(25)]);
    assert.deepEqual(parseClientHello(withAlert), NOT_TLS);
    // Application data record first.
    assert.deepEqual(parseClientHello(Buffer.concat([Buffer.from([23, 3, 3, 0, 1, 0]), good])), NOT_TLS);
    // Not yet complete but the second record already looks wrong.
    assert.deepEqual(parseClientHello(Buffer.concat([split.subarray(0, 25), Buffer.from([21])])), NOT_TLS);
  });

  test('hello framing errors are not TLS', () => {
    const bad: [string, Buffer][] = [
      ['server hello type', helloMessage([], { type: 2 })],
      ['SSL 2 version', helloMessage([], { version: 0x0200 })],
      ['session id over 32', helloMessage([], { sid: 33 })],
      ['odd cipher suites', helloMessage([], { suites: 3 })],
      ['no cipher suites', helloMessage([], { suites: 0 })],
      ['no compression methods', helloMessage([], { compression: 0 })],
      ['two SNI extensions', helloMessage([sniExt('a.b'), sniExt('c.d')])],
      ['SNI name type 1', helloMessage([sniExt('a.b', 1)])],
      ['empty SNI name', helloMessage([sniExt('')])],
      ['SNI with NUL', helloMessage([sniExt('a\0b')])],
      ['SNI over 255 bytes', helloMessage([sniExt('a'.repeat(256))])],
      ['two SNI entries', helloMessage([ext(0, vec16(Buffer.concat([u8(0), vec16(Buffer.from('a.b')), u8(0), vec16(Buffer.from('c.d'))])))])],
      ['SNI list length wrong', helloMessage([ext(0, Buffer.concat([u16(99), u8(0), vec16(Buffer.from('a.b'))]))])],
      ['two ALPN extensions', helloMessage([alpnExt(['h2']), alpnExt(['h2'])])],
    ];
    for (const [what, msg] of bad) assert.deepEqual(parseClientHello(frame(msg, 1000)), NOT_TLS, what);
    // Extension block length disagreeing with the hello length.
    const msg = helloMessage([sniExt('a.b')]);
    const body = Buffer.concat([msg.subarray(4), Buffer.alloc(3)]);
    const longer = Buffer.concat([u8(1), u24(body.length), body]);
    assert.deepEqual(parseClientHello(frame(longer, 1000)), NOT_TLS);
    // An extension running past the extension block.
    const over = helloMessage([Buffer.concat([u16(5), u16(50), Buffer.alloc(4)])]);
    assert.deepEqual(parseClientHello(frame(over, 1000)), NOT_TLS);
  });

  test('a hello whose fields run short is not TLS, without waiting for bytes past its end', () => {
    const short: [string, Buffer][] = [
      ['3 bytes of extensions', helloMessage([Buffer.from([0, 0, 0])])],
      ['1-byte SNI extension', helloMessage([ext(0, Buffer.alloc(1))])],
      ['1 byte after compression methods', Buffer.concat([u8(1), u24(76), helloMessage(undefined).subarray(4), u8(0)])],
      ['10-byte body', Buffer.concat([u8(1), u24(10), Buffer.from([3, 3]), Buffer.alloc(8)])],
    ];
    for (const [what, msg] of short) assert.deepEqual(parseClientHello(frame(msg, 1000)), NOT_TLS, what);
  });

  test('a malformed ALPN extension is ignored, as BoringSSL defers it to the handshake', () => {
    const cases = [
      ext(16, Buffer.alloc(0)),
      ext(16, vec16(Buffer.alloc(0))),
      ext(16, vec16(Buffer.concat([u8(0), u8(2), Buffer.from('h2')]))),
      ext(16, vec16(Buffer.concat([u8(9), Buffer.from('h2')]))),
      ext(16, Buffer.concat([u16(9), u8(2), Buffer.from('h2')])),
    ];
    for (const alpn of cases) {
      assert.deepEqual(parseClientHello(frame(helloMessage([alpn, sniExt('a.b')]), 1000)), tlsResult('a.b', []));
    }
  });

  test('a hello that cannot fit in 64 KiB is given up on', () => {
    // Declared length alone is too big: decided on the first 9 bytes.
    const huge = Buffer.concat([Buffer.from([22, 3, 1, 0, 4, 1]), u24(MAX_CLIENT_HELLO)]);
    assert.deepEqual(parseClientHello(huge), TOO_LARGE);
    // A 40 KB hello is fine in 16 KiB records ...
    const big = helloMessage([ext(21, Buffer.alloc(40000)), sniExt('big.example')]);
    assert.deepEqual(parseClientHello(frame(big, 16384)), tlsResult('big.example', []));
    // ... but in 4-byte records it takes 90 KB: after 64 KiB, give up.
    const slow = frame(big, 4);
    assert.ok(slow.length > MAX_CLIENT_HELLO);
    assert.deepEqual(parseClientHello(slow.subarray(0, MAX_CLIENT_HELLO - 1)), NEED_MORE);
    assert.deepEqual(parseClientHello(slow.subarray(0, MAX_CLIENT_HELLO)), TOO_LARGE);
    assert.deepEqual(parseClientHello(slow), TOO_LARGE);
  });

  test('zero-length handshake records are skipped', () => {
    const msg = helloMessage([sniExt('a.b')]);
    const empty = Buffer.from([22, 3, 1, 0, 0]);
    const records = frame(msg, 30);
    assert.deepEqual(parseClientHello(Buffer.concat([empty, records.subarray(0, 35), empty, records.subarray(35)])), tlsResult('a.b', []));
  });
});
