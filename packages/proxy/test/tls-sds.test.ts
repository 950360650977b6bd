// TLS contexts as istiod writes them for ISTIO_MUTUAL: SDS-named certificates and
// roots resolved through the SecretStore (not ready until both arrive, rebuilt once
// per secret change), combined_validation_context SAN matchers, TLS 1.3 kept with
// istio's TLS 1.2 cipher list, transport_socket_matches on endpoint metadata, and one client
// context shared by the outbound clusters istiod gives the same transport socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { connect, TLSSocket, type PeerCertificate } from 'node:tls';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileDownstreamTls, compileUpstreamTls, nodeCiphers } from '../src/tls/context.ts';
import { SecretStore, tlsCertificateSecret, validationSecret } from '../src/tls/secrets.ts';
import { sansMatch } from '../src/matchers/san.ts';
import { compileCluster, socketMatchFor } from '../src/upstream/cluster-config.ts';
import { makeCsr, newKeyPair, privateKeyPem } from '../src/tls/x509.ts';
import { CertificateAuthority } from '../../controlplane/src/ca/authority.ts';

const fixtures = new URL('../../../../shared/fixtures/istio-istio/', import.meta.url);
type Json = Record<string, unknown>;

/** The DownstreamTlsContext of the sidecar dump's virtualInbound mTLS chain (ALPN istio-peer-exchange/istio). */
function inboundTlsContext(): Json {
  const dump = JSON.parse(readFileSync(new URL('istioctl/pkg/authz/testdata/configdump.yaml', fixtures), 'utf8')) as { configs: Json[] };
  for (const c of dump.configs) {
    for (const l of (c.dynamic_listeners ?? []) as Json[]) {
      const listener = (l.active_state as Json | undefined)?.listener as Json | undefined;
      if (listener?.name !== 'virtualInbound') continue;
      for (const ch of listener.filter_chains as Json[]) {
        const alpn = ((ch.filter_chain_match as Json | undefined)?.application_protocols ?? []) as string[];
        if (alpn.includes('istio')) return (ch.transport_socket as Json).typed_config as Json;
      }
    }
  }
  throw new Error('fixture: no virtualInbound mTLS chain');
}

/** The tlsMode-istio cluster of the describe fixture (EDS), made STATIC with one endpoint per tlsMode. */
function istioCluster(): Json {
  const dump = JSON.parse(readFileSync(new URL('istioctl/pkg/describe/testdata/describe/http_config.json', fixtures), 'utf8')) as { configs: Json[] };
  const cluster = structuredClone(((dump.configs[1].dynamic_active_clusters as Json[])[0].cluster) as Json);
  delete cluster.eds_cluster_config;
  cluster.type = 'STATIC';
  const ep = (port: number, meta?: Json): Json => ({
    endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } },
    ...(meta ? { metadata: { filter_metadata: { 'envoy.transport_socket_match': meta } } } : {}),
  });
  cluster.load_assignment = { cluster_name: cluster.name, endpoints: [{ lb_endpoints: [ep(9080, { tlsMode: 'istio' }), ep(9081)] }] };
  return cluster;
}

async function issued(ca: CertificateAuthority, uri: string, ttl = 3600): Promise<{ chain: string; key: string; root: string }> {
  const keys = await newKeyPair();
  const chain = await ca.issue(await makeCsr(keys, uri), uri, ttl);
  return { chain: chain[0], key: await privateKeyPem(keys.privateKey), root: chain[chain.length - 1] };
}

test("istiod's inbound DownstreamTlsContext: not ready until default and ROOTCA arrive; one context per secret version", async () => {
  const store = new SecretStore();
  const tls = compileDownstreamTls(new Msg(inboundTlsContext(), 'transport_socket.typed_config'), store);
  assert.deepEqual([...tls.secretNames], ['default', 'ROOTCA']);
  assert.deepEqual([...tls.alpn], ['istio-peer-exchange', 'h2', 'http/1.1']);
  assert.equal(tls.requireClientCertificate, true);
  assert.equal(tls.current(), undefined);
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const a = await issued(ca, 'spiffe://cluster.local/ns/default/sa/httpbin');
  store.update('default', tlsCertificateSecret('default', a.chain, a.key));
  assert.equal(tls.current(), undefined, 'ROOTCA still missing');
  assert.deepEqual(tls.missing(), ['ROOTCA']);
  store.update('ROOTCA', validationSecret('ROOTCA', a.root));
  const s1 = tls.current();
  assert.ok(s1 && s1.verifyPeer);
  assert.equal(tls.current(), s1, 'cached until a secret changes');
  store.update('unrelated', validationSecret('unrelated', a.root));
  assert.equal(tls.current(), s1, 'an unrelated secret does not rebuild');
  const b = await issued(ca, 'spiffe://cluster.local/ns/default/sa/httpbin');
  store.update('default', tlsCertificateSecret('default', b.chain, b.key));
  const s2 = tls.current();
  assert.ok(s2 && s2 !== s1, 'rebuilt after rotation');
  // combined_validation_context's default: prefix spiffe://cluster.local/ on any SAN.
  const peer = (san: string): PeerCertificate => ({ subjectaltname: san } as PeerCertificate);
  assert.equal(sansMatch(s2.sanMatchers, peer('URI:spiffe://cluster.local/ns/x/sa/y')), true);
  assert.equal(sansMatch(s2.sanMatchers, peer('URI:spiffe://evil.local/ns/x/sa/y')), false);
  store.remove('ROOTCA');
  assert.equal(tls.current(), undefined, 'removed secret: not usable again');
});

test('a secret the handshake can use: a real TLS 1.3 connection with the SDS-built contexts both ways', async (t) => {
  const store = new SecretStore();
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const server = compileDownstreamTls(new Msg(inboundTlsContext(), 'ts'), store);
  const srvId = await issued(ca, 'spiffe://cluster.local/ns/default/sa/httpbin');
  store.update('default', tlsCertificateSecret('default', srvId.chain, srvId.key));
  store.update('ROOTCA', validationSecret('ROOTCA', srvId.root));
  const state = server.current()!;
  // As the listener does: a TLSSocket over the accepted socket (tls.Server would ignore secureContext).
  const srv = createServer((raw) => {
    const s = new TLSSocket(raw, { isServer: true, secureContext: state.context, requestCert: true, rejectUnauthorized: true, ALPNProtocols: [...server.alpn] });
    s.on('error', () => raw.destroy());
    s.once('secure', () => s.end(`hi ${s.getPeerCertificate().subjectaltname}`));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => srv.close());
  const clientStore = new SecretStore();
  const cluster = compileCluster(new Msg(istioCluster(), 'cluster'));
  const match = socketMatchFor(cluster, { tlsMode: 'istio' });
  assert.equal(match.name, 'tlsMode-istio');
  const tsm = (istioCluster().transport_socket_matches as Json[])[0].transport_socket as Json;
  const upstream = compileUpstreamTls(new Msg(tsm.typed_config, 'x'), clientStore);
  const cliId = await issued(ca, 'spiffe://cluster.local/ns/default/sa/bookinfo-productpage');
  clientStore.update('default', tlsCertificateSecret('default', cliId.chain, cliId.key));
  clientStore.update('ROOTCA', validationSecret('ROOTCA', cliId.root));
  const cs = upstream.current()!;
  const port = (srv.address() as { port: number }).port;
  const sock: TLSSocket = connect({ host: '127.0.0.1', port, secureContext: cs.context, ALPNProtocols: [...upstream.alpn], servername: upstream.sni, checkServerIdentity: () => undefined });
  const body = await new Promise<string>((resolve, reject) => {
    let got = '';
    sock.on('data', (d) => { got += d; });
    sock.on('end', () => resolve(got));
    sock.on('error', reject);
  });
  assert.equal(body, 'hi URI:spiffe://cluster.local/ns/default/sa/bookinfo-productpage');
  assert.equal(sock.getProtocol(), 'TLSv1.3', "istio's TLS 1.2 cipher list must not cap the version at 1.2");
  assert.equal(sock.alpnProtocol, 'istio-peer-exchange');
});

test("istiod's outbound mTLS clusters share one client SecureContext per secret version; SAN and SNI stay their own", async () => {
  const store = new SecretStore();
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const tsm = (istioCluster().transport_socket_matches as Json[])[0].transport_socket as Json;
  const forService = (svc: string): Json => {
    const tc = structuredClone(tsm.typed_config) as Json;
    tc.sni = `outbound_.9080_._.${svc}.default.svc.cluster.local`;
    return tc;
  };
  const a = compileUpstreamTls(new Msg(forService('a'), 'a'), store);
  const b = compileUpstreamTls(new Msg(forService('b'), 'b'), store);
  const tls12 = forService('c');
  const common = tls12.common_tls_context as Json;
  common.tls_params = { ...(common.tls_params as Json | undefined), tls_maximum_protocol_version: 'TLSv1_2' };
  const c = compileUpstreamTls(new Msg(tls12, 'c'), store);
  const id = await issued(ca, 'spiffe://cluster.local/ns/default/sa/productpage');
  store.update('default', tlsCertificateSecret('default', id.chain, id.key));
  store.update('ROOTCA', validationSecret('ROOTCA', id.root));
  const sa = a.current()!, sb = b.current()!, sc = c.current()!;
  assert.equal(sa.context, sb.context, 'one context for the same secrets and options');
  assert.notEqual(sa.context, sc.context, 'other TLS parameters: a context of their own');
  assert.notEqual(a.sni, b.sni);
  assert.ok(sa.verifyPeer && sb.verifyPeer);
  const rotated = await issued(ca, 'spiffe://cluster.local/ns/default/sa/productpage');
  store.update('default', tlsCertificateSecret('default', rotated.chain, rotated.key));
  const ra = a.current()!, rb = b.current()!;
  assert.notEqual(ra.context, sa.context, 'a rotated certificate makes a new context');
  assert.equal(ra.context, rb.context, 'shared again');
  // The server side keeps its own (Node holds session ticket keys per context).
  const inbound = compileDownstreamTls(new Msg(inboundTlsContext(), 'in'), store);
  const inbound2 = compileDownstreamTls(new Msg(inboundTlsContext(), 'in2'), store);
  assert.notEqual(inbound.current()!.context, inbound2.current()!.context);
});

test('transport_socket_matches: tlsMode=istio endpoints get mTLS, others the raw_buffer match', () => {
  const cluster = compileCluster(new Msg(istioCluster(), 'cluster'));
  assert.equal(cluster.anyTls, true);
  assert.equal(cluster.tls, undefined);
  assert.equal(socketMatchFor(cluster, { tlsMode: 'istio' }).tls?.sni, 'outbound_.9080_.v1_.productpage.default.svc.cluster.local');
  const plain = socketMatchFor(cluster, undefined);
  assert.equal(plain.name, 'tlsMode-disabled');
  assert.equal(plain.tls, undefined);
  assert.equal(socketMatchFor(cluster, { tlsMode: 'disabled' }).name, 'tlsMode-disabled');
  assert.deepEqual(cluster.endpoints.map((e) => e.socketMatch), [{ tlsMode: 'istio' }, undefined]);
});

test('cipher lists keep TLS 1.3; refused fields name their path', () => {
  assert.equal(nodeCiphers(['ECDHE-ECDSA-AES256-GCM-SHA384', '[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]']),
    'TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305');
  const ctx = (common: Json): Json => ({ common_tls_context: common });
  assert.throws(() => compileUpstreamTls(new Msg(ctx({ tls_certificate_provider_instance: { instance_name: 'x' } }), 'c')),
    (e: ConfigError) => e.path === 'c.common_tls_context.tls_certificate_provider_instance');
  assert.throws(() => compileUpstreamTls(new Msg(ctx({ combined_validation_context: { default_validation_context: {} } }), 'c')),
    (e: ConfigError) => e.path === 'c.common_tls_context.combined_validation_context.validation_context_sds_secret_config');
  assert.throws(() => compileUpstreamTls(new Msg(ctx({ validation_context: { verify_certificate_spki: ['x'] } }), 'c')),
    (e: ConfigError) => e.path === 'c.common_tls_context.validation_context.verify_certificate_spki');
  assert.throws(() => new SecretStore().update('bad', { tls_certificate: { certificate_chain: { inline_string: 'x' } } }),
    (e: ConfigError) => /private_key: is required/.test(e.message));
});
