import type { Bench } from 'tinybench';
import { ISTIO_STATS_HTTP_EXTENSION } from '../../packages/proxy/src/filters/http/istio_stats/filter.ts';
import { LiveMetadataExchange } from '../../packages/proxy/src/filters/http/metadata_exchange/filter.ts';
import { StatsStore } from '../../packages/proxy/src/stats/store.ts';
import { setLocalNode } from '../../packages/proxy/src/core/node.ts';
import { localExchange, UPSTREAM_PEER, peerFromHeader } from '../../packages/proxy/src/telemetry/istio/peer.ts';
import { encodeStruct } from '../../packages/proxy/src/telemetry/istio/struct-codec.ts';
import type { RequestRecord } from '../../packages/proxy/src/http/request-record.ts';
import type { FilterCallbacks } from '../../packages/proxy/src/filters/http/types.ts';

/**
 * Per-request cost of Istio's stats filter (istio_requests_total + 3 histograms with the 25
 * standard labels) on a client sidecar, and of HTTP metadata exchange on a request.
 * Each task runs N requests over 8 rotating response codes/peers-worth of label sets.
 */
const N = 1000;

setLocalNode({ id: 'sidecar~10.0.0.1~productpage-v1-1.default~default.svc.cluster.local', cluster: 'productpage.default', locality: {},
  metadata: { NAME: 'productpage-v1-1', NAMESPACE: 'default', WORKLOAD_NAME: 'productpage-v1', CLUSTER_ID: 'Kubernetes',
    LABELS: { app: 'productpage', version: 'v1', 'service.istio.io/canonical-name': 'productpage', 'service.istio.io/canonical-revision': 'v1' } } });

const peer = peerFromHeader('reviews', encodeStruct({ WORKLOAD_NAME: 'reviews-v2', NAMESPACE: 'default', LABELS: { app: 'reviews', version: 'v2' } }).toString('base64'));
const conn = { id: 1, remoteAddress: '127.0.0.1', remotePort: 1, localAddress: '127.0.0.1', localPort: 2, originalDst: { address: '127.0.0.1', port: 2 },
  tls: false, serverName: '', alpn: '', peerUriSans: [], startTime: 0, filterState: undefined };
const CODES = [200, 200, 200, 201, 404, 200, 503, 200];
const recs = CODES.map((status) => ({
  ex: { conn, headers: { 'content-type': 'application/json' }, authority: 'reviews:9080', protocol: 'HTTP/1.1', method: 'GET', path: '/reviews/1', scheme: 'http' },
  upstreamCluster: 'outbound|9080||reviews.default.svc.cluster.local', routeName: 'reviews', status, flags: status === 503 ? 'UF' : '-',
  durationMs: 3.2, bytesReceived: 0, bytesSent: 1234, responseHeaders: {}, responseTrailers: undefined,
  filterState: new Map<string, unknown>([[UPSTREAM_PEER, peer]]),
}) as unknown as RequestRecord);

export default function register(bench: Bench): void {
  const store = new StatsStore();
  const live = ISTIO_STATS_HTTP_EXTENSION.compile('istio.stats', undefined).live({ store, statPrefix: 'outbound_0.0.0.0_9080', direction: 'OUTBOUND' });
  bench.add(`istio stats: record one request, 25 labels, 4 metrics (x${N})`, () => {
    for (let i = 0; i < N; i++) live.onComplete!(recs[i & 7]);
  });
  const mx = new LiveMetadataExchange('INBOUND');
  const local = localExchange();
  const headers: Record<string, string | undefined> = {};
  const cb = { ex: { headers }, rec: { filterState: undefined } } as unknown as FilterCallbacks;
  bench.add(`metadata exchange: read + strip peer headers on an inbound request (x${N})`, () => {
    for (let i = 0; i < N; i++) {
      headers['x-envoy-peer-metadata'] = local.header;
      headers['x-envoy-peer-metadata-id'] = local.peer.id;
      (cb.rec as { filterState: unknown }).filterState = undefined;
      mx.decodeHeaders(cb);
    }
  });
}
