// Cluster upstream_bind_config.source_address, as istiod sets it on a sidecar's inbound clusters
// under iptables capture (127.0.0.6, so ISTIO_OUTPUT lets the app-bound hop and its replies
// through): the app sees its peer as 127.0.0.6 over the HTTP/1.1 pool, the HTTP/2 pool and
// tcp_proxy; what cannot be honoured is refused with the field path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttp, type Server as HttpServer } from 'node:http';
import { createServer as createH2, type Http2Server } from 'node:http2';
import { createServer as createTcp, type Server as TcpServer } from 'node:net';
import { bootstrap, chain, cluster, hcm, listener, routeTo, tcpProxy, vhost } from './lib/config.ts';
import { cleanup, freePort, startProxy, validate, type Json, type RunningProxy } from './lib/proxy.ts';
import { request } from './lib/client.ts';

const BIND = { upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 0 } } };

describe('upstream_bind_config: connections to the app come from 127.0.0.6', () => {
  let h1: HttpServer, h2: Http2Server, tcp: TcpServer;
  let ports: { h1: number; h2: number; tcp: number };
  let proxy: RunningProxy;

  before(async () => {
    ports = { h1: await freePort(), h2: await freePort(), tcp: await freePort() };
    h1 = createHttp((req, res) => res.end(`h1 from ${req.socket.remoteAddress}`));
    h2 = createH2((req, res) => res.end(`h2 from ${req.socket.remoteAddress}`));
    tcp = createTcp((s) => s.end(`tcp from ${s.remoteAddress}\n`));
    await Promise.all([[h1, ports.h1], [h2, ports.h2], [tcp, ports.tcp]].map(([srv, port]) =>
      new Promise<void>((r) => (srv as TcpServer).listen(port as number, '127.0.0.1', () => r()))));
    proxy = await startProxy((p) => bootstrap([
      listener(p('h1'), [chain(hcm([vhost([routeTo('inbound_h1')])]))]),
      listener(p('h2'), [chain(hcm([vhost([routeTo('inbound_h2')])]))]),
      listener(p('tcp'), [chain(tcpProxy('inbound_tcp'))]),
    ], [
      cluster('inbound_h1', [ports.h1], { extra: BIND }),
      cluster('inbound_h2', [ports.h2], { http2: true, extra: BIND }),
      cluster('inbound_tcp', [ports.tcp], { extra: BIND }),
    ]), { ports: ['h1', 'h2', 'tcp'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => new Promise((r) => h1?.close(r)), () => new Promise((r) => h2?.close(r)), () => new Promise((r) => tcp?.close(r))));

  test('HTTP/1.1 and HTTP/2 upstreams and tcp_proxy', async () => {
    assert.equal((await request(`http://127.0.0.1:${proxy.ports.h1}/`)).body.toString(), 'h1 from 127.0.0.6');
    assert.equal((await request(`http://127.0.0.1:${proxy.ports.h2}/`)).body.toString(), 'h2 from 127.0.0.6');
    const net = await import('node:net');
    const reply = await new Promise<string>((resolve, reject) => {
      const s = net.connect(proxy.ports.tcp, '127.0.0.1');
      let d = '';
      s.on('data', (c) => { d += c; });
      s.on('end', () => resolve(d));
      s.on('error', reject);
    });
    assert.equal(reply, 'tcp from 127.0.0.6\n');
  });
});

describe('upstream_bind_config: what is not supported is refused, naming the field', () => {
  const cases: Array<[string, Json, RegExp]> = [
    ['a fixed source port', { upstream_bind_config: { source_address: { address: '127.0.0.6', port_value: 4000 } } }, /clusters\[0\]\.upstream_bind_config\.source_address\.port_value: binding a fixed source port is not supported/],
    ['freebind', { upstream_bind_config: { source_address: { address: '127.0.0.6' }, freebind: true } }, /upstream_bind_config\.freebind: is not supported yet/],
    ['not an address', { upstream_bind_config: { source_address: { address: 'localhost' } } }, /source_address\.address: expected an IP address, got "localhost"/],
    ['with TLS', {
      ...BIND,
      transport_socket: { name: 'tls', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext', sni: 'x' } },
    }, /upstream_bind_config: a source address with a TLS transport socket is not supported yet/],
  ];
  for (const [name, extra, re] of cases) {
    test(name, async () => {
      const r = await validate(bootstrap([], [cluster('c', [9], { extra })]));
      assert.equal(r.code, 1, r.stdout);
      assert.match(r.stderr, re);
    });
  }
});
