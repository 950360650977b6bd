import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { compileFilterDisabled } from '../src/listener/filter-disabled.ts';
import { compileListener } from '../src/listener/config.ts';
import { ConfigError } from '../src/core/errors.ts';

const pred = (raw: unknown) => compileFilterDisabled(new Msg(raw, 'filter_disabled'));

test('destination_port_range is [start, end)', () => {
  const p = pred({ destination_port_range: { start: 15006, end: 15007 } });
  assert.equal(p(15006), true);
  assert.equal(p(15007), false);
  assert.equal(p(80), false);
});

test('or / and / not / any as istiod writes them', () => {
  const or = pred({ or_match: { rules: [{ destination_port_range: { start: 80, end: 81 } }, { destination_port_range: { start: 15006, end: 15007 } }] } });
  assert.deepEqual([80, 81, 15006, 9080].map(or), [true, false, true, false]);
  const and = pred({ and_match: { rules: [{ destination_port_range: { start: 1, end: 100 } }, { not_match: { destination_port_range: { start: 50, end: 60 } } }] } });
  assert.deepEqual([10, 55, 100].map(and), [true, false, false]);
  assert.equal(pred({ any_match: true })(1), true);
  assert.equal(pred({ any_match: false })(1), false);
});

test('a bad range or an empty predicate is refused with its path', () => {
  assert.throws(() => pred({ destination_port_range: { start: 10, end: 10 } }), (e: unknown) => e instanceof ConfigError && e.path === 'filter_disabled.destination_port_range.end');
  assert.throws(() => pred({}), ConfigError);
});

test("virtualInbound's listener filters compile, with the inspectors disabled on their ports", () => {
  const l = compileListener(new Msg({
    name: 'virtualInbound',
    address: { socket_address: { address: '0.0.0.0', port_value: 15006 } },
    listener_filters: [
      { name: 'envoy.filters.listener.original_dst', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst' } },
      { name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector' },
        filter_disabled: { destination_port_range: { start: 15006, end: 15007 } } },
      { name: 'envoy.filters.listener.http_inspector', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector' },
        filter_disabled: { or_match: { rules: [{ destination_port_range: { start: 80, end: 81 } }, { destination_port_range: { start: 15006, end: 15007 } }] } } },
    ],
    filter_chains: [{ filters: [{ name: 'tcp', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: 't', cluster: 'c' } }] }],
  }, 'listener'), 0);
  assert.equal(l.tlsInspector?.(15006), true);
  assert.equal(l.tlsInspector?.(9080), false);
  assert.equal(l.httpInspector?.(80), true);
  assert.equal(l.httpInspector?.(9080), false);
});

test('a TypedStruct network filter is refused naming the wrapped extension', () => {
  assert.throws(() => compileListener(new Msg({
    name: 'l', address: { socket_address: { address: '0.0.0.0', port_value: 1 } },
    filter_chains: [{ filters: [{ name: 'authn', typed_config: { '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct', type_url: 'type.googleapis.com/example.network.v1.NotAFilter', value: {} } }] }],
  }, 'listener'), 0), /example\.network\.v1\.NotAFilter \(in type\.googleapis\.com\/udpa\.type\.v1\.TypedStruct\)/);
});
