// Istio's peer metadata discovery end to end: skua-proxy with the ambient bootstrap's
// istio.workload.BootstrapExtension subscribes to istio.workload.Workload over Delta ADS (a real
// gRPC ADS server); an io.istio.http.peer_metadata filter looks the downstream peer up by the
// client's source IP and the upstream peer by the backend's IP, and istio.stats (reporter waypoint)
// labels istio_requests_total with both, on each of two worker threads. A workload the control plane removes stops being known.
// A second listener discovers the peer from `baggage` / exchange headers and propagates ours upstream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { startTestAds, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { listener, chain, cluster } from './lib/config.ts';
import { TYPE_URL } from '../packages/proxy/src/api/xds.ts';

const TS = 'type.googleapis.com/udpa.type.v1.TypedStruct';
const WORKLOAD = 'type.googleapis.com/istio.workload.Workload';
const ip4 = (ip: string): string => Buffer.from(ip.split('.').map(Number)).toString('base64');
const workload = (uid: string, ip: string, name: string, canonical: string, version: string): Json => ({
  '@type': WORKLOAD, uid, name: `${name}-7d4f`, namespace: 'default', addresses: [ip4(ip)], workload_name: name,
  canonical_name: canonical, canonical_revision: version, cluster_id: 'Kubernetes', trust_domain: 'cluster.local', service_account: name,
});
const peerMetadata = (value: Json): Json => ({ name: 'peer_metadata', typed_config: { '@type': TS, type_url: 'type.googleapis.com/io.istio.http.peer_metadata.Config', value } });
const stats: Json = { name: 'istio.stats', typed_config: { '@type': TS, type_url: 'type.googleapis.com/stats.PluginConfig', value: { reporter: 'SERVER_GATEWAY' } } };
const router: Json = { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } };
const hcm = (prefix: string, filters: Json[]): Json => ({
  name: 'envoy.filters.network.http_connection_manager',
  typed_config: {
    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: prefix, route_config: { name: prefix, virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'backend' } }] }] },
    http_filters: [...filters, stats, router],
  },
});

/** GET from a chosen source address; resolves with status, response headers and the echo. */
function get(port: number, localAddress: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; echo: EchoReply }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', localAddress, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, echo: JSON.parse(body) as EchoReply }));
    });
    req.setTimeout(5000, () => req.destroy(new Error('timeout')));
    req.on('error', reject).end();
  });
}

function series(text: string, want: Record<string, string>): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('istio_requests_total{')) continue;
    const labels: Record<string, string> = {};
    for (const m of line.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

describe('peer_metadata with workload discovery from the bootstrap extension (real ADS, real requests)', () => {
  let ads: TestAds;
  let proxy: RunningProxy;
  let backend: Backend;
  before(async () => {
    backend = await startHttpBackend('httpbin');
    ads = await startTestAds();
    ads.set(TYPE_URL.cluster, []);
    ads.set(TYPE_URL.listener, []);
    ads.set(WORKLOAD, [workload('Kubernetes//Pod/default/sleep-7d4f', '127.0.0.2', 'sleep', 'sleep', 'v1'), workload('Kubernetes//Pod/default/httpbin-7d4f', '127.0.0.1', 'httpbin', 'httpbin', 'v2')]);
    proxy = await startProxy((ports) => {
      const b = adsBootstrap(ads.port, true, 'waypoint~127.0.0.1~waypoint.default~default.svc.cluster.local');
      (b.node as Json).metadata = { NAME: 'waypoint-1', NAMESPACE: 'default', WORKLOAD_NAME: 'waypoint', CLUSTER_ID: 'Kubernetes', LABELS: { 'service.istio.io/canonical-name': 'waypoint' } };
      b.bootstrap_extensions = [{ name: 'metadata_discovery', typed_config: { '@type': TS, type_url: 'type.googleapis.com/istio.workload.BootstrapExtension', value: { config_source: { ads: {} } } } }];
      const sr = b.static_resources as Json;
      (sr.clusters as Json[]).push(cluster('backend', [backend.port]));
      sr.listeners = [
        { ...listener(ports('wds'), [chain(hcm('wds', [peerMetadata({ downstream_discovery: [{ workload_discovery: {} }], upstream_discovery: [{ workload_discovery: {} }], downstream_propagation: [{ baggage: {} }] })]))]), address: { socket_address: { address: '0.0.0.0', port_value: ports('wds') } } },
        listener(ports('bag'), [chain(hcm('bag', [peerMetadata({ downstream_discovery: [{ istio_headers: {} }, { baggage: {} }], upstream_propagation: [{ istio_headers: {} }, { baggage: {} }] })]))]),
      ];
      return b;
    }, { ports: ['wds', 'bag'], args: ['--concurrency', '2'], readyTimeoutMs: 30_000 });
    await ads.waitFor(() => ads.streams.some((s) => s.subscribed.has(WORKLOAD)), 'a Workload subscription');
  });
  after(() => cleanup(() => proxy?.stop(), () => ads?.close(), () => backend?.close()));

  const scrape = async (): Promise<string> => (await proxy.admin('/stats/prometheus')).body;

  test('the extension subscribes to istio.workload.Workload (wildcard); both peers are found by IP and label istio_requests_total', async () => {
    const sub = ads.streams.find((s) => s.subscribed.has(WORKLOAD))!.names.get(WORKLOAD);
    assert.equal(sub?.wildcard, true);
    const r = await ads.waitFor(async () => {
      const x = await get(proxy.ports.wds, '127.0.0.2');
      return (await scrape()).includes('source_workload="sleep"') ? x : undefined;
    }, 'the Workloads applied');
    assert.equal(r.status, 200);
    assert.equal(r.echo.backend, 'httpbin');
    // downstream_propagation baggage: our own workload goes back to the client.
    assert.equal(r.headers.baggage, 'k8s.cluster.name=Kubernetes,k8s.namespace.name=default,k8s.deployment.name=waypoint,service.name=waypoint');
    // Two workers (--concurrency 2) share the connections: every one of them knows both workloads.
    const sleepBefore = series(await scrape(), { reporter: 'waypoint', source_workload: 'sleep' });
    for (let i = 0; i < 8; i++) await get(proxy.ports.wds, '127.0.0.2');
    assert.equal(series(await scrape(), { reporter: 'waypoint', source_workload: 'sleep' }), sleepBefore + 8);
    const text = await scrape();
    assert.ok(series(text, { reporter: 'waypoint', source_workload: 'sleep', source_canonical_service: 'sleep', source_canonical_revision: 'v1', source_cluster: 'Kubernetes',
      destination_workload: 'httpbin', destination_canonical_service: 'httpbin', destination_canonical_revision: 'v2', response_code: '200' }) >= 1, text);
  });

  test('an unknown source IP stays unknown; a removed workload is forgotten', async () => {
    const unknownBefore = series(await scrape(), { reporter: 'waypoint', source_workload: 'unknown', destination_workload: 'httpbin' });
    await get(proxy.ports.wds, '127.0.0.4');
    assert.equal(series(await scrape(), { reporter: 'waypoint', source_workload: 'unknown', destination_workload: 'httpbin' }), unknownBefore + 1);
    const stream = ads.streams.find((s) => s.open && s.subscribed.has(WORKLOAD))!;
    const nonce = stream.sendDelta({ type_url: WORKLOAD, resources: [], removed_resources: ['Kubernetes//Pod/default/sleep-7d4f'] });
    assert.equal((await stream.reply(nonce)).error_detail, undefined, 'the removal is ACKed');
    await ads.waitFor(async () => {
      await get(proxy.ports.wds, '127.0.0.2');
      return series(await scrape(), { reporter: 'waypoint', source_workload: 'unknown', destination_workload: 'httpbin' }) >= unknownBefore + 2;
    }, 'the sleep workload removed');
  });

  test('baggage discovery labels the source; exchange headers are stripped and ours (and our baggage) go upstream', async () => {
    const r = await get(proxy.ports.bag, '127.0.0.1', {
      baggage: 'k8s.cluster.name=east,k8s.namespace.name=shop,k8s.deployment.name=cart,service.name=cart,service.version=v9',
    });
    assert.equal(r.status, 200);
    assert.equal(r.echo.headers['x-envoy-peer-metadata-id'], 'waypoint~127.0.0.1~waypoint.default~default.svc.cluster.local');
    assert.equal(typeof r.echo.headers['x-envoy-peer-metadata'], 'string');
    assert.match(String(r.echo.headers.baggage), /^k8s\.cluster\.name=Kubernetes,k8s\.namespace\.name=default,k8s\.deployment\.name=waypoint/);
    assert.equal(series(await scrape(), { reporter: 'waypoint', source_workload: 'cart', source_canonical_service: 'cart', source_canonical_revision: 'v9', source_cluster: 'east' }), 1);
    // A client's own exchange headers do not reach the app: ours replace them.
    const spoof = await get(proxy.ports.bag, '127.0.0.1', { 'x-envoy-peer-metadata-id': 'evil', 'x-envoy-peer-metadata': 'AAAA' });
    assert.equal(spoof.echo.headers['x-envoy-peer-metadata-id'], 'waypoint~127.0.0.1~waypoint.default~default.svc.cluster.local');
  });
});
