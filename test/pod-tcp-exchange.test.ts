// TCP between two sidecars as istiod configures it for mTLS: the client's outbound cluster
// carries the upstream metadata exchange (Cluster.filters istio.metadata_exchange, ALPN
// istio-peer-exchange), the server's inbound chain the downstream one. The exchange's bytes
// must never reach either app (they did reach the client app: the upstream filter was silently
// ignored), and the client's source-reporter metrics name the peer workload and both
// principals from the upstream TLS session. Unknown upstream filters are refused.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { cleanup, startProxy, validate, type Json, type RunningProxy } from './lib/proxy.ts';
import { makeCert, startTcpEcho, type Backend, type TestCert } from './lib/backends.ts';
import { bootstrap, cluster, listener, T, tcpProxy } from './lib/config.ts';

const MX = { name: 'istio.metadata_exchange', typed_config: { '@type': 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange', protocol: 'istio-peer-exchange' } };
const STATS = { name: 'istio.stats', typed_config: { '@type': 'type.googleapis.com/stats.PluginConfig' } };
const SVC = 'reviews.default.svc.cluster.local';
const SPIFFE = { client: 'spiffe://cluster.local/ns/default/sa/bookinfo-productpage', server: 'spiffe://cluster.local/ns/default/sa/bookinfo-reviews' };

function node(id: string, workload: string, app: string): Json {
  return {
    id, cluster: `${app}.default`,
    metadata: { NAME: `${workload}-abc`, NAMESPACE: 'default', WORKLOAD_NAME: workload, CLUSTER_ID: 'Kubernetes',
      LABELS: { app, version: 'v1', 'service.istio.io/canonical-name': app, 'service.istio.io/canonical-revision': 'v1' } },
  };
}

function tlsContext(kind: 'upstream' | 'downstream', own: TestCert, peer: TestCert, alpn: string[]): Json {
  const common = {
    tls_certificates: [{ certificate_chain: { filename: own.certPath }, private_key: { filename: own.keyPath } }],
    validation_context: { trusted_ca: { filename: peer.certPath } }, alpn_protocols: alpn,
  };
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: kind === 'upstream'
      ? { '@type': T.upstreamTls, common_tls_context: common }
      : { '@type': T.downstreamTls, common_tls_context: common, require_client_certificate: true },
  };
}

function echoThrough(port: number, payload: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    s.on('connect', () => s.end(payload));
    s.on('data', (c: Buffer) => got.push(c));
    s.on('end', () => resolve(Buffer.concat(got)));
    s.on('error', reject);
  });
}

function series(text: string, metric: string, want: Record<string, string>): Record<string, string> | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const labels: Record<string, string> = {};
    for (const m of line.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) return labels;
  }
  return undefined;
}

describe('TCP metadata exchange between two sidecars over mTLS', () => {
  let echo: Backend, clientCert: TestCert, serverCert: TestCert, server: RunningProxy, client: RunningProxy;

  before(async () => {
    echo = await startTcpEcho();
    clientCert = await makeCert('productpage', [SPIFFE.client]);
    serverCert = await makeCert('reviews', [SPIFFE.server]);
    server = await startProxy((p) => ({
      node: node('sidecar~127.0.0.2~reviews-v1-abc.default~default.svc.cluster.local', 'reviews-v1', 'reviews'),
      ...bootstrap([{
        ...listener(p('in'), [{ filters: [MX, STATS, tcpProxy('inbound|9000||')], transport_socket: tlsContext('downstream', serverCert, clientCert, ['istio-peer-exchange', 'istio']) }], { name: 'inbound' }),
        traffic_direction: 'INBOUND',
      }], [cluster('inbound|9000||', [echo.port])]),
    }), { ports: ['in'] });
    client = await startProxy((p) => ({
      node: node('sidecar~127.0.0.1~productpage-v1-abc.default~default.svc.cluster.local', 'productpage-v1', 'productpage'),
      ...bootstrap([{ ...listener(p('out'), [{ filters: [STATS, tcpProxy(`outbound|9000||${SVC}`)] }], { name: 'outbound' }), traffic_direction: 'OUTBOUND' }],
        [cluster(`outbound|9000||${SVC}`, [server.ports.in], { extra: {
          filters: [MX], transport_socket: tlsContext('upstream', clientCert, serverCert, ['istio-peer-exchange', 'istio']),
          metadata: { filter_metadata: { istio: { services: [{ host: SVC, name: 'reviews', namespace: 'default' }] } } },
        } })]),
    }), { ports: ['out'] });
  });
  after(() => cleanup(() => client?.stop(), () => server?.stop(), () => echo?.close(), () => clientCert?.remove(), () => serverCert?.remove()));

  test('the apps see exactly their bytes: 64 KiB echoed through both sidecars, nothing added', async () => {
    const payload = Buffer.alloc(65536, 'echo-me-');
    const back = await echoThrough(client.ports.out, payload);
    assert.equal(back.length, payload.length, 'no metadata exchange bytes reach the client app');
    assert.ok(back.equals(payload));
  });

  test("the client's source reporter names the peer workload and both principals of the upstream TLS session", async () => {
    await echoThrough(client.ports.out, Buffer.from('once more'));
    const text = (await client.admin('/stats/prometheus')).body;
    const labels = series(text, 'istio_tcp_connections_opened_total', { reporter: 'source' });
    assert.ok(labels, text);
    assert.equal(labels.destination_workload, 'reviews-v1');
    assert.equal(labels.destination_canonical_service, 'reviews');
    assert.equal(labels.source_principal, SPIFFE.client);
    assert.equal(labels.destination_principal, SPIFFE.server);
    assert.equal(labels.destination_service, SVC);
    const inbound = series((await server.admin('/stats/prometheus')).body, 'istio_tcp_connections_opened_total', { reporter: 'destination' });
    assert.equal(inbound?.source_workload, 'productpage-v1');
    assert.equal(inbound?.source_principal, SPIFFE.client);
    assert.equal(inbound?.connection_security_policy, 'mutual_tls');
  });
});

test('an upstream network filter other than the metadata exchange is refused, naming it', async () => {
  const r = await validate(bootstrap([], [cluster('c', [9], { extra: { filters: [{ name: 'envoy.filters.network.rbac', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC', stat_prefix: 'x' } }] } })]));
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /clusters\[0\]\.filters\[0\]: upstream network filter envoy\.filters\.network\.rbac is not supported yet/);
});
