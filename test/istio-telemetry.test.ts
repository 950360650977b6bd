// Istio telemetry between two skua sidecars: an "outbound" one (productpage's) and an "inbound"
// one (reviews'), each with its own node metadata, in front of real backends. HTTP metadata
// exchange tells each side who the other is; both export istio_* metrics on /stats/prometheus.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { connect as tlsConnect } from 'node:tls';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { makeCert, startHttpBackend, startTcpEcho, type Backend, type EchoReply, type TestCert } from './lib/backends.ts';
import { openSocket, readUntil, request } from './lib/client.ts';
import { bootstrap, cluster, downstreamTls, hcm, listener, routeTo, T, tcpProxy, vhost } from './lib/config.ts';
import { encodeExchange, readExchange } from '../packages/proxy/src/filters/network/metadata_exchange/wire.ts';

const STATS = { name: 'istio.stats', typed_config: { '@type': 'type.googleapis.com/stats.PluginConfig' } };
/** The HTTP metadata exchange filter as istiod writes it (the dump's http_filters[0]). */
const MX_HTTP = {
  name: 'istio.metadata_exchange',
  typed_config: {
    '@type': 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm',
    config: {
      configuration: { '@type': 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange' },
      vm_config: { code: { local: { inline_string: 'envoy.wasm.metadata_exchange' } }, runtime: 'envoy.wasm.runtime.null' },
    },
  },
};
const GRPC_STATS = { name: 'envoy.filters.http.grpc_stats', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig', emit_filter_state: true, stats_for_all_methods: false } };
const ROUTER = { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } };
const REVIEWS_SVC = 'reviews.default.svc.cluster.local';

function node(id: string, workload: string, app: string, version: string, ns: string): Json {
  return {
    id, cluster: `${app}.${ns}`,
    metadata: {
      NAME: `${workload}-5d8f9c-abcde`, NAMESPACE: ns, WORKLOAD_NAME: workload, CLUSTER_ID: 'Kubernetes', MESH_ID: 'cluster.local', ISTIO_VERSION: '1.24.0',
      LABELS: { app, version, 'service.istio.io/canonical-name': app, 'service.istio.io/canonical-revision': version },
    },
  };
}

function httpListener(port: number, name: string, direction: string, routes: Json[]): Json {
  const h = hcm([vhost(routes)], { statPrefix: name });
  (h.typed_config as Json).http_filters = [MX_HTTP, GRPC_STATS, STATS, ROUTER];
  return { ...listener(port, [{ filters: [h] }], { name }), traffic_direction: direction };
}

function tcpListener(port: number, name: string, direction: string, filters: Json[], extra: Json = {}): Json {
  return { ...listener(port, [{ filters, ...extra }], { name }), traffic_direction: direction };
}

/** The value of the first exported series of `metric` whose labels include all of `want`. */
function series(text: string, metric: string, want: Record<string, string>): { value: number; labels: Record<string, string> } | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const labels: Record<string, string> = {};
    for (const m of line.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) return { value: Number(line.slice(line.lastIndexOf(' ') + 1)), labels };
  }
  return undefined;
}

function promtoolProblems(text: string): string[] {
  const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  const out = `${r.stdout}${r.stderr}`;
  if (r.status === 1 && !out.trim()) return ['promtool failed'];
  return out.split('\n').filter((l) => l && !/no help text|should have "_total" suffix|non-counter metrics should not have "_total"|abbreviated units|base unit/.test(l));
}

async function prom(p: RunningProxy): Promise<string> {
  const r = await p.admin('/stats/prometheus');
  assert.equal(r.status, 200);
  return r.body;
}

async function eventually<T>(fn: () => Promise<T | undefined>, what: string, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('Istio telemetry between two sidecars (e2e)', { timeout: 90_000 }, () => {
  let app: Backend, echo: Backend, cert: TestCert, inbound: RunningProxy, outbound: RunningProxy;

  before(async () => {
    app = await startHttpBackend('reviews');
    echo = await startTcpEcho();
    cert = await makeCert('reviews.default');
    inbound = await startProxy((p) => ({
      node: node('sidecar~127.0.0.1~reviews-v2-5d8f9c-abcde.default~default.svc.cluster.local', 'reviews-v2', 'reviews', 'v2', 'default'),
      ...bootstrap([
        httpListener(p('http'), 'inbound_http', 'INBOUND', [routeTo('inbound|9080||', '/reviews')]),
        tcpListener(p('tcp'), 'inbound_tcp', 'INBOUND', [STATS, tcpProxy('inbound|9000||')]),
        tcpListener(p('mx'), 'inbound_mx', 'INBOUND', [
          { name: 'istio.metadata_exchange', typed_config: { '@type': 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange', protocol: 'istio-peer-exchange' } },
          STATS, tcpProxy('inbound|9000||'),
        ], { transport_socket: downstreamTls(cert.certPath, cert.keyPath, ['istio-peer-exchange', 'h2', 'http/1.1']) }),
      ], [cluster('inbound|9080||', [app.port]), cluster('inbound|9000||', [echo.port])]),
    }), { ports: ['http', 'tcp', 'mx'] });
    const svcMeta = { metadata: { filter_metadata: { istio: { services: [{ host: REVIEWS_SVC, name: 'reviews', namespace: 'default' }] } } } };
    outbound = await startProxy((p) => ({
      node: node('sidecar~127.0.0.2~productpage-v1-5d8f9c-abcde.default~default.svc.cluster.local', 'productpage-v1', 'productpage', 'v1', 'default'),
      ...bootstrap([
        httpListener(p('http'), 'outbound_http', 'OUTBOUND', [routeTo(`outbound|9080||${REVIEWS_SVC}`)]),
        tcpListener(p('tcp'), 'outbound_tcp', 'OUTBOUND', [STATS, tcpProxy(`outbound|9000||${REVIEWS_SVC}`)]),
      ], [
        cluster(`outbound|9080||${REVIEWS_SVC}`, [inbound.ports.http], { extra: svcMeta }),
        cluster(`outbound|9000||${REVIEWS_SVC}`, [inbound.ports.tcp], { extra: svcMeta }),
      ]),
    }), { ports: ['http', 'tcp'] });
  });

  after(() => cleanup(() => outbound?.stop(), () => inbound?.stop(), () => app?.close(), () => echo?.close(), () => cert?.remove()));

  test('HTTP: peers learn each other, headers never reach the app or the client, both sides report', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await request(`http://127.0.0.1:${outbound.ports.http}/reviews/1`, { headers: { host: 'reviews:9080' } });
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-envoy-peer-metadata'], undefined);
      assert.equal(r.headers['x-envoy-peer-metadata-id'], undefined);
      const seen = (JSON.parse(r.text) as EchoReply).headers;
      assert.equal(seen['x-envoy-peer-metadata'], undefined, 'the app must not see peer metadata');
      assert.equal(seen['x-envoy-peer-metadata-id'], undefined);
    }
    const miss = await request(`http://127.0.0.1:${outbound.ports.http}/other`, { headers: { host: 'reviews:9080' } });
    assert.equal(miss.status, 404);

    const out = await prom(outbound);
    const src = series(out, 'istio_requests_total', { reporter: 'source', response_code: '200' });
    assert.ok(src, out);
    assert.equal(src.value, 3);
    assert.deepEqual(Object.keys(src.labels), ['reporter', 'source_workload', 'source_canonical_service', 'source_canonical_revision',
      'source_workload_namespace', 'source_principal', 'source_app', 'source_version', 'source_cluster', 'destination_workload',
      'destination_workload_namespace', 'destination_principal', 'destination_app', 'destination_version', 'destination_service',
      'destination_canonical_service', 'destination_canonical_revision', 'destination_service_name', 'destination_service_namespace',
      'destination_cluster', 'request_protocol', 'response_code', 'grpc_response_status', 'response_flags', 'connection_security_policy']);
    assert.deepEqual({ ...src.labels }, {
      reporter: 'source', source_workload: 'productpage-v1', source_canonical_service: 'productpage', source_canonical_revision: 'v1',
      source_workload_namespace: 'default', source_principal: 'unknown', source_app: 'productpage', source_version: 'v1', source_cluster: 'Kubernetes',
      destination_workload: 'reviews-v2', destination_workload_namespace: 'default', destination_principal: 'unknown', destination_app: 'reviews',
      destination_version: 'v2', destination_service: REVIEWS_SVC, destination_canonical_service: 'reviews', destination_canonical_revision: 'v2',
      destination_service_name: 'reviews', destination_service_namespace: 'default', destination_cluster: 'Kubernetes',
      request_protocol: 'http', response_code: '200', grpc_response_status: '', response_flags: '-', connection_security_policy: 'unknown',
    });
    assert.equal(series(out, 'istio_requests_total', { reporter: 'source', response_code: '404', destination_workload: 'reviews-v2' })?.value, 1);
    assert.equal(series(out, 'istio_request_duration_milliseconds_count', { reporter: 'source', response_code: '200' })?.value, 3);
    assert.ok(series(out, 'istio_response_bytes_sum', { reporter: 'source', response_code: '200' })!.value > 0);

    const inn = await prom(inbound);
    const dst = series(inn, 'istio_requests_total', { reporter: 'destination', response_code: '200' });
    assert.ok(dst, inn);
    assert.equal(dst.value, 3);
    assert.equal(dst.labels.source_workload, 'productpage-v1');
    assert.equal(dst.labels.source_app, 'productpage');
    assert.equal(dst.labels.source_canonical_revision, 'v1');
    assert.equal(dst.labels.destination_workload, 'reviews-v2');
    // No istio service metadata on the inbound cluster: istio-proxy falls back to the Host header.
    assert.equal(dst.labels.destination_service_name, 'reviews:9080');
    assert.equal(dst.labels.connection_security_policy, 'none');
    const nr = series(inn, 'istio_requests_total', { reporter: 'destination', response_code: '404' });
    assert.equal(nr?.labels.response_flags, 'NR');
    assert.equal(nr?.labels.source_workload, 'productpage-v1');

    if (existsSync('/usr/bin/promtool')) {
      assert.deepEqual(promtoolProblems(out), []);
      assert.deepEqual(promtoolProblems(inn), []);
    }
  });

  test('TCP: a tcp_proxy chain reports connections and exact byte counts on both sides', async () => {
    const s = await openSocket(outbound.ports.tcp);
    const payload = Buffer.alloc(100_000, 7);
    s.write(payload);
    await readUntil(s, (b) => b.length >= payload.length, 10_000);
    s.end();
    s.destroy();
    for (const [p, reporter] of [[outbound, 'source'], [inbound, 'destination']] as const) {
      const closed = await eventually(async () => series(await prom(p), 'istio_tcp_connections_closed_total', { reporter }), `${reporter} tcp close`);
      assert.equal(closed.value, 1);
      const text = await prom(p);
      assert.equal(series(text, 'istio_tcp_connections_opened_total', { reporter })?.value, 1);
      assert.equal(series(text, 'istio_tcp_received_bytes_total', { reporter })?.value, payload.length, `${reporter} received`);
      assert.equal(series(text, 'istio_tcp_sent_bytes_total', { reporter })?.value, payload.length, `${reporter} sent`);
      assert.equal(closed.labels.request_protocol, 'tcp');
      if (reporter === 'source') assert.equal(closed.labels.destination_service, REVIEWS_SVC);
      if (existsSync('/usr/bin/promtool')) assert.deepEqual(promtoolProblems(text), []);
    }
  });

  test('TCP metadata exchange: with ALPN istio-peer-exchange the peer\'s node metadata labels the metrics', async () => {
    const ratings = { NAME: 'ratings-v1-xyz', NAMESPACE: 'default', WORKLOAD_NAME: 'ratings-v1', CLUSTER_ID: 'Kubernetes', LABELS: { app: 'ratings', version: 'v1' } };
    const header = encodeExchange(ratings, 'sidecar~10.0.0.9~ratings-v1-xyz.default~default.svc.cluster.local');
    const s = tlsConnect({ host: '127.0.0.1', port: inbound.ports.mx, ALPNProtocols: ['istio-peer-exchange'], rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => { s.once('secureConnect', resolve); s.once('error', reject); });
    assert.equal(s.alpnProtocol, 'istio-peer-exchange');
    s.write(Buffer.concat([header, Buffer.from('hello')]));
    const got = await readUntil(s as never, (b) => { const r = readExchange(b); return r.state === 'done' && b.length >= r.consumed + 5; }, 10_000);
    const r = readExchange(got);
    assert.equal(r.state, 'done');
    if (r.state !== 'done') return;
    assert.equal(r.id, 'sidecar~127.0.0.1~reviews-v2-5d8f9c-abcde.default~default.svc.cluster.local');
    assert.equal((r.metadata?.LABELS as Record<string, string>).app, 'reviews');
    assert.equal(got.subarray(r.consumed).toString(), 'hello', 'the exchange header never reaches the app');
    // Reported as opened once the peer is known; the closed series (and its final byte deltas) only at close.
    const open = await prom(inbound);
    assert.equal(series(open, 'istio_tcp_connections_opened_total', { source_workload: 'ratings-v1' })?.value, 1);
    assert.equal(series(open, 'istio_tcp_connections_closed_total', { source_workload: 'ratings-v1' }), undefined);
    s.end();
    s.destroy();
    const closed = await eventually(async () => series(await prom(inbound), 'istio_tcp_connections_closed_total', { source_workload: 'ratings-v1' }), 'mx tcp close');
    assert.equal(closed.value, 1);
    assert.equal(closed.labels.source_app, 'ratings');
    assert.equal(closed.labels.destination_workload, 'reviews-v2');
    const text = await prom(inbound);
    assert.equal(series(text, 'istio_tcp_received_bytes_total', { source_workload: 'ratings-v1' })?.value, header.length + 5);
    assert.equal(series(text, 'istio_tcp_sent_bytes_total', { source_workload: 'ratings-v1' })?.value, r.consumed + 5);
    assert.equal(await inbound.stat('metadata_exchange.alpn_protocol_found'), 1);
  });
});
