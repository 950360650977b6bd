// Listener.filter_chain_matcher compiled from Envoy JSON: the inputs and matcher forms the end-to-end
// test (test/listener-matcher.test.ts) does not reach with loopback traffic, and the config errors.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { compileListener } from '../src/listener/config.ts';
import type { ConnectionFacts } from '../src/listener/filter-chain-match.ts';

type Json = Record<string, unknown>;
const NET = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.';
const input = (kind: string): Json => ({ name: kind, typed_config: { '@type': NET + kind } });
const action = (name: string): Json => ({ action: { name, typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: name } } });
const tcp = (name: string): Json => ({
  name,
  filters: [{ name: 'tcp', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: 'tcp', cluster: 'c' } }],
});

function listen(matcher: Json, names = ['a', 'b', 'c'], extra: Json = {}): (f: Partial<ConnectionFacts>) => string | undefined {
  const l = compileListener(new Msg({
    name: 'l', address: { socket_address: { address: '0.0.0.0', port_value: 1 } },
    filter_chains: names.map(tcp), filter_chain_matcher: matcher, ...extra,
  }, 'listener'), 0);
  return (over) => l.chains.select({
    destinationIp: '10.0.0.1', destinationPort: 80, directSourceIp: '10.1.0.1', sourceIp: '10.1.0.1', sourcePort: 5000,
    serverName: '', transportProtocol: '', applicationProtocols: [], ...over,
  })?.name;
}

describe('filter_chain_matcher', () => {
  test('prefix_match_map: longest prefix first, shorter when the nested matcher fails', () => {
    const sel = listen({
      matcher_tree: {
        input: input('ServerNameInput'),
        prefix_match_map: { map: {
          'api.': { matcher: { matcher_tree: { input: input('DestinationPortInput'), exact_match_map: { map: { 443: action('a') } } } } },
          'ap': action('b'),
        } },
      },
      on_no_match: action('c'),
    });
    assert.equal(sel({ serverName: 'api.x', destinationPort: 443 }), 'a');
    assert.equal(sel({ serverName: 'api.x', destinationPort: 80 }), 'b');
    assert.equal(sel({ serverName: 'apex' }), 'b');
    assert.equal(sel({ serverName: 'www' }), 'c');
    assert.equal(sel({}), 'c', 'no SNI: the input has no value');
  });

  test('matcher_list: or / not predicates over source IP, source port, direct source IP and source type; the first match wins', () => {
    const sel = listen({
      matcher_list: { matchers: [
        { predicate: { or_matcher: { predicate: [
          { single_predicate: { input: input('SourceIPInput'), value_match: { prefix: '192.168.' } } },
          { single_predicate: { input: input('SourcePortInput'), value_match: { exact: '7777' } } },
        ] } }, on_match: action('a') },
        { predicate: { single_predicate: { input: input('SourceTypeInput'), value_match: { exact: 'local' } } }, on_match: action('b') },
        { predicate: { not_matcher: { single_predicate: { input: input('DirectSourceIPInput'), value_match: { exact: '10.1.0.1' } } } }, on_match: action('c') },
      ] },
    });
    assert.equal(sel({ sourceIp: '192.168.1.1' }), 'a');
    assert.equal(sel({ sourcePort: 7777 }), 'a');
    assert.equal(sel({ sourceIp: '127.0.0.1' }), 'b');
    assert.equal(sel({ sourceIp: '10.0.0.1' }), 'b', 'same IP as the destination is local');
    assert.equal(sel({ directSourceIp: '10.9.9.9' }), 'c');
    assert.equal(sel({}), undefined, 'no match and no default chain: closed');
  });

  test('application protocols are single-quoted and comma-joined, as Envoy writes them; filter_chain_match is ignored', () => {
    const sel = listen({
      matcher_tree: { input: input('ApplicationProtocolInput'), exact_match_map: { map: { "'h2','http/1.1'": action('a'), "'h2'": action('b') } } },
    }, ['a', 'b', 'c']);
    assert.equal(sel({ applicationProtocols: ['h2', 'http/1.1'] }), 'a');
    assert.equal(sel({ applicationProtocols: ['h2'] }), 'b');
    assert.equal(sel({ applicationProtocols: [] }), undefined);
  });

  test('the default chain serves when the matcher does not match or names a missing chain', () => {
    const sel = listen({ matcher_tree: { input: input('DestinationPortInput'), exact_match_map: { map: { 80: action('gone'), 81: action('a') } } } },
      ['a'], { default_filter_chain: tcp('dflt') });
    assert.equal(sel({ destinationPort: 81 }), 'a');
    assert.equal(sel({ destinationPort: 80 }), 'dflt');
    assert.equal(sel({ destinationPort: 82 }), 'dflt');
  });

  test('config errors name the field', () => {
    const tree = { matcher_tree: { input: input('DestinationPortInput'), exact_match_map: { map: { 80: action('a') } } } };
    assert.throws(() => listen(tree, ['a', 'a']), /filter_chains\[1\]\.name: filter chain name "a" is not unique/);
    assert.throws(() => listen(tree, ['a', '']), /filter_chains\[1\]\.name: filter chains must be named/);
    assert.throws(() => listen({ matcher_tree: { input: { name: 'x', typed_config: { '@type': 'type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput', header_name: 'x' } }, exact_match_map: { map: { 80: action('a') } } } }),
      /filter_chain_matcher\.matcher_tree\.input\.typed_config: a filter chain matcher cannot match on input type\.googleapis\.com\/envoy\.type\.matcher\.v3\.HttpRequestHeaderMatchInput/);
    assert.throws(() => listen({ matcher_tree: { input: input('DestinationPortInput'), exact_match_map: { map: { 80: { action: { name: 'a', typed_config: { '@type': 'type.googleapis.com/google.protobuf.BoolValue', value: true } } } } } } }),
      /filter_chain_matcher\.matcher_tree\.exact_match_map\.map\.80\.action\.typed_config: a filter chain matcher's action must be a type\.googleapis\.com\/google\.protobuf\.StringValue/);
    assert.throws(() => listen({ matcher_tree: { input: input('DestinationIPInput'), custom_match: { name: 'ip', typed_config: { '@type': 'type.googleapis.com/xds.type.matcher.v3.IPMatcher', range_matchers: [{ ranges: [{ address_prefix: '10.0.0.300', prefix_len: 32 }], on_match: action('a') }] } } } }),
      /range_matchers\[0\]\.ranges\[0\]\.address_prefix: malformed IP address "10\.0\.0\.300"/);
    assert.throws(() => listen({ matcher_tree: { input: input('DestinationPortInput') } }), /filter_chain_matcher\.matcher_tree: exactly one of exact_match_map, prefix_match_map, custom_match is required/);
    assert.throws(() => listen({ matcher_tree: { input: input('DestinationPortInput'), exact_match_map: { map: { 80: { ...action('a'), keep_matching: true } } } } }), /keep_matching: is not supported/);
  });
});
