import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Msg } from '../src/config/fields.ts';
import { compileListener } from '../src/listener/config.ts';
import { decodeResource } from '../src/xds/decode.ts';
import { encodeResource } from '../src/xds/encode.ts';
import { xdsRootComplete } from '../src/xds/protos.ts';

type Json = Record<string, unknown>;

const DUMP = new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/authz/testdata/configdump.yaml', import.meta.url);
const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';

function dynamicListeners(): Json[] {
  const dump = JSON.parse(readFileSync(DUMP, 'utf8')) as { configs: Json[] };
  const out: Json[] = [];
  for (const c of dump.configs) {
    for (const dl of (c.dynamic_listeners as Json[] | undefined) ?? []) {
      const l = (dl.active_state as Json | undefined)?.listener as Json | undefined;
      if (l) out.push(l);
    }
  }
  return out;
}

/** Drops proto3 defaults (false, 0, "", [], {}) so a dump that printed one compares equal to our output. */
function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v !== null && typeof v === 'object') {
    const o: Json = {};
    for (const [k, x] of Object.entries(v as Json)) {
      const n = normalize(x);
      if (n === false || n === 0 || n === '' || n === null) continue;
      if (Array.isArray(n) && n.length === 0) continue;
      o[k] = n;
    }
    return o;
  }
  return v;
}

describe('xds decode', () => {
  const listeners = dynamicListeners();

  test('the sidecar dump has dynamic listeners', () => {
    assert.ok(listeners.length > 20, `found ${listeners.length}`);
  });

  test('every listener round-trips JSON → protobuf → decodeResource', () => {
    for (const l of listeners) {
      const any = encodeResource(l);
      assert.equal(any.type_url, LISTENER);
      const back = decodeResource({ typeUrl: any.type_url, value: any.value });
      assert.deepEqual(normalize(back), normalize(l), `listener ${String(l.name)}`);
    }
  });

  test('well-known types print as proto-JSON', () => {
    const src: Json = {
      '@type': LISTENER,
      name: 'x',
      address: { socket_address: { address: '0.0.0.0', port_value: 15001, protocol: 'TCP' } },
      listener_filters_timeout: '0.000000001s',
      per_connection_buffer_limit_bytes: 32768,
      traffic_direction: 'OUTBOUND',
      metadata: { filter_metadata: { a: { s: 'x', n: 1.5, b: true, z: null, l: [1, 'two', { k: [] }] } } },
      filter_chains: [{
        transport_socket_connect_timeout: '-1.500s',
        filters: [{ name: 'f', typed_config: { '@type': 'type.googleapis.com/google.protobuf.Duration', value: '3s' } }],
      }],
    };
    const back = decodeResource({ type_url: LISTENER, value: encodeResource(src).value });
    // protocol TCP is the enum default, which proto-JSON omits.
    assert.deepEqual(back, { ...src, address: { socket_address: { address: '0.0.0.0', port_value: 15001 } }, filter_chains: [{ transport_socket_connect_timeout: '-1.500s', filters: [{ name: 'f', typed_config: { '@type': 'type.googleapis.com/google.protobuf.Duration', value: '3s' } }] }] });
  });

  test('an unknown type URL is a clear error', () => {
    assert.throws(() => decodeResource({ type_url: 'type.googleapis.com/no.such.Thing', value: new Uint8Array(0) }), /unknown type URL type\.googleapis\.com\/no\.such\.Thing/);
    // A nested Any whose type is unknown is reported with its field path.
    const L = xdsRootComplete().lookupType('envoy.config.listener.v3.Listener');
    const bytes = L.encode(L.fromObject({ name: 'x', filter_chains: [{ filters: [{ name: 'f', typed_config: { type_url: 'type.googleapis.com/no.such.Inner', value: new Uint8Array([8, 1]) } }] }] })).finish();
    assert.throws(() => decodeResource({ type_url: LISTENER, value: bytes }), /^XdsDecodeError: filter_chains\[0\]\.filters\[0\]\.typed_config: unknown type URL type\.googleapis\.com\/no\.such\.Inner$/);
  });

  test('strings come out whole: ASCII and not, and bytes that are not UTF-8 refuse the resource', () => {
    for (const text of ['outbound|9080||svc-1.bench.svc.cluster.local', 'ñame-✓ 名前', 'x'.repeat(200)]) {
      assert.equal(decodeResource({ type_url: LISTENER, value: encodeResource({ '@type': LISTENER, name: text }).value }).name, text);
    }
    // Listener.name (field 1, length-delimited) holding bytes that are not UTF-8.
    assert.throws(() => decodeResource({ type_url: LISTENER, value: new Uint8Array([0x0a, 0x02, 0xff, 0xfe]) }), /cannot decode type\.googleapis\.com\/envoy\.config\.listener\.v3\.Listener/);
  });

  test('error paths name map keys and list indexes, also after an earlier error', () => {
    const ROUTE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
    const R = xdsRootComplete().lookupType('envoy.config.route.v3.RouteConfiguration');
    const inner = { type_url: 'type.googleapis.com/no.such.Inner', value: new Uint8Array([8, 1]) };
    const bad = R.encode(R.fromObject({ name: 'r', virtual_hosts: [{ name: 'a', domains: ['a'] }, { name: 'b', domains: ['*'], typed_per_filter_config: { 'f.x': inner } }] })).finish();
    const expected = /^XdsDecodeError: virtual_hosts\[1\]\.typed_per_filter_config\["f\.x"\]: unknown type URL type\.googleapis\.com\/no\.such\.Inner$/;
    assert.throws(() => decodeResource({ type_url: ROUTE, value: bad }), expected);
    // The walk that threw left keys behind: the next resource's path starts afresh.
    assert.throws(() => decodeResource({ type_url: ROUTE, value: bad }), expected);
  });

  test('decode µs/op and compile table', () => {
    const encoded = listeners.map((l) => encodeResource(l));
    for (let i = 0; i < 200; i++) for (const a of encoded) decodeResource(a);
    const rounds = 500;
    const t0 = performance.now();
    for (let i = 0; i < rounds; i++) for (const a of encoded) decodeResource(a);
    const us = ((performance.now() - t0) * 1000) / (rounds * encoded.length);
    const bytes = encoded.reduce((s, a) => s + a.value.length, 0) / encoded.length;
    console.log(`decodeResource: ${us.toFixed(1)} µs/op per Listener (avg ${bytes.toFixed(0)} bytes, ${encoded.length} listeners)`);

    const rows: string[] = [];
    encoded.forEach((a, i) => {
      const obj = decodeResource(a);
      let res = 'OK';
      try {
        compileListener(new Msg(obj, 'listener'), i);
      } catch (e) {
        res = (e as Error).message;
      }
      rows.push(`| ${String(obj.name)} | ${res} |`);
    });
    console.log(['| listener | compile |', '|---|---|', ...rows].join('\n'));
  });
});
