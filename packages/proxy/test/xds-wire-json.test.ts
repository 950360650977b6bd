// Decoding straight from the wire (wire-json.ts) gives the proto-JSON that protobufjs's decode plus
// messageToJson gave, on real resources (istioctl's config dumps, istiod-shaped bench resources) and
// on the corners: well-known types, defaults on the wire, packed and unpacked lists, merged
// messages, unknown and mistyped fields, maps, bad bytes.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { decodeResource, messageToJson, setUnknownFieldPolicy } from '../src/xds/decode.ts';
import { encodeResource } from '../src/xds/encode.ts';
import { typeForUrl } from '../src/xds/protos.ts';
import { readerOf } from '../src/xds/flat-reader.ts';
import { meshResources } from '../../../bench/lib/mesh-resources.ts';

type Json = Record<string, unknown>;
type AnyBytes = { type_url: string; value: Uint8Array };

// ../shared beside the checkout, as CI lays it out.
const FIXTURES = fileURLToPath(new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg', import.meta.url));
const DUMPS = [
  'proxyconfig/testdata/config_dump.json', 'writer/compare/testdata/configdump.json',
  'writer/envoy/configdump/testdata/secret/istio/config_dump.json', 'writer/envoy/configdump/testdata/ecds/configdump.json',
  'writer/envoy/configdump/testdata/endpoint/configdump.json', 'writer/envoy/configdump/testdata/routes/istio-gateway-http-route-prefix/configdump.json',
];

/** Every object with a known "@type" that encodes, anywhere in `json` (outermost first). */
function resourcesIn(json: unknown, out: AnyBytes[] = []): AnyBytes[] {
  if (Array.isArray(json)) { for (const x of json) resourcesIn(x, out); return out; }
  if (json === null || typeof json !== 'object') return out;
  const o = json as Json;
  const url = o['@type'];
  if (typeof url === 'string' && typeForUrl(url) && !url.endsWith('ConfigDump')) {
    try { out.push(encodeResource(o)); } catch { /* not encodable here: not this test's subject */ }
  }
  for (const v of Object.values(o)) resourcesIn(v, out);
  return out;
}

/** What decodeResource gave before: protobufjs's decode, then messageToJson, the message spread after "@type". */
function viaMessages(any: AnyBytes): Json {
  const type = typeForUrl(any.type_url)!;
  const reader = readerOf(any.value);
  reader.discardUnknown = false;
  const body = messageToJson(type, type.decode(reader) as unknown as Json, '');
  const name = type.fullName.slice(1);
  const valueWkt = name.startsWith('google.protobuf.') && typeof body !== 'object' || name === 'google.protobuf.ListValue' || name === 'google.protobuf.Struct' || name === 'google.protobuf.Value';
  return valueWkt ? { '@type': any.type_url, value: body } : { '@type': any.type_url, ...(body as Json) };
}

describe('wire-json: the same proto-JSON as decoding to messages first', () => {
  test('every resource of istioctl\'s config dumps, at every nesting level', () => {
    let n = 0;
    for (const f of DUMPS) {
      for (const any of resourcesIn(JSON.parse(readFileSync(path.join(FIXTURES, f), 'utf8')))) {
        assert.deepEqual(decodeResource(any), viaMessages(any), `${f}: ${any.type_url}`);
        n++;
      }
    }
    assert.ok(n > 100, `${n} resources compared`);
  });

  test('istiod-shaped clusters, assignments, routes and listeners', () => {
    const mesh = meshResources(20, 15001, 8080);
    for (const r of [...mesh.clusters, ...mesh.endpoints, ...mesh.routes, ...mesh.listeners]) {
      const any = encodeResource(r);
      assert.deepEqual(decodeResource(any), viaMessages(any));
    }
  });

  test('well-known types in their JSON forms, inside and outside an Any', () => {
    const struct = { a: 1.5, b: 'x', c: true, d: null, e: [1, 'two', { f: [] }], g: {} };
    const cases: Json[] = [
      { '@type': 'type.googleapis.com/google.protobuf.Struct', value: struct },
      { '@type': 'type.googleapis.com/google.protobuf.Duration', value: '-1.000000500s' },
      { '@type': 'type.googleapis.com/google.protobuf.Timestamp', value: '2024-01-02T03:04:05.123Z' },
      { '@type': 'type.googleapis.com/google.protobuf.UInt64Value', value: '18446744073709551615' },
      { '@type': 'type.googleapis.com/google.protobuf.Int64Value', value: '-9007199254740993' },
      { '@type': 'type.googleapis.com/google.protobuf.FloatValue', value: 0.1 },
      { '@type': 'type.googleapis.com/google.protobuf.BytesValue', value: 'AAEC' },
      { '@type': 'type.googleapis.com/google.protobuf.BoolValue', value: false },
      { '@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', name: 'c', connect_timeout: '0.250s', per_connection_buffer_limit_bytes: 0,
        metadata: { filter_metadata: { istio: struct, '__proto__': { x: 1 } } }, common_lb_config: { healthy_panic_threshold: { value: 0 } },
        typed_extension_protocol_options: { p: { '@type': 'type.googleapis.com/google.protobuf.Struct', value: struct } } },
    ];
    for (const c of cases) {
      const any = encodeResource(c);
      assert.deepEqual(decodeResource(any), viaMessages(any), String(c['@type']));
    }
  });

  test('wire corners: defaults written out, packed and unpacked lists, a message field twice (merged), a scalar twice (last wins)', () => {
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string('first');
    w.uint32((2 << 3) | 0).uint32(0); // type STATIC = 0, written out: a oneof member, so printed
    w.uint32((1 << 3) | 2).string('last');
    w.uint32((16 << 3) | 0).uint32(0); // max_requests_per_connection? no: a plain scalar at its default (left out)
    w.uint32((27 << 3) | 2).fork().uint32((2 << 3) | 2).fork().uint32((1 << 3) | 0).uint32(5).ldelim().ldelim(); // common_lb_config.update_merge_window
    w.uint32((27 << 3) | 2).fork().uint32((5 << 3) | 0).uint32(1).ldelim(); // common_lb_config again: merged
    const any = { type_url: 'type.googleapis.com/envoy.config.cluster.v3.Cluster', value: w.finish() };
    assert.deepEqual(decodeResource(any), viaMessages(any));
    assert.equal(decodeResource(any).name, 'last');
    assert.equal(decodeResource(any).type, 'STATIC');
    // RouteAction.retriable_status_codes (repeated uint32): packed, then unpacked.
    const R = 'type.googleapis.com/envoy.config.route.v3.RetryPolicy';
    const packed = protobuf.Writer.create();
    packed.uint32((7 << 3) | 2).fork().uint32(503).uint32(504).ldelim();
    packed.uint32((7 << 3) | 0).uint32(502);
    const retry = { type_url: R, value: packed.finish() };
    assert.deepEqual(decodeResource(retry), viaMessages(retry));
    assert.deepEqual(decodeResource(retry).retriable_status_codes, [503, 504, 502]);
  });

  test('unknown fields and known fields of another wire type are reported, with their message\'s path (well-known types\' too)', () => {
    const seen: string[] = [];
    setUnknownFieldPolicy({ mode: 'warn', onUnknown: (p, t, n) => seen.push(`${p}|${t}|${n}`) });
    try {
      const w = protobuf.Writer.create();
      w.uint32((1 << 3) | 2).string('c');
      w.uint32((1000 << 3) | 0).uint32(1); // unknown number
      w.uint32((1 << 3) | 0).uint32(3); // name (a string) as a varint: kept as unknown
      w.uint32((4 << 3) | 2).fork().uint32((900 << 3) | 5).fixed32(1).ldelim(); // unknown inside connect_timeout
      const any = { type_url: 'type.googleapis.com/envoy.config.cluster.v3.Cluster', value: w.finish() };
      assert.deepEqual(decodeResource(any), { '@type': any.type_url, name: 'c', connect_timeout: '0s' });
      assert.deepEqual(seen, ['connect_timeout|google.protobuf.Duration|900', '|envoy.config.cluster.v3.Cluster|1000', '|envoy.config.cluster.v3.Cluster|1']);
      // (Decoding to messages first missed the well-known types' own unknown fields.)
      seen.length = 0;
      viaMessages(any);
      assert.deepEqual(seen, ['|envoy.config.cluster.v3.Cluster|1000', '|envoy.config.cluster.v3.Cluster|1']);
    } finally {
      setUnknownFieldPolicy({ mode: 'warn' });
    }
  });

  test('bytes that are not the message are refused naming the Any, however deep the break', () => {
    const url = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
    for (const value of [[0x0a, 0x05, 0x61], [0x0a, 0x02, 0xff, 0xfe], [0x22, 0x03, 0x08, 0x80], [0x0f], [0x00, 0x01]]) {
      assert.throws(() => decodeResource({ type_url: url, value: Uint8Array.from(value) }), /^XdsDecodeError: cannot decode type\.googleapis\.com\/envoy\.config\.cluster\.v3\.Cluster: /, `[${value}]`);
    }
  });
});
