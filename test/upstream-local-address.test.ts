// %UPSTREAM_LOCAL_ADDRESS% / _WITHOUT_PORT / %UPSTREAM_LOCAL_PORT% (the waypoint's access log format):
// the local end of the upstream connection that carried the request, checked against what the
// backend saw as its peer — over HTTP/1.1 and HTTP/2 upstream pools and tcp_proxy — and '-' for a
// request that never reached an upstream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { startProxy, cleanup, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, startH2cBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request, openSocket, readUntil } from './lib/client.ts';
import { listener, chain, hcm, vhost, routeTo, tcpProxy, cluster, directResponse, T } from './lib/config.ts';

const FORMAT = '%UPSTREAM_CLUSTER% %UPSTREAM_LOCAL_ADDRESS% %UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT% %UPSTREAM_LOCAL_PORT%\n';
const log = (): Json[] => [{ name: 'envoy.access_loggers.stdout', typed_config: { '@type': T.stdoutLog, log_format: { text_format_source: { inline_string: FORMAT } } } }];

describe('%UPSTREAM_LOCAL_ADDRESS% names the upstream connection\'s local end', () => {
  let proxy: RunningProxy;
  let h1: Backend, h2: Backend;
  let tcp: Server;
  let tcpPeerPort = 0;
  before(async () => {
    h1 = await startHttpBackend('h1');
    h2 = await startH2cBackend('h2');
    tcp = createServer((s: Socket) => { tcpPeerPort = s.remotePort ?? 0; s.end('hi'); });
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    proxy = await startProxy((ports) => ({
      static_resources: {
        listeners: [
          listener(ports('http'), [chain(hcm([vhost([directResponse(200, 'local', '/local'), routeTo('h2', '/h2'), routeTo('h1', '/')])], { extra: { access_log: log() } }))]),
          listener(ports('tcp'), [chain(tcpProxy('tcp', { access_log: log() }))]),
        ],
        clusters: [cluster('h1', [h1.port]), cluster('h2', [h2.port], { http2: true }), cluster('tcp', [(tcp.address() as { port: number }).port])],
      },
    }), { ports: ['http', 'tcp'], logLevel: 'info' });
  });
  after(() => cleanup(() => proxy?.stop(), () => h1?.close(), () => h2?.close(), () => new Promise<void>((r) => tcp ? tcp.close(() => r()) : r())));

  test('HTTP/1.1 and HTTP/2 upstreams: the port the backend saw', async () => {
    const a = JSON.parse((await request(`http://127.0.0.1:${proxy.ports.http}/a`)).text) as EchoReply;
    assert.equal(await proxy.waitForStdout(new RegExp(`^h1 `)), `h1 127.0.0.1:${a.remotePort} 127.0.0.1 ${a.remotePort}`);
    const b = JSON.parse((await request(`http://127.0.0.1:${proxy.ports.http}/h2`)).text) as EchoReply;
    assert.equal(b.httpVersion, '2.0');
    assert.equal(await proxy.waitForStdout(new RegExp(`^h2 `)), `h2 127.0.0.1:${b.remotePort} 127.0.0.1 ${b.remotePort}`);
  });

  test('tcp_proxy: the port the backend saw; a local reply: none', async () => {
    const s = await openSocket(proxy.ports.tcp);
    assert.equal((await readUntil(s)).toString(), 'hi');
    s.destroy();
    assert.equal(await proxy.waitForStdout(/^tcp /), `tcp 127.0.0.1:${tcpPeerPort} 127.0.0.1 ${tcpPeerPort}`);
    assert.equal((await request(`http://127.0.0.1:${proxy.ports.http}/local`)).text, 'local');
    assert.equal(await proxy.waitForStdout(/^- - - -$/), '- - - -');
  });
});
