// Strict validation over xDS: binary protos cannot carry a misspelled name, but a TypedStruct's
// JSON value can (NACK naming the field); unknown binary field numbers follow Envoy's dynamic
// policy (count and log by default, --reject-unknown-dynamic-fields, --ignore-unknown-dynamic-fields).
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import protobuf from 'protobufjs';
import { decodeResource, setUnknownFieldPolicy, XdsDecodeError } from '../src/xds/decode.ts';
import { encodeResource, structPlain, toPlainMessage, XdsEncodeError } from '../src/xds/encode.ts';
import { typeForUrl } from '../src/xds/protos.ts';

type Json = Record<string, unknown>;

const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const HCM_NAME = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const TYPED_STRUCTS = ['type.googleapis.com/udpa.type.v1.TypedStruct', 'type.googleapis.com/xds.type.v3.TypedStruct'];
const TC = 'filter_chains[0].filters[0].typed_config';

function encode(url: string, plain: Json): Uint8Array {
  const t = typeForUrl(url)!;
  return t.encode(t.fromObject(plain)).finish();
}

/** A Listener whose only filter's typed_config is the given Any bytes (built without encode.ts's checks). */
function listenerWith(typedConfig: { type_url: string; value: Uint8Array }): { type_url: string; value: Uint8Array } {
  const plain = toPlainMessage('envoy.config.listener.v3.Listener', {
    name: 'l1', address: { socket_address: { address: '127.0.0.1', port_value: 1 } }, filter_chains: [{ filters: [{ name: 'hcm' }] }],
  });
  ((plain.filter_chains as Json[])[0].filters as Json[])[0].typed_config = typedConfig;
  return { type_url: LISTENER, value: encode(LISTENER, plain) };
}

function typedStruct(wrapper: string, value: Json): { type_url: string; value: Uint8Array } {
  return { type_url: wrapper, value: encode(wrapper, { type_url: HCM, value: structPlain(value) }) };
}

/** Appends a varint field the descriptors do not know (fields may come in any order on the wire). */
function withUnknownField(bytes: Uint8Array, fieldNumber: number): Uint8Array {
  const extra = protobuf.Writer.create().uint32((fieldNumber << 3) | 0).uint32(7).finish();
  return Buffer.concat([bytes, extra]);
}

describe('TypedStruct values over xDS are checked against their type_url', () => {
  for (const wrapper of TYPED_STRUCTS) {
    test(`${wrapper.slice(20)}: a misspelled HCM field is a decode error naming the path; the right spelling decodes`, () => {
      const good = decodeResource(listenerWith(typedStruct(wrapper, { stat_prefix: 'x', stream_idle_timeout: '1s' })));
      const tc = (((good.filter_chains as Json[])[0].filters as Json[])[0].typed_config as Json);
      assert.deepEqual(tc.value, { stat_prefix: 'x', stream_idle_timeout: '1s' });
      assert.throws(() => decodeResource(listenerWith(typedStruct(wrapper, { stat_prefix: 'x', stream_idle_timout: '1s' }))), (e: unknown) => {
        assert.ok(e instanceof XdsDecodeError);
        assert.equal(e.message, `${TC}.value.stream_idle_timout: unknown field of ${HCM_NAME}`);
        return true;
      });
      // Deeper: a route inside the TypedStruct's inline route_config.
      const routeConfig = { virtual_hosts: [{ name: 'vh', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'c', retry_polcy: {} } }] }] };
      assert.throws(() => decodeResource(listenerWith(typedStruct(wrapper, { stat_prefix: 'x', route_config: routeConfig }))),
        new RegExp(`^XdsDecodeError: ${TC.replace(/[[\]]/g, '\\$&')}\\.value\\.route_config\\.virtual_hosts\\[0\\]\\.routes\\[0\\]\\.route\\.retry_polcy: unknown field of envoy\\.config\\.route\\.v3\\.RouteAction$`));
    });
  }

  test('a TypedStruct naming a type this build has no descriptor for is left to the extension reader', () => {
    const any = { type_url: TYPED_STRUCTS[1], value: encode(TYPED_STRUCTS[1], { type_url: 'type.googleapis.com/io.example.Unknown', value: structPlain({ anything: 1 }) }) };
    const json = decodeResource(listenerWith(any));
    assert.equal((((json.filter_chains as Json[])[0].filters as Json[])[0].typed_config as Json).type_url, 'type.googleapis.com/io.example.Unknown');
  });

  test('the control plane side (encode.ts) refuses the same misspelling before it goes on the wire', () => {
    const json = {
      '@type': LISTENER, name: 'l1', filter_chains: [{ filters: [{ name: 'hcm', typed_config: { '@type': TYPED_STRUCTS[1], type_url: HCM, value: { stat_prefix: 'x', stream_idle_timout: '1s' } } }] }],
    };
    assert.throws(() => encodeResource(json, 'resources[0]'), (e: unknown) => {
      assert.ok(e instanceof XdsEncodeError);
      assert.equal(e.message, `resources[0].${TC}.value.stream_idle_timout: unknown field of ${HCM_NAME}`);
      return true;
    });
  });
});

describe('unknown binary field numbers (a newer control plane): Envoy\'s dynamic validation policy', () => {
  afterEach(() => setUnknownFieldPolicy({ mode: 'warn' }));
  const cluster = (): { type_url: string; value: Uint8Array } => ({ type_url: CLUSTER, value: withUnknownField(encode(CLUSTER, { name: 'c1', connect_timeout: { seconds: '2' } }), 1000) });
  const nested = (): { type_url: string; value: Uint8Array } => listenerWith({ type_url: HCM, value: withUnknownField(encode(HCM, { stat_prefix: 'x' }), 1001) });

  test('warn (the default): decoded without the field, each one reported with its path and number', () => {
    const seen: string[] = [];
    setUnknownFieldPolicy({ mode: 'warn', onUnknown: (p, type, n) => seen.push(`${p}|${type}|${n}`) });
    assert.deepEqual(decodeResource(cluster()), { '@type': CLUSTER, name: 'c1', connect_timeout: '2s' });
    const l = decodeResource(nested());
    assert.equal(((((l.filter_chains as Json[])[0].filters as Json[])[0].typed_config as Json).stat_prefix), 'x');
    assert.deepEqual(seen, ['|envoy.config.cluster.v3.Cluster|1000', `${TC}|${HCM_NAME}|1001`]);
  });

  test('reject (--reject-unknown-dynamic-fields): a decode error naming the path and the number', () => {
    setUnknownFieldPolicy({ mode: 'reject' });
    assert.throws(() => decodeResource(cluster()), /^XdsDecodeError: unknown field number 1000 of envoy\.config\.cluster\.v3\.Cluster$/);
    assert.throws(() => decodeResource(nested()), (e: unknown) => {
      assert.ok(e instanceof XdsDecodeError);
      assert.equal(e.message, `${TC}: unknown field number 1001 of ${HCM_NAME}`);
      return true;
    });
  });

  test('ignore (--ignore-unknown-dynamic-fields): neither reported nor rejected', () => {
    let calls = 0;
    setUnknownFieldPolicy({ mode: 'ignore', onUnknown: () => { calls++; } });
    assert.equal(decodeResource(cluster()).name, 'c1');
    assert.equal(decodeResource(nested()).name, 'l1');
    assert.equal(calls, 0);
  });
});
