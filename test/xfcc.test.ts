// x-forwarded-client-cert through a real mTLS listener: APPEND_FORWARD with subject/dns/uri (istiod's
// sidecar inbound setting) appends the downstream peer's element; the default (SANITIZE) strips it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import https from 'node:https';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { makeCert, startHttpBackend, type Backend, type EchoReply, type TestCert } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, T, tlsCertificate, vhost } from './lib/config.ts';

const SPIFFE = 'spiffe://cluster.local/ns/default/sa/client';

describe('x-forwarded-client-cert (forward_client_cert_details)', () => {
  let server: TestCert, client: TestCert, backend: Backend, proxy: RunningProxy;
  before(async () => {
    server = await makeCert('reviews.default.svc', ['spiffe://cluster.local/ns/default/sa/reviews']);
    client = await makeCert('client', [SPIFFE, 'client.default.svc']);
    backend = await startHttpBackend();
    proxy = await startProxy((ports) => {
      const mtls = chain(hcm([vhost([routeTo('backend')])], { extra: {
        forward_client_cert_details: 'APPEND_FORWARD', set_current_client_cert_details: { subject: true, dns: true, uri: true },
      } }), { transport_socket: { name: 'envoy.transport_sockets.tls', typed_config: {
        '@type': T.downstreamTls, require_client_certificate: true,
        common_tls_context: { tls_certificates: [tlsCertificate(server.certPath, server.keyPath)], validation_context: { trusted_ca: { filename: client.certPath } } },
      } } });
      const plain = chain(hcm([vhost([routeTo('backend')])]));
      return bootstrap([listener(ports('mtls'), [mtls], { name: 'mtls' }), listener(ports('plain'), [plain], { name: 'plain' })], [cluster('backend', [backend.port])]) as Json;
    }, { ports: ['mtls', 'plain'], logLevel: process.env.SKUA_TEST_DEBUG ? 'debug' : 'warn' });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close(), () => server?.remove(), () => client?.remove()));

  test('APPEND_FORWARD appends By/Hash/Subject/URI/DNS of the mTLS peer to what the client sent', async () => {
    const body = await new Promise<string>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: proxy.ports.mtls, path: '/x', cert: client.cert, key: client.key, rejectUnauthorized: false, headers: { 'x-forwarded-client-cert': 'By=spiffe://a;Hash=00' } }, (res) => {
        let b = ''; res.setEncoding('utf8'); res.on('data', (d: string) => { b += d; }); res.on('end', () => resolve(b));
      });
      req.on('error', reject);
      req.end();
    });
    const seen = (JSON.parse(body) as EchoReply).headers['x-forwarded-client-cert'];
    const hash = createHash('sha256').update(new X509Certificate(client.cert).raw).digest('hex');
    assert.equal(seen, `By=spiffe://a;Hash=00,By=spiffe://cluster.local/ns/default/sa/reviews;Hash=${hash};Subject="CN=client";URI=${SPIFFE};DNS=client;DNS=client.default.svc`);
  });

  test('a client certificate from an untrusted CA is refused (the handshake result is enforced) and counted', async () => {
    const stranger = await makeCert('stranger', ['spiffe://cluster.local/ns/default/sa/stranger']);
    try {
      const before = (await proxy.stat('listener.127.0.0.1_' + proxy.ports.mtls + '.ssl.connection_error')) ?? 0;
      const outcome = await new Promise<string>((resolve) => {
        const req = https.request({ host: '127.0.0.1', port: proxy.ports.mtls, path: '/x', cert: stranger.cert, key: stranger.key, rejectUnauthorized: false }, (res) => resolve(`status ${res.statusCode}`));
        req.on('error', (e) => resolve(`error ${e.message}`));
        req.end();
      });
      assert.match(outcome, /^error/);
      assert.equal(await proxy.stat('listener.127.0.0.1_' + proxy.ports.mtls + '.ssl.connection_error'), before + 1);
      assert.equal(backend.requests.filter((r) => r.url === '/x').length, 1, 'only the trusted client got through');
    } finally {
      stranger.remove();
    }
  });

  test('the default (SANITIZE) strips a client-supplied header', async () => {
    const r = await request(`http://127.0.0.1:${proxy.ports.plain}/y`, { headers: { 'x-forwarded-client-cert': 'By=forged' } });
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.text) as EchoReply).headers['x-forwarded-client-cert'], undefined);
  });
});
