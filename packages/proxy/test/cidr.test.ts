import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import {
  CidrTable,
  contains,
  formatWords,
  isIp,
  isLoopback,
  parseCidrRange,
  parseCidrText,
  parseIpInto,
  sameIp,
  type CidrRange,
} from '../src/core/cidr.ts';

const range = (text: string): CidrRange => parseCidrText(text, 'test');
const canonical = (ip: string): string | undefined => {
  const out = new Uint32Array(4);
  const f = parseIpInto(ip, out);
  return f === 0 ? undefined : `v${f} ${formatWords(f, out)}`;
};

describe('parseIpInto', () => {
  const cases: [string, string | undefined][] = [
    ['1.2.3.4', 'v4 1.2.3.4'],
    ['0.0.0.0', 'v4 0.0.0.0'],
    ['255.255.255.255', 'v4 255.255.255.255'],
    ['::', 'v6 ::'],
    ['::1', 'v6 ::1'],
    ['1::', 'v6 1::'],
    ['2001:DB8::1', 'v6 2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', 'v6 2001:db8::1:0:0:1'],
    ['1:2:3:4:5:6:7:8', 'v6 1:2:3:4:5:6:7:8'],
    ['1:2:3:4:5:6:7::', 'v6 1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', 'v6 0:2:3:4:5:6:7:8'],
    ['fe80::1%eth0', 'v6 fe80::1'],
    ['::ffff:10.1.2.3', 'v4 10.1.2.3'],
    ['::FFFF:a01:203', 'v4 10.1.2.3'],
    ['0:0:0:0:0:ffff:127.0.0.1', 'v4 127.0.0.1'],
    ['64:ff9b::1.2.3.4', 'v6 64:ff9b::102:304'],
    ['', undefined],
    ['1.2.3', undefined],
    ['1.2.3.4.5', undefined],
    ['01.2.3.4', undefined],
    ['1.2.3.256', undefined],
    ['1.2.3.4 ', undefined],
    ['1..2.3', undefined],
    ['1.2.3.4%eth0', undefined],
    ['1:2:3:4:5:6:7:8:9', undefined],
    ['1:2:3:4:5:6:7:8::', undefined],
    ['1::2::3', undefined],
    [':1', undefined],
    ['1:', undefined],
    [':::', undefined],
    ['12345::', undefined],
    ['g::', undefined],
    ['::1.2.3', undefined],
    ['1:2:3:4:5:6:7:1.2.3.4', undefined],
    ['localhost', undefined],
  ];
  for (const [ip, want] of cases) {
    test(JSON.stringify(ip), () => assert.equal(canonical(ip), want));
  }
  test('isIp', () => {
    assert.equal(isIp('10.0.0.1'), true);
    assert.equal(isIp('::'), true);
    assert.equal(isIp(''), false);
    assert.equal(isIp('/tmp/sock'), false);
  });
});

describe('parseCidrRange (envoy.config.core.v3.CidrRange)', () => {
  const msg = (raw: unknown) => new Msg(raw, 'listener.filter_chain_match.prefix_ranges[0]');

  test('clears host bits and gives a canonical text', () => {
    const r = parseCidrRange(msg({ address_prefix: '10.1.2.3', prefix_len: 8 }));
    assert.equal(r.family, 4);
    assert.equal(r.prefixLen, 8);
    assert.equal(r.text, '10.0.0.0/8');
    assert.equal(parseCidrRange(msg({ address_prefix: '2001:db8:ffff::1', prefix_len: 33 })).text, '2001:db8:8000::/33');
  });

  test('prefix_len as a wrapper message or a string', () => {
    assert.equal(parseCidrRange(msg({ address_prefix: '10.1.2.3', prefix_len: { value: 24 } })).text, '10.1.2.0/24');
    assert.equal(parseCidrRange(msg({ address_prefix: '10.1.2.3', prefix_len: '16' })).text, '10.1.0.0/16');
  });

  test('unset prefix_len is 0, as Envoy documents', () => {
    const r = parseCidrRange(msg({ address_prefix: '10.1.2.3' }));
    assert.equal(r.text, '0.0.0.0/0');
    assert.equal(contains(r, '192.168.1.1'), true);
    assert.equal(contains(r, '::1'), false);
  });

  test('an IPv4-mapped prefix of /96 or more is an IPv4 range', () => {
    const r = parseCidrRange(msg({ address_prefix: '::ffff:10.0.0.0', prefix_len: 104 }));
    assert.equal(r.text, '10.0.0.0/8');
    assert.equal(contains(r, '10.9.8.7'), true);
    assert.equal(parseCidrRange(msg({ address_prefix: '::ffff:0.0.0.0', prefix_len: 80 })).text, '::/80');
  });

  test('invalid address names address_prefix', () => {
    for (const address_prefix of ['10.0.0', 'example.com', 'fe80::1%eth0', '10.0.0.0/8']) {
      assert.throws(() => parseCidrRange(msg({ address_prefix, prefix_len: 8 })), (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.path, 'listener.filter_chain_match.prefix_ranges[0].address_prefix');
        assert.match(e.message, /malformed IP address/);
        return true;
      });
    }
    assert.throws(() => parseCidrRange(msg({ prefix_len: 8 })), /address_prefix: is required/);
  });

  test('out-of-range prefix_len names prefix_len', () => {
    for (const [address_prefix, prefix_len] of [['10.0.0.0', 33], ['::', 129], ['10.0.0.0', -1], ['10.0.0.0', 1.5], ['::ffff:1.2.3.4', 129]] as const) {
      assert.throws(() => parseCidrRange(msg({ address_prefix, prefix_len })), (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.path, 'listener.filter_chain_match.prefix_ranges[0].prefix_len');
        return true;
      });
    }
  });

  test('parseCidrText', () => {
    assert.equal(range('10.0.0.1').text, '10.0.0.1/32');
    assert.equal(range('::1').text, '::1/128');
    assert.equal(range('::ffff:10.0.0.1').text, '10.0.0.1/32');
    for (const bad of ['10.0.0.0/33', '10.0.0.0/', '10.0.0.0/x', 'x/8', '::/129']) {
      assert.throws(() => range(bad), ConfigError);
    }
  });
});

describe('contains', () => {
  const cases: [string, string, boolean][] = [
    ['10.0.0.0/8', '10.255.255.255', true],
    ['10.0.0.0/8', '11.0.0.0', false],
    ['10.0.0.0/8', '::ffff:10.1.1.1', true],
    ['10.0.0.0/8', '::ffff:a01:101', true],
    ['10.0.0.0/8', '::a01:101', false],
    ['10.1.2.3/32', '10.1.2.3', true],
    ['10.1.2.3/32', '10.1.2.4', false],
    ['0.0.0.0/0', '1.2.3.4', true],
    ['0.0.0.0/0', '::1', false],
    ['::/0', '1.2.3.4', false],
    ['::/0', '2001:db8::1', true],
    ['192.168.0.0/23', '192.168.1.200', true],
    ['192.168.0.0/23', '192.168.2.0', false],
    ['2001:db8::/32', '2001:db8:ffff::1', true],
    ['2001:db8::/32', '2001:db9::', false],
    ['2001:db8::/48', '2001:db8:0:ffff::', true],
    ['2001:db8::/49', '2001:db8:0:8000::', false],
    ['fe80::/10', 'fe80::1%eth0', true],
    ['::1/128', '::1', true],
    ['::1/128', '::2', false],
    ['10.0.0.0/8', '', false],
    ['10.0.0.0/8', 'garbage', false],
  ];
  for (const [r, ip, want] of cases) {
    test(`${r} ∋ ${ip || "''"} = ${want}`, () => assert.equal(contains(range(r), ip), want));
  }
});

describe('CidrTable', () => {
  test('longest prefix wins, per family', () => {
    const t = new CidrTable([
      [range('0.0.0.0/0'), 'any4'],
      [range('10.0.0.0/8'), 'ten'],
      [range('10.1.0.0/16'), 'ten-one'],
      [range('10.1.2.3/32'), 'host'],
      [range('::/0'), 'any6'],
      [range('2001:db8::/32'), 'doc'],
      [range('2001:db8:1::/48'), 'doc1'],
    ]);
    assert.equal(t.size, 7);
    assert.equal(t.lookup('10.1.2.3'), 'host');
    assert.equal(t.lookup('10.1.2.4'), 'ten-one');
    assert.equal(t.lookup('10.2.0.0'), 'ten');
    assert.equal(t.lookup('11.0.0.0'), 'any4');
    assert.equal(t.lookup('::ffff:10.1.2.3'), 'host');
    assert.equal(t.lookup('2001:db8:1::5'), 'doc1');
    assert.equal(t.lookup('2001:db8:2::5'), 'doc');
    assert.equal(t.lookup('::1'), 'any6');
    assert.equal(t.lookup('not-an-ip'), undefined);
  });

  test('no match, empty table, and first of duplicates', () => {
    const t = new CidrTable([[range('10.0.0.0/8'), 1], [range('10.9.9.9/8'), 2]]);
    assert.equal(t.size, 1);
    assert.equal(t.lookup('10.0.0.1'), 1);
    assert.equal(t.lookup('192.168.0.1'), undefined);
    assert.equal(t.lookup('::1'), undefined);
    assert.equal(new CidrTable<number>([]).lookup('1.2.3.4'), undefined);
  });

  test('agrees with a brute-force scan on random ranges', () => {
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8);
    const v4 = () => `${rand() & 3}.${rand() & 7}.${rand() & 255}.${rand() & 255}`;
    const v6 = () => `2001:db8:${(rand() & 3).toString(16)}::${(rand() & 0xffff).toString(16)}`;
    const ranges: CidrRange[] = [];
    for (let i = 0; i < 300; i++) {
      ranges.push(i % 2 ? range(`${v4()}/${rand() % 33}`) : range(`${v6()}/${rand() % 129}`));
    }
    const t = new CidrTable(ranges.map((r) => [r, r] as const));
    for (let i = 0; i < 2000; i++) {
      const ip = i % 2 ? v4() : v6();
      let best: CidrRange | undefined;
      for (const r of ranges) {
        if (contains(r, ip) && (!best || r.prefixLen > best.prefixLen)) best = r;
      }
      assert.equal(t.lookup(ip)?.text, best?.text, ip);
    }
  });
});

describe('isLoopback / sameIp', () => {
  test('isLoopback', () => {
    assert.equal(isLoopback('127.0.0.1'), true);
    assert.equal(isLoopback('127.255.0.9'), true);
    assert.equal(isLoopback('::ffff:127.0.0.1'), true);
    assert.equal(isLoopback('::1'), true);
    assert.equal(isLoopback('128.0.0.1'), false);
    assert.equal(isLoopback('::2'), false);
    assert.equal(isLoopback(''), false);
  });
  test('sameIp ignores spelling', () => {
    assert.equal(sameIp('10.0.0.1', '::ffff:10.0.0.1'), true);
    assert.equal(sameIp('2001:db8::1', '2001:DB8:0::1'), true);
    assert.equal(sameIp('10.0.0.1', '10.0.0.2'), false);
    assert.equal(sameIp('::a00:1', '10.0.0.1'), false);
    assert.equal(sameIp('', ''), false);
  });
});
