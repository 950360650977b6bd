// WebSocket through an HCM with upgrade_configs websocket (Node's WebSocket client and a raw
// RFC 6455 client), and 403 where the upgrade is not enabled.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { decodeWsFrames, encodeWsFrame, startWsEcho, wsAccept, type Backend } from './lib/backends.ts';
import { openSocket, parseResponses, rawExchange, readUntil } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

function upgradeRequest(path: string, key: string): string {
  return `GET ${path} HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
}

describe('WebSocket', { timeout: 60_000 }, () => {
  let ws: Backend;
  let proxy: RunningProxy;

  before(async () => {
    ws = await startWsEcho();
    proxy = await startProxy((p) => bootstrap([
      listener(p('ws'), [chain(hcm([vhost([
        routeTo('ws', '/nows', { upgrade_configs: [{ upgrade_type: 'websocket', enabled: false }] }),
        routeTo('ws', '/'),
      ])], { statPrefix: 'ws', extra: { upgrade_configs: [{ upgrade_type: 'websocket' }] } }))]),
      listener(p('plain'), [chain(hcm([vhost([routeTo('ws')])], { statPrefix: 'plain' }))]),
    ], [cluster('ws', [ws.port])]), { ports: ['ws', 'plain'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => ws?.close()));

  test('Node WebSocket client: text and a 200 KB binary message echo through the proxy', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${proxy.ports.ws}/chat?room=1`);
    socket.binaryType = 'arraybuffer';
    const binary = randomBytes(200 * 1024);
    const received: Array<string | Buffer> = [];
    const closed = await new Promise<{ code: number }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`websocket did not finish; got ${received.length} messages`)), 10_000);
      socket.onerror = () => { clearTimeout(timer); reject(new Error('websocket error')); };
      socket.onopen = () => { socket.send('hello through skua'); socket.send(binary); };
      socket.onmessage = (ev: MessageEvent) => {
        received.push(typeof ev.data === 'string' ? ev.data : Buffer.from(ev.data as ArrayBuffer));
        if (received.length === 2) socket.close(1000, 'bye');
      };
      socket.onclose = (ev: CloseEvent) => { clearTimeout(timer); resolve({ code: ev.code }); };
    });
    assert.equal(received[0], 'hello through skua');
    assert.ok(Buffer.isBuffer(received[1]) && received[1].equals(binary), 'binary message echoed byte for byte');
    assert.equal(closed.code, 1000);
    const seen = ws.requests.at(-1);
    assert.equal(seen?.url, '/chat?room=1');
    assert.equal(String(seen?.headers.upgrade).toLowerCase(), 'websocket');
    assert.ok(((await proxy.stat('http.ws.downstream_cx_upgrades_total')) ?? 0) >= 1);
  });

  test('raw RFC 6455 client: 101 with the backend accept key, masked frames echoed, ping answered', async () => {
    const key = randomBytes(16).toString('base64');
    const s = await openSocket(proxy.ports.ws);
    try {
      const headRead = readUntil(s, (b) => b.includes('\r\n\r\n'), 5000);
      s.write(upgradeRequest('/raw', key));
      const head = await headRead;
      const text = head.toString('latin1');
      assert.match(text, /^HTTP\/1\.1 101 /);
      assert.match(text, new RegExp(`sec-websocket-accept: ${wsAccept(key).replace(/[+/]/g, '\\$&')}\\r\\n`, 'i'));
      const rest = head.subarray(head.indexOf('\r\n\r\n') + 4); // frames that came with the 101
      const payload = Buffer.from('x'.repeat(70_000));
      const frames = readUntil(s, (b) => decodeWsFrames(Buffer.concat([rest, b])).frames.length >= 2, 5000);
      s.write(Buffer.concat([encodeWsFrame(0x1, payload, randomBytes(4)), encodeWsFrame(0x9, Buffer.from('ping!'), randomBytes(4))]));
      const decoded = decodeWsFrames(Buffer.concat([rest, await frames])).frames;
      assert.equal(decoded[0].opcode, 0x1);
      assert.ok(decoded[0].payload.equals(payload));
      assert.equal(decoded[1].opcode, 0xa);
      assert.equal(decoded[1].payload.toString(), 'ping!');
      const closing = readUntil(s, undefined, 5000);
      s.write(encodeWsFrame(0x8, Buffer.from([0x03, 0xe8]), randomBytes(4)));
      const closeFrames = decodeWsFrames(await closing).frames;
      assert.equal(closeFrames[0]?.opcode, 0x8, 'the close frame comes back and the connection ends');
    } finally {
      s.destroy();
    }
  });

  test('403 when the HCM has no websocket upgrade_configs; the backend never sees the request', async () => {
    const before = ws.requests.length;
    const buf = await rawExchange(proxy.ports.plain, upgradeRequest('/chat', randomBytes(16).toString('base64')), (b) => parseResponses(b).responses.length > 0);
    const [res] = parseResponses(buf).responses;
    assert.equal(res?.status, 403);
    assert.equal(res.headers.server, 'envoy');
    assert.equal(ws.requests.length, before);
  });

  test('403 when the route disables websocket although the HCM enables it', async () => {
    const before = ws.requests.length;
    const buf = await rawExchange(proxy.ports.ws, upgradeRequest('/nows/x', randomBytes(16).toString('base64')), (b) => parseResponses(b).responses.length > 0);
    assert.equal(parseResponses(buf).responses[0]?.status, 403);
    assert.equal(ws.requests.length, before);
  });

  test('the Node WebSocket client sees the refusal as an error', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${proxy.ports.plain}/chat`);
    const outcome = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), 5000);
      socket.onopen = () => { clearTimeout(timer); resolve('open'); };
      socket.onerror = () => { clearTimeout(timer); resolve('error'); };
    });
    assert.equal(outcome, 'error');
  });
});
