// Internal listeners end to end, with real sockets and real TLS:
// 1. client → listener A (tcp_proxy) → envoy_internal_address cluster → internal listener B (tcp_proxy)
//    → TCP echo: a large transfer arrives intact, and a client that stops reading stalls the sender.
// 2. The HBONE shape Istio builds: proxy 1 `connect_originate` (internal listener, set_internal_dst_address,
//    tcp_proxy tunneling_config over HTTP/2 CONNECT with mutual TLS) → proxy 2 `connect_terminate`
//    (istio_authn, HCM CONNECT termination with connect_authority / connect_baggage) → internal listener
//    `main_internal` (set_internal_dst_address; istiod's filter_chain_matcher on the restored IP and port) → echo backend.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Socket } from 'node:net';
import { startProxy, cleanup, type Json, type RunningProxy } from './lib/proxy.ts';
import { startTcpEcho, patternStream, patternDigest, type Backend } from './lib/backends.ts';
import { openSocket, sleep } from './lib/client.ts';
import { T, listener, chain, tcpProxy, cluster, socketAddress } from './lib/config.ts';

const TS = 'type.googleapis.com/udpa.type.v1.TypedStruct';
const INTERNAL_UPSTREAM = 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport';
const RAW = 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer';
const FILE_LOG = 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog';
const CLIENT_ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const SERVER_ID = 'spiffe://cluster.local/ns/default/sa/httpbin';
const NET_INPUT = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.';
const BAGGAGE = 'k8s.cluster.name=Kubernetes,k8s.namespace.name=default,k8s.deployment.name=sleep,service.name=sleep,service.version=v1';

const internalListenerExtension: Json = {
  name: 'envoy.bootstrap.internal_listener',
  typed_config: { '@type': TS, type_url: 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener', value: { buffer_size_kb: 64 } },
};

function internalCluster(name: string, listenerName: string, opts: { endpointId?: string; metadata?: Json; passthrough?: string[] } = {}): Json {
  return {
    name, type: 'STATIC', connect_timeout: '1s',
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{
        endpoint: { address: { envoy_internal_address: { server_listener_name: listenerName, ...(opts.endpointId ? { endpoint_id: opts.endpointId } : {}) } } },
        ...(opts.metadata ? { metadata: { filter_metadata: opts.metadata } } : {}),
      }] }],
    },
    transport_socket: {
      name: 'internal_upstream',
      typed_config: {
        '@type': INTERNAL_UPSTREAM,
        passthrough_metadata: (opts.passthrough ?? []).map((n) => ({ kind: { host: {} }, name: n })),
        transport_socket: { name: 'raw_buffer', typed_config: { '@type': RAW } },
      },
    },
  };
}

const setInternalDst: Json = { name: 'set_dst_address', typed_config: { '@type': TS, type_url: 'type.googleapis.com/istio.set_internal_dst_address.v1.Config' } };

/** Sends `total` pattern bytes and reads the echo; resolves with the echo's sha256 once the peer closes. */
function echoDigest(s: Socket, total: number): Promise<{ digest: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    let bytes = 0;
    s.on('data', (c: Buffer) => { bytes += c.length; h.update(c); });
    s.on('end', () => resolve({ digest: h.digest('hex'), bytes }));
    s.on('error', reject);
    patternStream(total).pipe(s);
  });
}

describe('internal listener hop (tcp_proxy → internal listener → tcp_proxy)', () => {
  let echo: Backend;
  let proxy: RunningProxy;
  before(async () => {
    echo = await startTcpEcho();
    proxy = await startProxy((ports) => ({
      bootstrap_extensions: [internalListenerExtension],
      static_resources: {
        listeners: [
          listener(ports('a'), [chain(tcpProxy('encap_cluster', { stat_prefix: 'ingress' }))], { name: 'ingress' }),
          { name: 'encap', internal_listener: {}, filter_chains: [chain(tcpProxy('backend', { stat_prefix: 'encap' }))] },
        ],
        clusters: [internalCluster('encap_cluster', 'encap'), cluster('backend', [echo.port])],
      },
    }), { ports: ['a'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => echo?.close()));

  test('64 MiB through the internal hop arrive intact (echoed back)', async () => {
    const total = 64 << 20;
    const s = await openSocket(proxy.ports.a);
    const r = await echoDigest(s, total);
    assert.equal(r.bytes, total);
    assert.equal(r.digest, patternDigest(total));
    assert.equal(await proxy.stat('tcp.encap.downstream_cx_total'), 1);
    assert.equal(await proxy.stat('listener.encap.downstream_cx_total'), 1);
  });

  test('a client that stops reading stalls the sender (backpressure through the internal pair)', async () => {
    const total = 256 << 20;
    const s = await openSocket(proxy.ports.a);
    s.pause();
    let sent = 0;
    const src = patternStream(total, (n) => { sent = n; });
    src.pipe(s);
    await sleep(1500);
    const stalledAt = sent;
    // Kernel buffers on four sockets plus 2 × 64 KiB inside the proxy hold a few MiB, never 256.
    assert.ok(stalledAt < 48 << 20, `sender pushed ${stalledAt} bytes while nobody read`);
    const h = createHash('sha256');
    let bytes = 0;
    await new Promise<void>((resolve, reject) => {
      s.on('data', (c: Buffer) => { bytes += c.length; h.update(c); });
      s.on('end', resolve);
      s.on('error', reject);
      s.resume();
    });
    assert.equal(bytes, total);
    assert.equal(h.digest('hex'), patternDigest(total));
  });
});

// ------------------------------------------------------------------ certificates with SPIFFE ids

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => execFile('openssl', args, { cwd, timeout: 20_000 }, (err, _o, stderr) => (err ? reject(new Error(`openssl ${args[0]}: ${stderr}`)) : resolve())));
}

interface Pki { dir: string; ca: string; leaf(name: string): { cert: string; key: string } }

/** A test CA and two leaves whose only SAN is a SPIFFE URI (what istiod's CA issues). */
async function makePki(): Promise<Pki> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-spiffe-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-days', '2', '-subj', '/O=cluster.local', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'], dir);
  for (const [name, id] of [['client', CLIENT_ID], ['server', SERVER_ID]]) {
    writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=critical,URI:${id}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n`);
    await openssl(['req', ...ec, '-subj', '/', '-keyout', `${name}.key`, '-out', `${name}.csr`], dir).catch(() =>
      openssl(['req', ...ec, '-subj', '/O=mesh', '-keyout', `${name}.key`, '-out', `${name}.csr`], dir));
    await openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
      '-extfile', `${name}.ext`, '-out', `${name}.pem`], dir);
  }
  return { dir, ca: path.join(dir, 'ca.pem'), leaf: (name) => ({ cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) }) };
}

function commonTls(pki: Pki, leaf: string): Json {
  const { cert, key } = pki.leaf(leaf);
  return {
    tls_params: { tls_minimum_protocol_version: 'TLSv1_3', tls_maximum_protocol_version: 'TLSv1_3' },
    alpn_protocols: ['h2'],
    tls_certificates: [{ certificate_chain: { filename: cert }, private_key: { filename: key } }],
    validation_context: {
      trusted_ca: { filename: pki.ca },
      match_typed_subject_alt_names: [{ san_type: 'URI', matcher: { prefix: 'spiffe://cluster.local/' } }],
    },
  };
}

describe('HBONE shape: connect_originate → HTTP/2 CONNECT over mTLS → connect_terminate → main_internal', () => {
  let pki: Pki;
  let echo: Backend;
  let terminate: RunningProxy;
  let originate: RunningProxy;
  let logPath: string;
  before(async () => {
    pki = await makePki();
    echo = await startTcpEcho();
    logPath = path.join(pki.dir, 'main_internal.log');
    terminate = await startProxy((ports) => ({
      bootstrap_extensions: [internalListenerExtension],
      static_resources: {
        listeners: [
          {
            name: 'connect_terminate',
            address: socketAddress(ports('hbone')),
            filter_chains: [{
              filters: [
                { name: 'istio_authn', typed_config: { '@type': TS, type_url: 'type.googleapis.com/io.istio.network.authn.Config', value: { shared: true } } },
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': T.hcm, stat_prefix: 'connect_terminate',
                    route_config: { name: 'default', virtual_hosts: [{ name: 'default', domains: ['*'], routes: [{
                      match: { connect_matcher: {} },
                      route: { cluster: 'main_internal', upgrade_configs: [{ upgrade_type: 'CONNECT', connect_config: {} }] },
                      typed_per_filter_config: { connect_authority: { '@type': TS, type_url: 'type.googleapis.com/io.istio.http.connect_authority.Config', value: { enabled: true } } },
                    }] }] },
                    http_filters: [
                      { name: 'connect_baggage', typed_config: { '@type': TS, type_url: 'type.googleapis.com/io.istio.http.connect_baggage.Config' } },
                      { name: 'connect_authority', typed_config: { '@type': TS, type_url: 'type.googleapis.com/io.istio.http.connect_authority.Config' } },
                      { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } },
                    ],
                    http2_protocol_options: { max_concurrent_streams: 100, allow_connect: true },
                    upgrade_configs: [{ upgrade_type: 'CONNECT' }],
                    stream_idle_timeout: '0s',
                  },
                },
              ],
              transport_socket: { name: 'tls', typed_config: { '@type': T.downstreamTls, common_tls_context: commonTls(pki, 'server'), require_client_certificate: true } },
            }],
          },
          {
            name: 'main_internal',
            internal_listener: {},
            listener_filters: [setInternalDst],
            // istiod's waypoint shape: the restored destination IP, then port, names the chain.
            filter_chain_matcher: { matcher_tree: {
              input: { name: 'ip', typed_config: { '@type': `${NET_INPUT}DestinationIPInput` } },
              custom_match: { name: 'ip', typed_config: { '@type': 'type.googleapis.com/xds.type.matcher.v3.IPMatcher', range_matchers: [{
                ranges: [{ address_prefix: '127.0.0.1', prefix_len: 32 }],
                on_match: { matcher: { matcher_tree: {
                  input: { name: 'port', typed_config: { '@type': `${NET_INPUT}DestinationPortInput` } },
                  exact_match_map: { map: { [String(echo.port)]: { action: { name: 'inbound-vip', typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: 'inbound-vip' } } } } },
                } } },
              }] } },
            } },
            filter_chains: [{
              name: 'inbound-vip',
              filters: [tcpProxy('inbound', {
                stat_prefix: 'main_internal',
                access_log: [{ name: 'file', typed_config: { '@type': FILE_LOG, path: logPath, log_format: { text_format_source: { inline_string:
                  'peer=%FILTER_STATE(io.istio.peer_principal:PLAIN)% local=%FILTER_STATE(io.istio.local_principal:PLAIN)% dst=%DOWNSTREAM_LOCAL_ADDRESS% peer_workload=%FILTER_STATE(wasm.downstream_peer:PLAIN)% rx=%BYTES_RECEIVED%\n' } } } }],
              })],
            }],
          },
        ],
        clusters: [
          internalCluster('main_internal', 'main_internal'),
          { name: 'inbound', type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED', connect_timeout: '1s' },
        ],
      },
    }), { ports: ['hbone'], logLevel: process.env.SKUA_TEST_LOG ?? 'info' });
    originate = await startProxy((ports) => ({
      bootstrap_extensions: [internalListenerExtension],
      static_resources: {
        listeners: [
          listener(ports('out'), [chain(tcpProxy('outbound|80||httpbin', { stat_prefix: 'outbound' }))], { name: 'outbound' }),
          listener(ports('out2'), [chain(tcpProxy('outbound|81||httpbin', { stat_prefix: 'outbound2' }))], { name: 'outbound2' }),
          {
            name: 'connect_originate',
            internal_listener: {},
            listener_filters: [setInternalDst],
            filter_chains: [chain(tcpProxy('connect_originate', {
              stat_prefix: 'connect_originate',
              tunneling_config: { hostname: '%DOWNSTREAM_LOCAL_ADDRESS%', headers_to_add: [{ header: { key: 'baggage', value: BAGGAGE } }] },
            }))],
          },
        ],
        clusters: [
          internalCluster('outbound|80||httpbin', 'connect_originate', {
            endpointId: `127.0.0.1:${echo.port}`,
            metadata: { tunnel: { destination: `127.0.0.1:${echo.port}`, address: `127.0.0.1:${terminate.ports.hbone}` } },
            passthrough: ['tunnel'],
          }),
          internalCluster('outbound|81||httpbin', 'connect_originate', {
            metadata: { tunnel: { destination: '127.0.0.1:1', address: `127.0.0.1:${terminate.ports.hbone}` } },
            passthrough: ['tunnel'],
          }),
          {
            name: 'connect_originate', type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED', connect_timeout: '2s',
            typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': T.httpProtocolOptions, explicit_http_config: { http2_protocol_options: {} } } },
            transport_socket: { name: 'tls', typed_config: { '@type': T.upstreamTls, common_tls_context: commonTls(pki, 'client') } },
          },
        ],
      },
    }), { ports: ['out', 'out2'], logLevel: process.env.SKUA_TEST_LOG ?? 'info' });
  });
  // SKUA_TEST_LOG=debug prints both proxies' logs after the suite.
  after(() => { if (process.env.SKUA_TEST_LOG) console.log(`--- originate\n${originate?.stderr()}\n--- terminate\n${terminate?.stderr()}`); });
  after(() => cleanup(() => originate?.stop(), () => terminate?.stop(), () => echo?.close(), () => pki && rmSync(pki.dir, { recursive: true, force: true })));

  test('bytes cross both proxies intact; the terminating side knows the peer, the target and the caller', async () => {
    const total = 24 << 20;
    const s = await openSocket(originate.ports.out);
    const r = await echoDigest(s, total);
    assert.equal(r.bytes, total);
    assert.equal(r.digest, patternDigest(total));
    // The CONNECT went out over TLS to the terminating proxy, whose internal listener served it.
    assert.equal(await terminate.stat('tcp.main_internal.downstream_cx_total'), 1);
    assert.equal(await terminate.stat('listener.main_internal.downstream_cx_total'), 1);
    assert.equal(await originate.stat('tcp.connect_originate.downstream_cx_total'), 1);
    let line = '';
    for (let i = 0; i < 50 && !line; i++) { if (existsSync(logPath)) line = readFileSync(logPath, 'utf8').trim(); if (!line) await sleep(100); }
    assert.equal(line, `peer=${CLIENT_ID} local=${SERVER_ID} dst=127.0.0.1:${echo.port} peer_workload=${BAGGAGE} rx=${total}`);
  });

  test('a tunnel destination no main_internal chain matches is refused there (no_filter_chain_match)', async () => {
    const before = (await terminate.stat('listener.main_internal.no_filter_chain_match')) ?? 0;
    const s = await openSocket(originate.ports.out2);
    s.on('error', () => { /* a reset is an acceptable end too */ });
    let got = 0;
    s.on('data', (c: Buffer) => { got += c.length; });
    s.write('hello');
    await new Promise<void>((r) => s.once('close', () => r()));
    assert.equal(got, 0);
    assert.equal((await terminate.stat('listener.main_internal.no_filter_chain_match')) ?? 0, before + 1);
  });
});
