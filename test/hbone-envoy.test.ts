// The Envoy path on the core HBONE module: a skua-proxy whose tcp_proxy tunnels (tunneling_config)
// over an mTLS cluster (TLS 1.3, ALPN h2, the server's SPIFFE SAN required, as Istio writes it for
// HBONE) reaches the core's HboneServer — in-process here, as ztunnel's 15008 will be. Many
// downstream connections share one pooled HTTP/2 connection; every byte arrives; the server sees
// the proxy's identity; a server with another identity is refused by the proxy.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startTcpEcho, type Backend } from './lib/backends.ts';
import { openSocket, readUntil } from './lib/client.ts';
import { bootstrap, chain, cluster, listener, tcpProxy } from './lib/config.ts';
import { HboneServer, relay, type HboneInbound } from '../packages/proxy/src/api/hbone.ts';
import { CertificateManager, type WorkloadCertificate } from '../packages/proxy/src/api/identity.ts';
import { CertificateAuthority } from '../packages/controlplane/src/ca/authority.ts';

const id = (sa: string): string => `spiffe://cluster.local/ns/mesh/sa/${sa}`;
const PROXY = id('sidecar'), SERVER = id('ztunnel'), IMPOSTOR = id('impostor');
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const inline = (pem: string): Json => ({ inline_string: pem });

/** Istio's HBONE-style UpstreamTlsContext: our certificate, the CA root, the server's SPIFFE id required. */
function hboneTls(me: WorkloadCertificate, peer: string): Json {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      common_tls_context: {
        tls_params: { tls_minimum_protocol_version: 'TLSv1_3', tls_maximum_protocol_version: 'TLSv1_3' },
        alpn_protocols: ['h2'],
        tls_certificates: [{ certificate_chain: inline(me.chainPem), private_key: inline(me.keyPem) }],
        validation_context: { trusted_ca: inline(me.rootPem), match_subject_alt_names: [{ exact: peer }] },
      },
    },
  };
}

describe('tcp_proxy tunneling_config into the core HBONE server', { timeout: 60_000 }, () => {
  let echo: Backend, certs: CertificateManager, server: HboneServer, impostor: HboneServer;
  let serverPort = 0, impostorPort = 0, proxy: RunningProxy;
  const inbound: HboneInbound[] = [];

  before(async () => {
    echo = await startTcpEcho();
    const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
    certs = new CertificateManager({ issue: (i, csr, ttl) => ca.issue(csr, i, ttl), rootCertPem: ca.rootCertPem });
    const onStream = (req: HboneInbound): void => {
      inbound.push(req);
      const up = netConnect({ host: '127.0.0.1', port: echo.port, allowHalfOpen: true });
      up.once('connect', () => relay(req.accept(), up, () => { /* counted by the client */ }));
      up.once('error', () => req.refuse(503));
    };
    server = new HboneServer({ certificate: () => certs.get(SERVER), onStream });
    impostor = new HboneServer({ certificate: () => certs.get(IMPOSTOR), onStream });
    serverPort = await server.listen(0, '127.0.0.1');
    impostorPort = await impostor.listen(0, '127.0.0.1');
    const me = await certs.get(PROXY);
    proxy = await startProxy((p) => bootstrap([
      listener(p('hbone'), [chain(tcpProxy('hbone', { tunneling_config: { hostname: '10.1.2.3:8080' } }))]),
      listener(p('wrong'), [chain(tcpProxy('wrong', { tunneling_config: { hostname: '10.1.2.3:8080' } }))]),
    ], [
      cluster('hbone', [serverPort], { http2: true, extra: { transport_socket: hboneTls(me, SERVER) } }),
      cluster('wrong', [impostorPort], { http2: true, extra: { transport_socket: hboneTls(me, SERVER) } }),
    ]), { ports: ['hbone', 'wrong'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => server?.destroy(), () => impostor?.destroy(), () => certs?.stop(), () => echo?.close()));

  test('ten downstream connections, one HBONE connection, every byte both ways', async () => {
    const payloads = Array.from({ length: 10 }, (_, i) => randomBytes(100_000 + i * 50_000));
    const backs = await Promise.all(payloads.map(async (p) => {
      const s = await openSocket(proxy.ports.hbone);
      try {
        const got = readUntil(s, undefined, 20_000);
        s.end(p);
        return await got;
      } finally {
        s.destroy();
      }
    }));
    backs.forEach((b, i) => assert.equal(sha(b), sha(payloads[i]), `connection ${i}: ${b.length} of ${payloads[i].length} bytes`));
    assert.equal(inbound.length, 10);
    assert.deepEqual(new Set(inbound.map((r) => r.peerIdentity)), new Set([PROXY]), "the server sees the proxy's SPIFFE id");
    assert.deepEqual(new Set(inbound.map((r) => r.authority)), new Set(['10.1.2.3:8080']));
    assert.equal(await proxy.stat('cluster.hbone.upstream_cx_total'), 1, 'one pooled HTTP/2 connection carried all ten');
    assert.equal(server.sessionCount, 1);
  });

  test('a server presenting another SPIFFE id is refused by the proxy (no stream reaches it)', async () => {
    const s = await openSocket(proxy.ports.wrong);
    const got = await readUntil(s, undefined, 10_000).catch(() => Buffer.alloc(0));
    s.destroy();
    assert.equal(got.length, 0);
    assert.ok(((await proxy.stat('cluster.wrong.ssl.fail_verify_san')) ?? 0) >= 1, 'counted as a SAN failure');
    assert.equal(impostor.sessionCount, 0);
  });
});
