// Cluster endpoints with `pipe` addresses (unix domain sockets), as Istio's bootstrap gives its
// sds-grpc cluster: HTTP/1.1, gRPC over HTTP/2 (@grpc/grpc-js on a unix socket, trailers and every
// byte checked) and tcp_proxy reach servers listening on a path, and on a Linux abstract socket (`@name`).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Server as GrpcServer, ServerCredentials, credentials, makeGenericClientConstructor, Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { startProxy, cleanup, type Json, type RunningProxy } from './lib/proxy.ts';
import { request, openSocket, readUntil } from './lib/client.ts';
import { listener, chain, hcm, vhost, routeTo, tcpProxy } from './lib/config.ts';

const identity = (b: Buffer): Buffer => b;
const ECHO_METHOD = { path: '/test.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity };

function pipeCluster(name: string, pipePath: string, http2 = false): Json {
  return {
    name, type: 'STATIC', connect_timeout: '1s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: pipePath } } } }] }] },
    ...(http2 ? { typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } } } } : {}),
  };
}

describe('pipe (unix domain socket) cluster endpoints', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-uds-'));
  const httpSock = path.join(dir, 'http.sock');
  const grpcSock = path.join(dir, 'grpc.sock');
  const abstractName = `skua-test-${process.pid}-${Date.now()}`;
  let http: HttpServer, tcp: NetServer, grpc: GrpcServer;
  let proxy: RunningProxy;
  before(async () => {
    http = createHttpServer((req, res) => {
      const h = createHash('sha256');
      let n = 0;
      req.on('data', (c: Buffer) => { n += c.length; h.update(c); });
      req.on('end', () => res.end(JSON.stringify({ via: 'uds', bytes: n, sha: h.digest('hex'), remote: req.socket.remoteAddress ?? null })));
    });
    await new Promise<void>((r) => http.listen(httpSock, r));
    tcp = createNetServer({ allowHalfOpen: true }, (s) => { s.pipe(s); s.on('error', () => s.destroy()); });
    await new Promise<void>((r) => tcp.listen(`\0${abstractName}`, r));
    grpc = new GrpcServer();
    grpc.addService({ Echo: ECHO_METHOD } as never, {
      Echo: (call: { request: Buffer; metadata: Metadata }, cb: (err: ServiceError | null, value?: Buffer, trailer?: Metadata) => void) => {
        const trailer = new Metadata();
        trailer.set('x-echo-bytes', String(call.request.length));
        cb(null, Buffer.concat([Buffer.from('echo:'), call.request]), trailer);
      },
    });
    await new Promise<void>((resolve, reject) => grpc.bindAsync(`unix:${grpcSock}`, ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
    proxy = await startProxy((ports) => ({
      static_resources: {
        listeners: [
          listener(ports('http'), [chain(hcm([vhost([routeTo('grpc', '/test.Echo/'), routeTo('http', '/')])]))]),
          listener(ports('tcp'), [chain(tcpProxy('abstract'))]),
        ],
        clusters: [pipeCluster('http', httpSock), pipeCluster('grpc', grpcSock, true), pipeCluster('abstract', `@${abstractName}`)],
      },
    }), { ports: ['http', 'tcp'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => new Promise<void>((r) => http.close(() => r())), () => new Promise<void>((r) => tcp.close(() => r())),
    () => new Promise<void>((r) => grpc.tryShutdown(() => r())), () => rmSync(dir, { recursive: true, force: true })));

  test('HTTP/1.1 to a unix socket: every body byte arrives; the upstream host is the path', async () => {
    const body = Buffer.alloc(1 << 20, 7);
    const r = await request(`http://127.0.0.1:${proxy.ports.http}/upload`, { method: 'POST', body });
    assert.equal(r.status, 200);
    const j = JSON.parse(r.text) as { via: string; bytes: number; sha: string };
    assert.deepEqual([j.via, j.bytes, j.sha], ['uds', body.length, createHash('sha256').update(body).digest('hex')]);
    const clusters = (await proxy.admin('/clusters')).body;
    assert.match(clusters, new RegExp(`^http::${httpSock.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}::cx_total::1$`, 'm'));
  });

  test('gRPC over HTTP/2 to a unix socket: message and trailers come back', async () => {
    const Client = makeGenericClientConstructor({ Echo: ECHO_METHOD } as never, 'Echo');
    const client = new Client(`127.0.0.1:${proxy.ports.http}`, credentials.createInsecure()) as unknown as {
      Echo(req: Buffer, cb: (e: ServiceError | null, v?: Buffer) => void): { on(ev: 'status', f: (s: { code: number; metadata: Metadata }) => void): void };
      close(): void;
    };
    try {
      const payload = Buffer.alloc(300_000, 3);
      let trailers: Metadata | undefined;
      const reply = await new Promise<Buffer>((resolve, reject) => {
        const call = client.Echo(payload, (e, v) => (e ? reject(e) : resolve(v!)));
        call.on('status', (s) => { assert.equal(s.code, GrpcStatus.OK); trailers = s.metadata; });
      });
      assert.equal(reply.length, payload.length + 5);
      assert.equal(reply.subarray(0, 5).toString(), 'echo:');
      assert.equal(trailers?.get('x-echo-bytes')[0], String(payload.length));
    } finally { client.close(); }
  });

  test('tcp_proxy to a Linux abstract socket (@name): every byte echoed', async () => {
    const s = await openSocket(proxy.ports.tcp);
    const data = Buffer.alloc(2 << 20, 9);
    s.end(data);
    const back = await readUntil(s, undefined, 10_000);
    s.destroy();
    assert.equal(back.length, data.length);
    assert.ok(back.equals(data));
  });
});
