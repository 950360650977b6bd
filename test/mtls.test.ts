// Mutual TLS between two skua proxies with certificates from the local CA through the
// secret manager (CA_ADDR + the projected-token path), using istiod's ISTIO_MUTUAL
// shapes: SDS `default`/`ROOTCA`, combined_validation_context SAN matchers,
// transport_socket_matches on tlsMode=istio, tls_inspector chains for PERMISSIVE and
// STRICT. Each failure (wrong SPIFFE id, unknown CA, expired or missing client
// certificate, plaintext to STRICT) is refused and counted under Envoy's stat names.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as tlsConnect } from 'node:tls';
import { Agent } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';
import { bootstrap, chain, hcm, listener, routeTo, vhost, T } from './lib/config.ts';
import { istioDownstreamTls, meshCluster, startLocalCa, workload, type LocalCa, type Workload } from './lib/mesh.ts';
import { CertificateAuthority } from '../packages/controlplane/src/ca/authority.ts';
import { makeCsr, newKeyPair, privateKeyPem } from '../packages/proxy/src/api/identity.ts';

const REVIEWS = 'spiffe://cluster.local/ns/default/sa/reviews';
const TLS_CHAIN_MATCH = { transport_protocol: 'tls', application_protocols: ['istio-peer-exchange', 'istio'] };
const inspector = [{ name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': T.tlsInspector } }];

let local: LocalCa, stranger: CertificateAuthority, backend: Backend, server: RunningProxy, client: RunningProxy;
let wlServer: Workload, wlClient: Workload, tmp: string;

/** Polls a stat until `ok(value)` (counters move after the connection is gone). */
async function statReaches(p: RunningProxy, name: string, ok: (v: number) => boolean, timeoutMs = 5000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = (await p.stat(name)) ?? 0;
    if (ok(v) || Date.now() > deadline) return v;
    await sleep(50);
  }
}

/** A client key and certificate for `uri`, signed by `ca`, living `ttlSec`. */
async function clientCert(ca: CertificateAuthority, uri: string, ttlSec: number): Promise<{ cert: string; key: string }> {
  const keys = await newKeyPair();
  const chain = await ca.issue(await makeCsr(keys, uri), uri, ttlSec);
  return { cert: chain[0], key: await privateKeyPem(keys.privateKey) };
}

/** One HTTP/1.1 request over TLS straight to the inbound port; the status line, or how it failed. */
function tlsRequest(port: number, id: { cert: string; key: string } | undefined, ca: string): Promise<string> {
  return new Promise((resolve) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['istio-peer-exchange', 'istio'], checkServerIdentity: () => undefined, ...(id ?? {}) });
    let buf = '';
    const timer = setTimeout(() => { s.destroy(); resolve('timeout'); }, 4000);
    s.once('secureConnect', () => s.write('GET /direct HTTP/1.1\r\nhost: reviews\r\nconnection: close\r\n\r\n'));
    s.on('data', (d: Buffer) => { buf += d.toString(); });
    s.on('error', (e: NodeJS.ErrnoException) => { clearTimeout(timer); resolve(buf ? buf.split('\r\n')[0] : `error ${e.code ?? e.message}`); });
    s.on('close', () => { clearTimeout(timer); resolve(buf ? buf.split('\r\n')[0] : 'closed'); });
  });
}

before(async () => {
  local = await startLocalCa();
  stranger = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  tmp = mkdtempSync(path.join(tmpdir(), 'skua-mtls-'));
  writeFileSync(path.join(tmp, 'stranger-root.pem'), stranger.rootCertPem);
  backend = await startHttpBackend();
  wlServer = workload(local, 'default', 'reviews');
  wlClient = workload(local, 'default', 'productpage');
  const inboundHcm = (prefix: string): Json => hcm([vhost([routeTo('backend')])], { statPrefix: prefix });
  server = await startProxy((p) => bootstrap([
    listener(p('permissive'), [
      chain(inboundHcm('inbound_mtls'), { filter_chain_match: TLS_CHAIN_MATCH, transport_socket: istioDownstreamTls() }),
      chain(inboundHcm('inbound_plain'), { filter_chain_match: { transport_protocol: 'raw_buffer' } }),
    ], { name: 'permissive', listenerFilters: inspector }),
    listener(p('strict'), [
      chain(inboundHcm('inbound_strict'), { filter_chain_match: TLS_CHAIN_MATCH, transport_socket: istioDownstreamTls() }),
    ], { name: 'strict', listenerFilters: inspector }),
  ], [{ name: 'backend', type: 'STATIC', connect_timeout: '1s', load_assignment: { cluster_name: 'backend', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: backend.port } } } }] }] } }]),
  { ports: ['permissive', 'strict'], env: wlServer.env, cwd: wlServer.dir });
  const route = (prefix: string, cluster: string): Json => routeTo(cluster, prefix);
  client = await startProxy((p) => bootstrap([
    listener(p('outbound'), [chain(hcm([vhost([
      route('/ok', 'reviews'), route('/strict', 'reviews-strict'), route('/wrong-san', 'reviews-wrong-san'),
      route('/plain-to-strict', 'plain-to-strict'), route('/unknown-ca', 'reviews-unknown-ca'), route('/per-request', 'reviews-per-request'), route('/capped', 'reviews-capped'),
    ])], { statPrefix: 'outbound' }))]),
  ], [
    meshCluster('reviews', server.ports.permissive, [REVIEWS]),
    meshCluster('reviews-strict', server.ports.strict, [REVIEWS]),
    meshCluster('reviews-per-request', server.ports.strict, [REVIEWS], { extra: { max_requests_per_connection: 1 } }),
    meshCluster('reviews-capped', server.ports.strict, [REVIEWS], { extra: { max_requests_per_connection: 1, circuit_breakers: { thresholds: [{ max_connections: 2 }] } } }),
    meshCluster('reviews-wrong-san', server.ports.permissive, ['spiffe://cluster.local/ns/default/sa/ratings']),
    meshCluster('plain-to-strict', server.ports.strict, [REVIEWS], { tlsMode: 'disabled' }),
    meshCluster('reviews-unknown-ca', server.ports.permissive, [REVIEWS], { validation: { trusted_ca: { filename: path.join(tmp, 'stranger-root.pem') }, match_subject_alt_names: [{ exact: REVIEWS }] } }),
  ]), { ports: ['outbound'], env: wlClient.env, cwd: wlClient.dir });
});

after(() => cleanup(() => client?.stop(), () => server?.stop(), () => backend?.close(), () => local?.close(),
  () => wlServer?.remove(), () => wlClient?.remove(), () => tmp && rmSync(tmp, { recursive: true, force: true })));

describe('mTLS between two proxies (ISTIO_MUTUAL)', { timeout: 60_000 }, () => {
  test('a request flows productpage → reviews over mTLS, both sides counting the handshake', async () => {
    const r = await request(`http://127.0.0.1:${client.ports.outbound}/ok/1`);
    assert.equal(r.status, 200, r.body.toString());
    assert.equal((JSON.parse(r.body.toString()) as EchoReply).url, '/ok/1');
    assert.ok(await statReaches(client, 'cluster.reviews.ssl.handshake', (v) => v >= 1) >= 1);
    assert.equal(await client.stat('cluster.reviews.tlsMode-istio.total_match_count'), 1);
    const prefix = `listener.127.0.0.1_${server.ports.permissive}`;
    assert.ok((await server.stat(`${prefix}.ssl.handshake`))! >= 1);
    assert.equal(await server.stat('http.inbound_mtls.downstream_rq_2xx'), 1, 'the tls chain served it');
    const strict = await request(`http://127.0.0.1:${client.ports.outbound}/strict/1`);
    assert.equal(strict.status, 200, strict.body.toString());
    assert.equal(local.server.counts.issued >= 2, true);
  });

  test('a new mTLS connection per request (max_requests_per_connection 1): every request completes', async () => {
    const before = (await server.stat(`listener.127.0.0.1_${server.ports.strict}.ssl.handshake`)) ?? 0;
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => request(`http://127.0.0.1:${client.ports.outbound}/per-request/${i}`, { timeoutMs: 5000 })));
    for (const r of rs) assert.equal(r.status, 200, r.body.toString());
    assert.equal(await server.stat(`listener.127.0.0.1_${server.ports.strict}.ssl.handshake`), before + 20);
  });

  test('a new mTLS connection per request beyond max_connections: closed connections free the budget (keep-alive lanes, as wrk)', async () => {
    // Each connection retired after its one request must leave the pool's count, or the third
    // request waits forever for a slot under max_connections 2.
    const lane = async (l: number): Promise<number[]> => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const out: number[] = [];
      try {
        for (let i = 0; i < 6; i++) out.push((await request(`http://127.0.0.1:${client.ports.outbound}/capped/${l}/${i}`, { agent, timeoutMs: 5000 })).status);
      } finally { agent.destroy(); }
      return out;
    };
    const statuses = (await Promise.all([0, 1, 2, 3].map(lane))).flat();
    assert.deepEqual(statuses, Array(24).fill(200));
    assert.equal(await statReaches(client, 'cluster.reviews-capped.upstream_cx_active', (v) => v === 0), 0);
    assert.equal(await client.stat('cluster.reviews-capped.upstream_cx_total'), 24);
  });

  test('PERMISSIVE: plaintext on the same port is served by the raw_buffer chain', async () => {
    const r = await request(`http://127.0.0.1:${server.ports.permissive}/plain`);
    assert.equal(r.status, 200);
    assert.equal(await server.stat('http.inbound_plain.downstream_rq_2xx'), 1);
  });

  test('STRICT: plaintext is refused (no filter chain matches), also when a proxy sends it', async () => {
    const prefix = `listener.127.0.0.1_${server.ports.strict}`;
    const before = (await server.stat(`${prefix}.no_filter_chain_match`)) ?? 0;
    await assert.rejects(request(`http://127.0.0.1:${server.ports.strict}/plain`, { timeoutMs: 3000 }));
    const r = await request(`http://127.0.0.1:${client.ports.outbound}/plain-to-strict`);
    assert.equal(r.status, 503);
    assert.equal(await statReaches(server, `${prefix}.no_filter_chain_match`, (v) => v >= before + 2), before + 2);
    assert.equal(await client.stat('cluster.plain-to-strict.tlsMode-disabled.total_match_count'), 1);
  });

  test('a peer whose SPIFFE id no SAN matcher accepts is refused: ssl.fail_verify_san', async () => {
    const r = await request(`http://127.0.0.1:${client.ports.outbound}/wrong-san`);
    assert.equal(r.status, 503);
    assert.equal(await statReaches(client, 'cluster.reviews-wrong-san.ssl.fail_verify_san', (v) => v >= 1), 1);
    assert.ok((await client.stat('cluster.reviews-wrong-san.ssl.connection_error'))! >= 1);
  });

  test('a server certificate from an unknown CA is refused by the client: ssl.fail_verify_error', async () => {
    const r = await request(`http://127.0.0.1:${client.ports.outbound}/unknown-ca`);
    assert.equal(r.status, 503);
    assert.equal(await statReaches(client, 'cluster.reviews-unknown-ca.ssl.fail_verify_error', (v) => v >= 1), 1);
  });

  test('client certificates: unknown CA, expired, missing are refused by the server; a valid one is served', async () => {
    const prefix = `listener.127.0.0.1_${server.ports.permissive}`;
    const good = await clientCert(local.ca, 'spiffe://cluster.local/ns/default/sa/ratings', 3600);
    assert.match(await tlsRequest(server.ports.permissive, good, local.ca.rootCertPem), /^HTTP\/1.1 200/);
    const before = (await server.stat(`${prefix}.ssl.fail_verify_error`)) ?? 0;
    const alien = await clientCert(stranger, 'spiffe://cluster.local/ns/default/sa/ratings', 3600);
    assert.doesNotMatch(await tlsRequest(server.ports.permissive, alien, local.ca.rootCertPem), /^HTTP/);
    const expired = await clientCert(local.ca, 'spiffe://cluster.local/ns/default/sa/ratings', 1);
    await sleep(2100);
    assert.doesNotMatch(await tlsRequest(server.ports.permissive, expired, local.ca.rootCertPem), /^HTTP/);
    assert.equal(await statReaches(server, `${prefix}.ssl.fail_verify_error`, (v) => v >= before + 2), before + 2);
    assert.doesNotMatch(await tlsRequest(server.ports.permissive, undefined, local.ca.rootCertPem), /^HTTP/);
    assert.equal(await statReaches(server, `${prefix}.ssl.fail_verify_no_cert`, (v) => v >= 1), 1);
    // A valid chain for an id outside the trust domain fails the spiffe://cluster.local/ prefix matcher.
    const outsider = await clientCert(local.ca, 'spiffe://other.local/ns/default/sa/ratings', 3600);
    assert.doesNotMatch(await tlsRequest(server.ports.permissive, outsider, local.ca.rootCertPem), /^HTTP/);
    assert.equal(await statReaches(server, `${prefix}.ssl.fail_verify_san`, (v) => v >= 1), 1);
    assert.ok((await server.stat(`${prefix}.ssl.connection_error`))! >= 4);
  });

  test('nothing crashed, and requests still flow', async () => {
    const r = await request(`http://127.0.0.1:${client.ports.outbound}/ok/again`);
    assert.equal(r.status, 200);
  });
});
