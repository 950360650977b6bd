import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileFilterChainMatcher, type ConnectionFacts, type FilterChainEntry } from '../src/listener/filter-chain-match.ts';

const CONFIG_DUMP = new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/authz/testdata/configdump.yaml', import.meta.url);

function facts(over: Partial<ConnectionFacts> = {}): ConnectionFacts {
  return {
    destinationIp: '10.0.0.1',
    destinationPort: 8080,
    directSourceIp: '10.0.0.2',
    sourceIp: '10.0.0.2',
    sourcePort: 40000,
    serverName: '',
    transportProtocol: 'raw_buffer',
    applicationProtocols: [],
    ...over,
  };
}

/** Chains named by the keys of `matches`; the selected chain's name is the value. */
function matcher(matches: Record<string, object | undefined>, fallback?: string) {
  const chains: FilterChainEntry<string>[] = Object.entries(matches).map(([name, m], i) => ({
    name,
    value: name,
    match: m === undefined ? undefined : new Msg(m, `filter_chains[${i}].filter_chain_match`),
  }));
  return compileFilterChainMatcher(chains, fallback);
}

type Case = [what: string, over: Partial<ConnectionFacts>, want: string | undefined];

function table(matches: Record<string, object | undefined>, cases: Case[], fallback?: string): void {
  const m = matcher(matches, fallback);
  for (const [what, over, want] of cases) {
    test(what, () => assert.equal(m.select(facts(over)), want));
  }
}

describe('no chains', () => {
  test('default chain or nothing', () => {
    assert.equal(matcher({}, 'default').select(facts()), 'default');
    assert.equal(matcher({}).select(facts()), undefined);
  });
  test('a chain without match takes everything', () => {
    assert.equal(matcher({ all: undefined }, 'default').select(facts({ sourceIp: '' })), 'all');
    assert.equal(matcher({ all: {} }).select(facts({ destinationPort: 1 })), 'all');
  });
});

describe('destination_port', () => {
  table({ p80: { destination_port: 80 }, p443: { destination_port: { value: 443 } }, rest: {} }, [
    ['exact port', { destinationPort: 80 }, 'p80'],
    ['port as wrapper', { destinationPort: 443 }, 'p443'],
    ['other port falls to the portless chain', { destinationPort: 8080 }, 'rest'],
  ]);
  describe('no backtracking from a port subtree', () => {
    table({ p80tls: { destination_port: 80, transport_protocol: 'tls' }, rest: {} }, [
      ['port 80 tls', { destinationPort: 80, transportProtocol: 'tls' }, 'p80tls'],
      ['port 80 plain text does not fall back to the portless chain', { destinationPort: 80 }, 'default'],
      ['port 81 plain text', { destinationPort: 81 }, 'rest'],
    ], 'default');
  });
});

describe('prefix_ranges (destination IP)', () => {
  table({
    wide: { prefix_ranges: [{ address_prefix: '10.0.0.0', prefix_len: 8 }] },
    narrow: { prefix_ranges: [{ address_prefix: '10.1.0.0', prefix_len: 16 }, { address_prefix: '192.168.0.0', prefix_len: 16 }] },
    host: { prefix_ranges: [{ address_prefix: '10.1.2.3', prefix_len: 32 }] },
    v6: { prefix_ranges: [{ address_prefix: '2001:db8::', prefix_len: 32 }] },
    any: {},
  }, [
    ['longest prefix: host', { destinationIp: '10.1.2.3' }, 'host'],
    ['longest prefix: /16', { destinationIp: '10.1.9.9' }, 'narrow'],
    ['second range of a chain', { destinationIp: '192.168.3.4' }, 'narrow'],
    ['longest prefix: /8', { destinationIp: '10.200.0.1' }, 'wide'],
    ['IPv4-mapped destination', { destinationIp: '::ffff:10.1.2.3' }, 'host'],
    ['IPv6', { destinationIp: '2001:db8:1::1' }, 'v6'],
    ['no range matches: chain without ranges', { destinationIp: '172.16.0.1' }, 'any'],
    ['non-IP destination (unix socket)', { destinationIp: '' }, 'any'],
  ]);
  describe('explicit catch-all', () => {
    table({ v4all: { prefix_ranges: [{ address_prefix: '0.0.0.0', prefix_len: 0 }] } }, [
      ['IPv4 matches 0.0.0.0/0', { destinationIp: '1.2.3.4' }, 'v4all'],
      ['IPv6 does not', { destinationIp: '2001:db8::1' }, undefined],
      ['non-IP matches as 255.255.255.255, like Envoy', { destinationIp: '' }, 'v4all'],
    ]);
  });
});

describe('server_names', () => {
  table({
    exact: { server_names: ['www.example.com'] },
    wild: { server_names: ['*.example.com'] },
    wildLonger: { server_names: ['*.api.example.com'] },
    tld: { server_names: ['*.com'] },
    upper: { server_names: ['Mixed.Example.ORG'] },
    none: {},
  }, [
    ['exact beats wildcards', { serverName: 'www.example.com' }, 'exact'],
    ['wildcard', { serverName: 'foo.example.com' }, 'wild'],
    ['wildcard covers deeper names', { serverName: 'a.b.example.com' }, 'wild'],
    ['longer wildcard beats shorter', { serverName: 'v1.api.example.com' }, 'wildLonger'],
    ['shortest wildcard', { serverName: 'other.com' }, 'tld'],
    ['the bare domain is not covered by its wildcard', { serverName: 'example.com' }, 'tld'],
    ['config names are lower-cased', { serverName: 'mixed.example.org' }, 'upper'],
    ['no match: chain without names', { serverName: 'example.net' }, 'none'],
    ['no SNI: chain without names', { serverName: '' }, 'none'],
  ]);
  describe('without a catch-all', () => {
    table({ exact: { server_names: ['a.example.com', 'b.example.com'] } }, [
      ['first name', { serverName: 'a.example.com' }, 'exact'],
      ['second name', { serverName: 'b.example.com' }, 'exact'],
      ['no SNI', { serverName: '' }, 'default'],
    ], 'default');
  });
});

describe('transport_protocol', () => {
  table({ tls: { transport_protocol: 'tls' }, raw: { transport_protocol: 'raw_buffer' } }, [
    ['tls', { transportProtocol: 'tls' }, 'tls'],
    ['raw_buffer', { transportProtocol: 'raw_buffer' }, 'raw'],
    ['no inspector ran: raw_buffer, as Envoy defaults it', { transportProtocol: '' }, 'raw'],
    ['unknown', { transportProtocol: 'quic' }, undefined],
  ]);
});

describe('application_protocols', () => {
  table({ h2: { application_protocols: ['h2'] }, h1: { application_protocols: ['http/1.1', 'http/1.0'] }, other: {} }, [
    ['h2', { applicationProtocols: ['h2'] }, 'h2'],
    ['the client\'s first known protocol decides', { applicationProtocols: ['http/1.1', 'h2'] }, 'h1'],
    ['unknown protocols are skipped', { applicationProtocols: ['spdy/3', 'h2'] }, 'h2'],
    ['second value of a chain', { applicationProtocols: ['http/1.0'] }, 'h1'],
    ['none matches', { applicationProtocols: ['xmpp'] }, 'other'],
    ['no ALPN', { applicationProtocols: [] }, 'other'],
  ]);
});

describe('direct_source_prefix_ranges', () => {
  table({
    lb: { direct_source_prefix_ranges: [{ address_prefix: '192.168.0.0', prefix_len: 16 }] },
    other: {},
  }, [
    ['direct peer in range (even if PROXY protocol changed the source)', { directSourceIp: '192.168.1.1', sourceIp: '8.8.8.8' }, 'lb'],
    ['direct peer outside', { directSourceIp: '10.0.0.1', sourceIp: '192.168.1.1' }, 'other'],
  ]);
});

describe('source_type', () => {
  table({ local: { source_type: 'SAME_IP_OR_LOOPBACK' }, external: { source_type: 2 }, any: { source_type: 'ANY' } }, [
    ['loopback peer', { sourceIp: '127.0.0.1', destinationIp: '127.0.0.1' }, 'local'],
    ['IPv6 loopback peer', { sourceIp: '::1', destinationIp: '2001:db8::1' }, 'local'],
    ['peer with our own IP', { sourceIp: '10.0.0.1', destinationIp: '::ffff:10.0.0.1' }, 'local'],
    ['external peer', { sourceIp: '10.0.0.9', destinationIp: '10.0.0.1' }, 'external'],
  ]);
  describe('falls back to ANY only when the type has no chains', () => {
    table({ local: { source_type: 'SAME_IP_OR_LOOPBACK' }, any: {} }, [
      ['local', { sourceIp: '127.0.0.1' }, 'local'],
      ['external', { sourceIp: '10.9.9.9' }, 'any'],
    ]);
    table({ localSrc: { source_type: 'SAME_IP_OR_LOOPBACK', source_ports: [1234] }, any: {} }, [
      ['local peer on another port: no backtracking to ANY', { sourceIp: '127.0.0.1', sourcePort: 999 }, 'default'],
    ], 'default');
  });
});

describe('source_prefix_ranges and source_ports', () => {
  table({
    net: { source_prefix_ranges: [{ address_prefix: '10.0.0.0', prefix_len: 8 }] },
    netPort: { source_prefix_ranges: [{ address_prefix: '10.0.0.0', prefix_len: 8 }], source_ports: [5000, '5001'] },
    host: { source_prefix_ranges: [{ address_prefix: '10.1.1.1', prefix_len: 32 }] },
    port: { source_ports: [7000] },
  }, [
    ['network', { sourceIp: '10.2.2.2', sourcePort: 1 }, 'net'],
    ['network and port', { sourceIp: '10.2.2.2', sourcePort: 5001 }, 'netPort'],
    ['host beats network even when the network names the port', { sourceIp: '10.1.1.1', sourcePort: 5000 }, 'host'],
    ['no source range: port only', { sourceIp: '172.16.0.1', sourcePort: 7000 }, 'port'],
    ['nothing', { sourceIp: '172.16.0.1', sourcePort: 7001 }, undefined],
  ]);
});

describe('level order: an earlier level decides first, without backtracking', () => {
  table({
    sni: { server_names: ['a.example.com'], transport_protocol: 'tls' },
    plain: { transport_protocol: 'raw_buffer' },
    ip: { prefix_ranges: [{ address_prefix: '10.9.0.0', prefix_len: 16 }], application_protocols: ['h2'] },
  }, [
    ['SNI chain', { serverName: 'a.example.com', transportProtocol: 'tls' }, 'sni'],
    ['SNI matched but transport did not: default, not "plain"', { serverName: 'a.example.com' }, 'default'],
    ['no SNI: plain', {}, 'plain'],
    ['destination range decides before SNI', { destinationIp: '10.9.1.1', serverName: 'a.example.com', applicationProtocols: ['h2'] }, 'ip'],
    ['destination range matched but ALPN did not', { destinationIp: '10.9.1.1' }, 'default'],
  ], 'default');
});

describe('Istio-style inbound chains', () => {
  const any4 = [{ address_prefix: '0.0.0.0', prefix_len: 0 }];
  table({
    blackhole: { destination_port: 15006 },
    'p9080-mtls-tcp': { destination_port: 9080, transport_protocol: 'tls', application_protocols: ['istio-peer-exchange', 'istio'] },
    'p9080-mtls-http': { destination_port: 9080, transport_protocol: 'tls', application_protocols: ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'] },
    'p9080-http': { destination_port: 9080, transport_protocol: 'raw_buffer', application_protocols: ['http/1.1', 'h2c'] },
    'p9080-tcp': { destination_port: 9080, transport_protocol: 'raw_buffer' },
    'p9080-tls': { destination_port: 9080, transport_protocol: 'tls' },
    'catchall-mtls-http': { prefix_ranges: any4, transport_protocol: 'tls', application_protocols: ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'] },
    'catchall-mtls-tcp': { prefix_ranges: any4, transport_protocol: 'tls', application_protocols: ['istio-peer-exchange', 'istio'] },
    'catchall-http': { prefix_ranges: any4, transport_protocol: 'raw_buffer', application_protocols: ['http/1.1', 'h2c'] },
    'catchall-tcp': { prefix_ranges: any4, transport_protocol: 'raw_buffer' },
  }, [
    ['request to the inbound port itself', { destinationPort: 15006 }, 'blackhole'],
    ['mTLS from a sidecar, TCP', { destinationPort: 9080, transportProtocol: 'tls', applicationProtocols: ['istio-peer-exchange', 'istio'] }, 'p9080-mtls-tcp'],
    ['mTLS from a sidecar, HTTP/2', { destinationPort: 9080, transportProtocol: 'tls', applicationProtocols: ['istio-h2', 'istio'] }, 'p9080-mtls-http'],
    ['plain-text HTTP (http_inspector)', { destinationPort: 9080, applicationProtocols: ['http/1.1'] }, 'p9080-http'],
    ['plain-text h2c', { destinationPort: 9080, applicationProtocols: ['h2c'] }, 'p9080-http'],
    ['plain-text TCP', { destinationPort: 9080 }, 'p9080-tcp'],
    ['application TLS, passthrough', { destinationPort: 9080, transportProtocol: 'tls', applicationProtocols: ['h2'] }, 'p9080-tls'],
    ['other port, mTLS HTTP', { destinationPort: 7070, transportProtocol: 'tls', applicationProtocols: ['istio-http/1.1'] }, 'catchall-mtls-http'],
    ['other port, plain HTTP', { destinationPort: 7070, applicationProtocols: ['h2c'] }, 'catchall-http'],
    ['other port, plain TCP', { destinationPort: 7070 }, 'catchall-tcp'],
    ['other port, application TLS: no chain', { destinationPort: 7070, transportProtocol: 'tls' }, undefined],
    ['other port, IPv6 destination: 0.0.0.0/0 does not cover it', { destinationPort: 7070, destinationIp: 'fd00::1' }, undefined],
  ]);
});

describe('config errors', () => {
  const fails = (matches: Record<string, object | undefined>, path: string, message: RegExp) =>
    assert.throws(() => matcher(matches), (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.equal(e.path, path);
      assert.match(e.message, message);
      return true;
    });

  test('identical matches name both chains', () => {
    fails({ first: { destination_port: 80 }, second: { destination_port: 80 } }, 'filter_chains[1].filter_chain_match',
      /'second' \(filter_chains\[1\]\) has the same matching rules defined as 'first' \(filter_chains\[0\]\).*multiple filter chains with the same matching rules are defined/);
    fails({ a: {}, b: {} }, 'filter_chains[1].filter_chain_match', /same matching rules/);
    fails({ a: { server_names: ['x.com', 'y.com'] }, b: { server_names: ['y.com', 'x.com'] } }, 'filter_chains[1].filter_chain_match', /same matching rules/);
    assert.throws(() => compileFilterChainMatcher([{ match: undefined, value: 1 }, { match: undefined, value: 2 }], undefined),
      /filter_chains\[1\] has the same matching rules defined as filter_chains\[0\]/);
  });

  test('overlapping matches', () => {
    fails({ a: { server_names: ['x.com', 'y.com'] }, b: { server_names: ['y.com', 'z.com'] } }, 'filter_chains[1].filter_chain_match',
      /'b' \(filter_chains\[1\]\) overlaps 'a'.*overlapping matching rules/);
    fails({ a: { prefix_ranges: [{ address_prefix: '10.0.0.1', prefix_len: 8 }] }, b: { prefix_ranges: [{ address_prefix: '10.2.0.0', prefix_len: 8 }], source_ports: [] } },
      'filter_chains[1].filter_chain_match', /same matching rules/);
    fails({ a: { application_protocols: ['h2', 'h2'] } }, 'filter_chains[0].filter_chain_match', /lists the same value twice/);
  });

  test('different matches do not conflict', () => {
    matcher({ a: { destination_port: 80 }, b: { destination_port: 81 }, c: {}, d: { server_names: ['*.x.com'] }, e: { server_names: ['x.com'] } });
  });

  test('bad values name the field', () => {
    fails({ a: { server_names: ['ok.com', '*w.example.com'] } }, 'filter_chains[0].filter_chain_match.server_names[1]', /partial wildcards/);
    fails({ a: { server_names: ['*'] } }, 'filter_chains[0].filter_chain_match.server_names[0]', /partial wildcards/);
    fails({ a: { destination_port: 0 } }, 'filter_chains[0].filter_chain_match.destination_port', /port/);
    fails({ a: { destination_port: 70000 } }, 'filter_chains[0].filter_chain_match.destination_port', /port/);
    fails({ a: { source_ports: [80, 'x'] } }, 'filter_chains[0].filter_chain_match.source_ports[1]', /port/);
    fails({ a: { prefix_ranges: [{ address_prefix: '10.0.0.256', prefix_len: 8 }] } }, 'filter_chains[0].filter_chain_match.prefix_ranges[0].address_prefix', /malformed IP/);
    fails({ a: { source_prefix_ranges: [{ address_prefix: '10.0.0.0', prefix_len: 40 }] } }, 'filter_chains[0].filter_chain_match.source_prefix_ranges[0].prefix_len', /\[0, 32\]/);
    fails({ a: { source_type: 'LOCAL' } }, 'filter_chains[0].filter_chain_match.source_type', /unknown value/);
    fails({ a: { sni_domains: ['x'] } }, 'filter_chains[0].filter_chain_match.sni_domains', /not supported/);
    fails({ a: { address_suffix: '::1' } }, 'filter_chains[0].filter_chain_match.address_suffix', /not supported/);
  });
});

describe('the istioctl sidecar config dump', () => {
  const dump = JSON.parse(readFileSync(CONFIG_DUMP, 'utf8'));
  const ci = dump.configs.findIndex((c: { '@type': string }) => c['@type'].endsWith('ListenersConfigDump'));
  const listeners = new Map<string, ReturnType<typeof compileFilterChainMatcher<string>>>();
  dump.configs[ci].dynamic_listeners.forEach((dl: any, li: number) => {
    const l = dl.active_state.listener;
    const base = `configs[${ci}].dynamic_listeners[${li}].active_state.listener`;
    const chains = (l.filter_chains ?? []).map((fc: any, i: number) => ({
      name: fc.name,
      value: `${i}:${fc.name ?? ''}`,
      match: fc.filter_chain_match ? new Msg(fc.filter_chain_match, `${base}.filter_chains[${i}].filter_chain_match`) : undefined,
    }));
    listeners.set(l.name, compileFilterChainMatcher(chains, l.default_filter_chain ? 'default' : undefined));
  });

  test('every listener compiles', () => {
    assert.equal(listeners.size, dump.configs[ci].dynamic_listeners.length);
    assert.ok(listeners.size >= 20);
  });

  test('virtualInbound', () => {
    const m = listeners.get('virtualInbound')!;
    const pod = { destinationIp: '10.244.0.12' };
    assert.equal(m.select(facts({ ...pod, destinationPort: 15006 })), '0:virtualInbound-blackhole');
    assert.equal(m.select(facts({ ...pod, transportProtocol: 'tls', applicationProtocols: ['istio-http/1.1'] })), '1:virtualInbound-catchall-http');
    assert.equal(m.select(facts({ ...pod, applicationProtocols: ['http/1.1'] })), '2:virtualInbound-catchall-http');
    assert.equal(m.select(facts({ ...pod, transportProtocol: 'tls', applicationProtocols: ['istio-peer-exchange', 'istio'] })), '3:virtualInbound');
    assert.equal(m.select(facts({ ...pod })), '4:virtualInbound');
    assert.equal(m.select(facts({ ...pod, transportProtocol: 'tls', applicationProtocols: ['h2'] })), '5:virtualInbound');
    assert.equal(m.select(facts({ destinationIp: '::ffff:10.244.0.12', transportProtocol: 'tls' })), '5:virtualInbound');
    // Port 80 has its own subtree: mTLS with Istio ALPN, or plain text of any kind.
    assert.equal(m.select(facts({ ...pod, destinationPort: 80, transportProtocol: 'tls', applicationProtocols: ['istio-h2'] })), '6:0.0.0.0_80');
    assert.equal(m.select(facts({ ...pod, destinationPort: 80, applicationProtocols: ['http/1.1'] })), '7:0.0.0.0_80');
    assert.equal(m.select(facts({ ...pod, destinationPort: 80, transportProtocol: 'tls', applicationProtocols: ['h2'] })), undefined);
    // 0.0.0.0/0 does not cover IPv6; this single-stack dump has no ::/0 chain.
    assert.equal(m.select(facts({ destinationIp: 'fd00::12' })), undefined);
  });

  test('virtualOutbound', () => {
    const m = listeners.get('virtualOutbound')!;
    assert.equal(m.select(facts({ destinationPort: 15001 })), '0:virtualOutbound-blackhole');
    assert.equal(m.select(facts({ destinationPort: 3306, destinationIp: '10.96.5.5' })), '1:virtualOutbound-catchall-tcp');
  });

  test('outbound HTTP listener with a default chain', () => {
    const m = listeners.get('0.0.0.0_9080')!;
    assert.equal(m.select(facts({ destinationPort: 9080, applicationProtocols: ['h2c'] })), '0:');
    assert.equal(m.select(facts({ destinationPort: 9080 })), 'default');
    assert.equal(m.select(facts({ destinationPort: 9080, transportProtocol: 'tls', applicationProtocols: ['http/1.1'] })), 'default');
  });

  test('outbound TCP listener with one chain', () => {
    const m = listeners.get('10.96.0.1_443')!;
    assert.equal(m.select(facts({ destinationIp: '10.96.0.1', destinationPort: 443, transportProtocol: 'tls' })), '0:');
  });
});
