// CONNECT and TCP: HTTP/1.1 CONNECT terminated by the proxy (raw client and curl --proxytunnel),
// plain tcp_proxy, and tcp_proxy tunneling_config (HTTP/2 CONNECT) into a second proxy that
// terminates HTTP/2 CONNECT (allow_connect), as in Envoy's encapsulate/terminate example configs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { connect as h2connect } from 'node:http2';
import type { Socket } from 'node:net';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, startTcpEcho, type Backend, type EchoReply } from './lib/backends.ts';
import { openSocket, parseAccessLog, rawExchange, readUntil, run } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, tcpProxy, vhost } from './lib/config.ts';

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** Writes `data`, half-closes, and returns everything echoed back until the far side ends. */
async function echoRoundTrip(s: Socket, data: Buffer, timeoutMs = 20_000): Promise<Buffer> {
  const got = readUntil(s, undefined, timeoutMs);
  s.end(data);
  return got;
}

function connectRoute(clusterName: string): Json {
  return { match: { connect_matcher: {} }, route: { cluster: clusterName, upgrade_configs: [{ upgrade_type: 'CONNECT', connect_config: {} }] } };
}

describe('HTTP/1.1 CONNECT terminated by the proxy', { timeout: 60_000 }, () => {
  let echo: Backend, http: Backend, proxy: RunningProxy;

  before(async () => {
    echo = await startTcpEcho();
    http = await startHttpBackend();
    proxy = await startProxy((p) => bootstrap([
      listener(p('connect'), [chain(hcm([
        vhost([connectRoute('echo')], ['tcp.test:7'], 'tcp'),
        vhost([connectRoute('http')], ['http.test:80'], 'http'),
      ], { statPrefix: 'connect', accessLog: true, extra: { upgrade_configs: [{ upgrade_type: 'CONNECT' }] } }))]),
      // CONNECT matched, but enabled neither on the route nor on the HCM.
      listener(p('noconnect'), [chain(hcm([vhost([{ match: { connect_matcher: {} }, route: { cluster: 'echo' } }])], { statPrefix: 'noconnect' }))]),
    ], [cluster('echo', [echo.port]), cluster('http', [http.port])]), { ports: ['connect', 'noconnect'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => echo?.close(), () => http?.close()));

  test('raw CONNECT: 200, then bytes both ways through the tunnel', async () => {
    const s = await openSocket(proxy.ports.connect);
    try {
      const head = readUntil(s, (b) => b.includes('\r\n\r\n'), 5000);
      s.write('CONNECT tcp.test:7 HTTP/1.1\r\nHost: tcp.test:7\r\n\r\n');
      const h = await head;
      assert.match(h.toString('latin1'), /^HTTP\/1\.1 200 /);
      const extra = h.subarray(h.indexOf('\r\n\r\n') + 4);
      const payload = randomBytes(2 * 1024 * 1024);
      const back = Buffer.concat([extra, await echoRoundTrip(s, payload)]);
      assert.equal(back.length, payload.length);
      assert.equal(sha(back), sha(payload));
    } finally {
      s.destroy();
    }
    const line = parseAccessLog(await proxy.waitForStdout(/"CONNECT /));
    assert.ok(line);
    assert.equal(line.method, 'CONNECT');
    assert.equal(line.authority, 'tcp.test:7');
    assert.equal(line.upstreamHost, `127.0.0.1:${echo.port}`);
  });

  test('curl --proxytunnel speaks HTTP to a backend through the CONNECT tunnel', async () => {
    const r = await run('curl', ['-sS', '-m', '10', '--proxytunnel', '-x', `http://127.0.0.1:${proxy.ports.connect}`, 'http://http.test:80/via-connect'], 15_000);
    assert.equal(r.code, 0, r.stderr);
    const e = JSON.parse(r.stdout) as EchoReply;
    assert.equal(e.url, '/via-connect');
    assert.equal(e.headers.host, 'http.test');
    assert.equal(e.headers['x-request-id'], undefined, 'bytes inside the tunnel are not touched by the proxy');
  });

  test('CONNECT to an authority with no route → 404; CONNECT not enabled on route or HCM → 403', async () => {
    const nr = await rawExchange(proxy.ports.connect, 'CONNECT other.test:9 HTTP/1.1\r\nHost: other.test:9\r\n\r\n', (b) => b.includes('\r\n\r\n'));
    assert.match(nr.toString('latin1'), /^HTTP\/1\.1 404 /);
    const before = echo.connections;
    const forbidden = await rawExchange(proxy.ports.noconnect, 'CONNECT tcp.test:7 HTTP/1.1\r\nHost: tcp.test:7\r\n\r\n', (b) => b.includes('\r\n\r\n'));
    assert.match(forbidden.toString('latin1'), /^HTTP\/1\.1 403 /);
    assert.equal(echo.connections, before, 'no upstream connection for a refused CONNECT');
  });
});

describe('tcp_proxy', { timeout: 60_000 }, () => {
  let echo: Backend, proxy: RunningProxy;
  before(async () => {
    echo = await startTcpEcho();
    proxy = await startProxy((p) => bootstrap([listener(p('tcp'), [chain(tcpProxy('echo'))])], [cluster('echo', [echo.port])]), { ports: ['tcp'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => echo?.close()));

  test('8 MB echo with half-close, on 5 concurrent connections', async () => {
    const payloads = Array.from({ length: 5 }, () => randomBytes(8 * 1024 * 1024));
    const backs = await Promise.all(payloads.map(async (p) => {
      const s = await openSocket(proxy.ports.tcp);
      try { return await echoRoundTrip(s, p); } finally { s.destroy(); }
    }));
    backs.forEach((b, i) => { assert.equal(b.length, payloads[i].length); assert.equal(sha(b), sha(payloads[i])); });
    assert.ok(((await proxy.stat('tcp.tcp.downstream_cx_total')) ?? 0) >= 5);
    assert.ok(((await proxy.stat('tcp.tcp.downstream_cx_rx_bytes_total')) ?? 0) >= 5 * 8 * 1024 * 1024);
  });
});

describe('tcp_proxy tunneling_config → HTTP/2 CONNECT → terminating proxy', { timeout: 60_000 }, () => {
  let echo: Backend, terminate: RunningProxy, encapsulate: RunningProxy;

  before(async () => {
    echo = await startTcpEcho();
    // Like configs/terminate_http2_connect.yaml, with the cluster pointing at the local echo server.
    terminate = await startProxy((p) => bootstrap([
      listener(p('h2connect'), [chain(hcm([vhost([connectRoute('echo')])], {
        statPrefix: 'terminate', accessLog: true,
        extra: { http2_protocol_options: { allow_connect: true }, upgrade_configs: [{ upgrade_type: 'CONNECT' }] },
      }))]),
    ], [cluster('echo', [echo.port])]), { ports: ['h2connect'] });
    // Like configs/encapsulate_in_http2_connect.yaml.
    encapsulate = await startProxy((p) => bootstrap([
      listener(p('tcp'), [chain(tcpProxy('tunnel', { tunneling_config: { hostname: 'host.com:443' } }))]),
    ], [cluster('tunnel', [terminate.ports.h2connect], { http2: true })]), { ports: ['tcp'] });
  });
  after(() => cleanup(() => encapsulate?.stop(), () => terminate?.stop(), () => echo?.close()));

  test('node:http2 CONNECT straight to the terminating proxy carries bytes both ways', async () => {
    const session = h2connect(`http://127.0.0.1:${terminate.ports.h2connect}`);
    try {
      const payload = randomBytes(1024 * 1024);
      const { status, back } = await new Promise<{ status: number; back: Buffer }>((resolve, reject) => {
        const st = session.request({ ':method': 'CONNECT', ':authority': 'direct.test:443' });
        const chunks: Buffer[] = [];
        let status = 0;
        const timer = setTimeout(() => reject(new Error('CONNECT stream did not finish')), 10_000);
        st.on('response', (h) => { status = Number(h[':status']); st.end(payload); });
        st.on('data', (d: Buffer) => chunks.push(d));
        st.once('end', () => { clearTimeout(timer); resolve({ status, back: Buffer.concat(chunks) }); });
        st.once('error', (e) => { clearTimeout(timer); reject(e); });
      });
      assert.equal(status, 200);
      assert.equal(sha(back), sha(payload));
    } finally {
      session.close();
    }
  });

  test('a TCP client of the encapsulating proxy reaches the echo server through the tunnel', async () => {
    const payloads = [randomBytes(3 * 1024 * 1024), randomBytes(1000)];
    for (const p of payloads) {
      const s = await openSocket(encapsulate.ports.tcp);
      try {
        const back = await echoRoundTrip(s, p);
        assert.equal(back.length, p.length);
        assert.equal(sha(back), sha(p));
      } finally {
        s.destroy();
      }
    }
    const line = parseAccessLog(await terminate.waitForStdout(/host\.com:443/));
    assert.ok(line, 'the terminating proxy logs the tunnel in the default format');
    assert.equal(line.method, 'CONNECT');
    assert.equal(line.protocol, 'HTTP/2');
    assert.equal(line.status, 200);
    assert.ok(((await terminate.stat('http.terminate.downstream_rq_http2_total')) ?? 0) >= 2);
  });

  test('the encapsulating proxy sees the tunnel refused when allow_connect is off', async (t) => {
    const closed = await startProxy((p) => bootstrap([
      listener(p('h2'), [chain(hcm([vhost([connectRoute('echo')])], { statPrefix: 'closed', extra: { upgrade_configs: [{ upgrade_type: 'CONNECT' }] } }))]),
    ], [cluster('echo', [echo.port])]), { ports: ['h2'] });
    t.after(() => closed.stop());
    const enc = await startProxy((p) => bootstrap([
      listener(p('tcp'), [chain(tcpProxy('tunnel', { tunneling_config: { hostname: 'host.com:443' } }))]),
    ], [cluster('tunnel', [closed.ports.h2], { http2: true })]), { ports: ['tcp'] });
    t.after(() => enc.stop());
    const before = echo.connections;
    const s = await openSocket(enc.ports.tcp);
    try {
      const back = await echoRoundTrip(s, Buffer.from('should not pass'), 10_000).catch(() => Buffer.alloc(0));
      assert.equal(back.length, 0);
    } finally {
      s.destroy();
    }
    assert.equal(echo.connections, before);
  });
});

