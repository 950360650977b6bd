import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { Msg } from '../src/config/fields.ts';
import { readTypedConfig } from '../src/config/typed-config.ts';
import { HTTP_FILTERS_BY_URL } from '../src/filters/http/registry.ts';
import { NETWORK_FILTERS_BY_URL } from '../src/filters/network/registry.ts';
import { compileIstioStats, HTTP_TAGS, TCP_TAGS } from '../src/filters/http/istio_stats/config.ts';
import { compileAlpn } from '../src/filters/http/alpn/config.ts';
import { FrameCounter } from '../src/filters/http/grpc_stats/filter.ts';
import { decodeStruct, encodeStruct } from '../src/telemetry/istio/struct-codec.ts';
import { encodeExchange, readExchange, MX_MAGIC } from '../src/filters/network/metadata_exchange/wire.ts';
import { exchangedSubset, localExchange, peerFromHeader } from '../src/telemetry/istio/peer.ts';
import { IstioMetrics, peerLabelValues } from '../src/telemetry/istio/metrics.ts';
import { compileAttribute, type AttrContext } from '../src/telemetry/istio/attributes.ts';
import { setLocalNode } from '../src/core/node.ts';
import { StatsStore } from '../src/stats/store.ts';
import { renderPrometheus, renderText } from '../src/stats/prometheus.ts';
import type { ConnInfo } from '../src/listener/conn-info.ts';
import { ConfigError } from '../src/core/errors.ts';

type Json = Record<string, unknown>;
const DUMP = new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/authz/testdata/configdump.yaml', import.meta.url);

/** Every filter entry of the dump's dynamic listeners: network filters, and HTTP filters inside HCMs. */
function dumpFilters(): { network: Array<{ f: Json; path: string }>; http: Array<{ f: Json; path: string }> } {
  const dump = JSON.parse(readFileSync(DUMP, 'utf8')) as { configs: Json[] };
  const network: Array<{ f: Json; path: string }> = [], http: Array<{ f: Json; path: string }> = [];
  for (const c of dump.configs) {
    for (const [li, dl] of ((c.dynamic_listeners as Json[] | undefined) ?? []).entries()) {
      const l = (dl.active_state as Json).listener as Json;
      for (const [ci, fc] of (l.filter_chains as Json[]).entries()) {
        for (const [fi, f] of (fc.filters as Json[]).entries()) {
          const path = `listeners[${li}].filter_chains[${ci}].filters[${fi}]`;
          network.push({ f, path });
          const hf = ((f.typed_config as Json | undefined)?.http_filters as Json[] | undefined) ?? [];
          hf.forEach((h, hi) => http.push({ f: h, path: `${path}.typed_config.http_filters[${hi}]` }));
        }
      }
    }
  }
  return { network, http };
}

const OURS_HTTP = ['type.googleapis.com/stats.PluginConfig', 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm',
  'type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig', 'type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig'];
const OURS_NETWORK = ['type.googleapis.com/stats.PluginConfig', 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange'];

function throwsAt(fn: () => unknown, path: string, re: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof ConfigError && e.path === path && re.test(e.message), `expected a ConfigError at ${path} matching ${re}`);
}

describe('Istio telemetry configs from the sidecar dump', () => {
  const { network, http } = dumpFilters();

  test('every stats / metadata exchange / alpn / grpc_stats HTTP filter compiles', () => {
    const seen = new Set<string>();
    for (const { f, path } of http) {
      const t = readTypedConfig(new Msg(f, path));
      if (!OURS_HTTP.includes(t.url)) continue;
      seen.add(t.url);
      const ext = HTTP_FILTERS_BY_URL.get(t.url);
      assert.ok(ext, t.url);
      const compiled = ext.compile(String(f.name), t.msg);
      assert.equal(compiled.name, f.name);
    }
    assert.deepEqual([...seen].sort(), [...OURS_HTTP].sort());
  });

  test('every stats / metadata exchange network filter compiles', () => {
    const seen = new Set<string>();
    for (const { f, path } of network) {
      const t = readTypedConfig(new Msg(f, path));
      if (!OURS_NETWORK.includes(t.url)) continue;
      seen.add(t.url);
      NETWORK_FILTERS_BY_URL.get(t.url)!.compile(String(f.name), t.msg);
    }
    assert.deepEqual([...seen].sort(), [...OURS_NETWORK].sort());
  });

  test('the dump\'s ALPN override maps upstream protocols to Istio\'s ALPN lists', () => {
    const alpn = http.map(({ f, path }) => readTypedConfig(new Msg(f, path))).find((t) => t.url.includes('alpn'))!;
    assert.deepEqual(compileAlpn(alpn.msg), {
      HTTP10: ['istio-http/1.0', 'istio', 'http/1.0'], HTTP11: ['istio-http/1.1', 'istio', 'http/1.1'], HTTP2: ['istio-h2', 'istio', 'h2'],
    });
  });
});

describe('bad configs name their field', () => {
  const wasm = (vm: Json): Msg => new Msg({ '@type': 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm', config: { vm_config: vm } }, 'f');
  const WASM = HTTP_FILTERS_BY_URL.get('type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm')!;

  test('a Wasm VM other than the null runtime', () => {
    throwsAt(() => WASM.compile('w', wasm({ runtime: 'envoy.wasm.runtime.v8', code: { local: { filename: '/x.wasm' } } })), 'f.config.vm_config.runtime', /envoy\.wasm\.runtime\.v8/);
  });
  test('a null-VM plugin other than metadata exchange', () => {
    throwsAt(() => WASM.compile('w', wasm({ runtime: 'envoy.wasm.runtime.null', code: { local: { inline_string: 'envoy.wasm.stats' } } })), 'f.config.vm_config.code.local.inline_string', /envoy\.wasm\.stats/);
  });
  test('stats dimensions outside the attribute-path subset', () => {
    const m = (dims: Json): Msg => new Msg({ metrics: [{ dimensions: dims }] }, 's');
    throwsAt(() => compileIstioStats(m({ x: 'request.host + "a"' })), 's.metrics[0].dimensions.x', /unsupported CEL expression/);
    throwsAt(() => compileIstioStats(m({ x: 'has(request.host) ? "a" : "b"' })), 's.metrics[0].dimensions.x', /unsupported CEL/);
    throwsAt(() => compileIstioStats(m({ x: 'request.nonsense' })), 's.metrics[0].dimensions.x', /unsupported attribute request\.nonsense/);
    throwsAt(() => compileIstioStats(new Msg({ metrics: [{ tags_to_remove: ['request_protocol', 'no_such_tag'] }] }, 's')), 's.metrics[0].tags_to_remove[1]', /not a standard label/);
    throwsAt(() => compileIstioStats(new Msg({ definitions: [{ name: 'x', value: 'request.host' }] }, 's')), 's.definitions[0].value', /number-valued/);
    throwsAt(() => compileIstioStats(new Msg({ rotation_interval: '60s' }, 's')), 's.rotation_interval', /rotation/);
  });
  test('metadata exchange discovery and a bad ALPN protocol', () => {
    const MX = NETWORK_FILTERS_BY_URL.get('type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange')!;
    // enable_discovery: a peer that does not exchange is looked up in WDS (test/peer-metadata.test.ts serves the index).
    assert.doesNotThrow(() => MX.compile('mx', new Msg({ protocol: 'istio-peer-exchange', enable_discovery: true }, 'n')));
    throwsAt(() => MX.compile('mx', new Msg({}, 'n')), 'n.protocol', /required/);
    throwsAt(() => compileAlpn(new Msg({ alpn_override: [{ upstream_protocol: 'HTTP3', alpn_override: ['h3'] }] }, 'a')), 'a.alpn_override[0].upstream_protocol', /unknown value/);
  });
});

describe('metadata exchange encoding', () => {
  test('Struct round-trips through the protobuf codec, keys sorted', () => {
    const s = { NAME: 'p-1', LABELS: { app: 'a', version: 'v1' }, N: 1.5, B: true, Z: null, L: ['x', 2] };
    assert.deepEqual(decodeStruct(encodeStruct(s)), s);
    assert.deepEqual(encodeStruct({ b: 'x', a: 'y' }), encodeStruct({ a: 'y', b: 'x' }));
  });

  test('the TCP exchange: magic, length, Any(Struct) and partial reads', () => {
    const wire = encodeExchange({ NAME: 'pod', NAMESPACE: 'ns' }, 'sidecar~1.2.3.4~pod.ns~ns.svc.cluster.local');
    assert.equal(wire.readUInt32BE(0), MX_MAGIC);
    assert.equal(wire.readUInt32BE(4), wire.length - 8);
    assert.equal(readExchange(wire.subarray(0, 5)).state, 'need-more');
    assert.equal(readExchange(wire.subarray(0, wire.length - 1)).state, 'need-more');
    const withData = Buffer.concat([wire, Buffer.from('GET / HTTP/1.1\r\n')]);
    const r = readExchange(withData);
    assert.equal(r.state, 'done');
    if (r.state !== 'done') return;
    assert.equal(r.consumed, wire.length);
    assert.equal(r.id, 'sidecar~1.2.3.4~pod.ns~ns.svc.cluster.local');
    assert.deepEqual(r.metadata, { NAME: 'pod', NAMESPACE: 'ns' });
    assert.equal(readExchange(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n')).state, 'bad-magic');
  });

  test('the HTTP header carries the exchanged subset of the node metadata', () => {
    setLocalNode({ id: 'sidecar~10.0.0.1~productpage-v1-1.default~default.svc.cluster.local', cluster: 'productpage.default', locality: {},
      metadata: { NAME: 'productpage-v1-1', NAMESPACE: 'default', WORKLOAD_NAME: 'productpage-v1', CLUSTER_ID: 'Kubernetes', INTERCEPTION_MODE: 'REDIRECT',
        LABELS: { app: 'productpage', version: 'v1', 'service.istio.io/canonical-name': 'productpage' }, PROXY_CONFIG: { concurrency: 2 } } });
    const local = localExchange();
    const back = peerFromHeader(local.peer.id, local.header);
    assert.ok(back);
    assert.equal(back.workloadName, 'productpage-v1');
    assert.equal(back.app, 'productpage');
    assert.equal(back.canonicalName, 'productpage');
    assert.equal(back.metadata.INTERCEPTION_MODE, undefined, 'only the exchanged subset is sent');
    assert.equal(peerFromHeader('id', local.header), peerFromHeader('id', local.header), 'decoded once, shared by identity');
    assert.equal(peerFromHeader('id', '!!!not base64 struct'), peerFromHeader('id', '!!!not base64 struct'));
    // One value seen with two peer ids: a peer each, each keeping its id.
    assert.equal(peerFromHeader('other-id', local.header)?.id, 'other-id');
    assert.equal(peerFromHeader('id', local.header)?.id, 'id');
    // Past the cache's bound (1,024) the oldest go, and every lookup still answers.
    for (let i = 0; i < 1100; i++) {
      const value = encodeStruct({ WORKLOAD_NAME: `w${i}` }).toString('base64');
      assert.equal(peerFromHeader(`id${i % 3}`, value)?.workloadName, `w${i}`);
    }
    assert.equal(peerFromHeader('id', local.header)?.workloadName, 'productpage-v1');
    assert.deepEqual(exchangedSubset({ APP_CONTAINERS: ['a', 'b'], LABELS: { x: 'y', n: 3 } }), { APP_CONTAINERS: 'a,b', LABELS: { x: 'y' } });
  });
});

describe('labels and exposition', () => {
  const conn: ConnInfo = { id: 1, remoteAddress: '10.0.0.2', remotePort: 5555, localAddress: '10.0.0.1', localPort: 9080,
    originalDst: { address: '10.0.0.1', port: 9080 }, tls: true, serverName: '', alpn: 'istio', peerUriSans: ['spiffe://cluster.local/ns/default/sa/reviews'],
    startTime: 0, filterState: undefined };

  test('attribute paths evaluate against a connection and peers', () => {
    const m = new Msg({ a: 1 }, 'd');
    const peer = peerFromHeader('x', encodeStruct({ WORKLOAD_NAME: 'reviews-v1', LABELS: { app: 'reviews' } }).toString('base64'));
    const ctx: AttrContext = { conn, rec: undefined, downstreamPeer: null, upstreamPeer: peer, upstreamCluster: 'outbound|9080||reviews' };
    assert.equal(compileAttribute(m, 'a', "upstream_peer.labels['app'].value")(ctx), 'reviews');
    assert.equal(compileAttribute(m, 'a', 'upstream_peer.workload_name')(ctx), 'reviews-v1');
    assert.equal(compileAttribute(m, 'a', 'string(destination.port)')(ctx), '9080');
    assert.equal(compileAttribute(m, 'a', "'literal'")(ctx), 'literal');
    assert.equal(compileAttribute(m, 'a', 'xds.cluster_name')(ctx), 'outbound|9080||reviews');
    assert.equal(compileAttribute(m, 'a', "request.headers['x-user']")(ctx), undefined, 'no request on a TCP connection');
    assert.equal(compileAttribute(m, 'a', 'downstream_peer.namespace')(ctx), undefined);
  });

  test('server-side labels: peer from exchange, namespace from the SAN, local side from the node', () => {
    const peer = peerFromHeader('p', encodeStruct({ WORKLOAD_NAME: 'reviews-v1', NAMESPACE: 'other', CLUSTER_ID: 'c2', LABELS: { app: 'reviews', version: 'v1', 'service.istio.io/canonical-name': 'reviews' } }).toString('base64'));
    const v = peerLabelValues('destination', { peer, endpointPeer: null, peerSan: 'spiffe://cluster.local/ns/default/sa/reviews', localSan: 'spiffe://cluster.local/ns/default/sa/pp', serviceHost: '', serviceName: '' });
    const named = Object.fromEntries(HTTP_TAGS.slice(0, 20).map((t, i) => [t, v[i]]));
    assert.deepEqual(named, {
      reporter: 'destination', source_workload: 'reviews-v1', source_canonical_service: 'reviews', source_canonical_revision: 'latest',
      source_workload_namespace: 'default', source_principal: 'spiffe://cluster.local/ns/default/sa/reviews', source_app: 'reviews', source_version: 'v1',
      source_cluster: 'c2', destination_workload: 'productpage-v1', destination_workload_namespace: 'default',
      destination_principal: 'spiffe://cluster.local/ns/default/sa/pp', destination_app: 'productpage', destination_version: 'v1',
      destination_service: 'productpage', destination_canonical_service: 'productpage', destination_canonical_revision: '',
      destination_service_name: 'productpage', destination_service_namespace: 'default', destination_cluster: 'Kubernetes',
    });
  });

  test('series: cached per label set, exported in istio-proxy label order, promtool-clean', () => {
    const store = new StatsStore();
    const cfg = compileIstioStats(new Msg({ metrics: [{ name: 'requests_total', dimensions: { request_host: 'request.host' }, tags_to_remove: ['source_cluster'] }] }, 's'));
    const http = new IstioMetrics(store, compileIstioStats(undefined), 'source', false);
    const facts = { peer: null, endpointPeer: null, peerSan: '', localSan: '', serviceHost: 'reviews:9080', serviceName: 'reviews:9080' };
    const a = http.resolve(facts, ['http', '200', '', '-', 'unknown'], []);
    assert.equal(http.resolve({ ...facts }, ['http', '200', '', '-', 'unknown'], []), a, 'same labels → same cached series');
    a[0]!.counter().inc();
    a[1]!.histogram().record(12);
    const b = http.resolve(facts, ['http', '503', '', 'UF', 'unknown'], []);
    assert.notEqual(b[0], a[0]);
    const tcp = new IstioMetrics(store, compileIstioStats(undefined), 'destination', true);
    const conn = tcp.resolve(facts, ['tcp', '-', 'none'], []);
    conn[0]!.counter().inc();
    conn[2]!.counter();
    // Like Envoy's stats: a series exists from its first add, not from the label set's resolution.
    const open = renderPrometheus(store);
    assert.match(open, /^istio_tcp_sent_bytes_total\{.*\} 0$/m);
    assert.doesNotMatch(open, /istio_tcp_connections_closed_total\{/, 'no closed series while the connection is open');
    assert.doesNotMatch(open, /istio_request_messages_total\{/, 'no gRPC message series for plain HTTP');
    conn[1]!.counter().inc();
    assert.match(renderPrometheus(store), /^istio_tcp_connections_closed_total\{.*\} 1$/m);
    const custom = new IstioMetrics(new StatsStore(), cfg, 'source', false);
    const c = custom.resolve(facts, ['http', '200', '', '-', 'unknown'], ['reviews:9080']);
    assert.ok(c[0]);
    const text = renderPrometheus(store);
    const line = text.split('\n').find((l) => l.startsWith('istio_requests_total{') && l.includes('response_code="200"'))!;
    const names = [...line.matchAll(/([a-z_]+)="/g)].map((x) => x[1]);
    assert.deepEqual(names, HTTP_TAGS);
    assert.match(line, / 1$/);
    const tcpLine = text.split('\n').find((l) => l.startsWith('istio_tcp_connections_opened_total{'))!;
    assert.deepEqual([...tcpLine.matchAll(/([a-z_]+)="/g)].map((x) => x[1]), TCP_TAGS);
    assert.match(text, /^# TYPE istio_request_duration_milliseconds histogram$/m);
    assert.match(text, /^istio_request_duration_milliseconds_bucket\{reporter="source",.*,le="25"\} 1$/m);
    assert.match(text, /^istio_request_duration_milliseconds_sum\{reporter="source",.*\} 12$/m);
    assert.match(text, /^istio_build\{component="proxy",tag="unknown"\} 1$/m);
    assert.match(renderText(store, /istio_requests_total/), /^istiocustom\.istio_requests_total\.reporter\.source\.source_workload\.productpage-v1\./m);
    if (existsSync('/usr/bin/promtool')) {
      const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      assert.notEqual(r.status, 1, `${r.stdout}${r.stderr}`);
      const problems = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l && !/no help text|should have "_total" suffix|abbreviated units|base unit/.test(l));
      assert.deepEqual(problems, []);
    }
  });

  test('overrides: a removed tag is gone and an added dimension is appended', () => {
    const store = new StatsStore();
    const cfg = compileIstioStats(new Msg({ metrics: [{ name: 'requests_total', dimensions: { request_host: 'request.host', source_app: "'x'" }, tags_to_remove: ['source_cluster'] }, { name: 'request_bytes', drop: true }] }, 's'));
    const m = new IstioMetrics(store, cfg, 'source', false);
    const set = m.resolve({ peer: null, endpointPeer: null, peerSan: '', localSan: '', serviceHost: 'h', serviceName: 'h' }, ['http', '200', '', '-', 'unknown'], ['reviews:9080', 'x']);
    set[0]!.counter().inc();
    assert.equal(set[2], undefined, 'request_bytes dropped');
    const line = renderPrometheus(store).split('\n').find((l) => l.startsWith('istio_requests_total{'))!;
    assert.ok(!line.includes('source_cluster='));
    assert.match(line, /source_app="x"/);
    assert.match(line, /,request_host="reviews:9080"\} 1$/);
  });

  test('gRPC frames are counted across chunk boundaries', () => {
    const frame = (n: number): Buffer => { const b = Buffer.alloc(5 + n); b.writeUInt32BE(n, 1); return b; };
    const all = Buffer.concat([frame(3), frame(0), frame(70000), frame(1)]);
    const c = new FrameCounter();
    for (let i = 0; i < all.length; i += 7) c.feed(all.subarray(i, i + 7));
    assert.equal(c.count, 4);
  });
});
