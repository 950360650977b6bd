import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { Host } from '../src/upstream/host.ts';
import {
  compileHashLbConfig, HashLoadBalancer, isPrime, MaglevTable, mod64, murmurHash2, RingHash, xxHash64, xxHash64Into,
  type HashHost, type HashLbConfig,
} from '../src/upstream/lb-hash.ts';

// Expected values in this file are Envoy's own (source/common/common/hash tests, ring_hash_lb
// and maglev_lb tests) or were checked against the xxhsum tool; the LB must agree with Envoy
// so that a key lands on the same endpoint whichever proxy forwards it.

const RING: HashLbConfig = { policy: 'RING_HASH', minRingSize: 1024, maxRingSize: 8388608, hashFunction: 'XX_HASH', tableSize: 65537, useHostnameForHashing: false };
const MAGLEV: HashLbConfig = { ...RING, policy: 'MAGLEV' };
const U64_MAX = 2n ** 64n - 1n;

const local = (port: number, opts: { hostname?: string; weight?: number; priority?: number; healthy?: boolean } = {}): Host => new Host('127.0.0.1', port, opts);
const ports = (from: number, n: number, opts: { hostname?: boolean } = {}): Host[] =>
  Array.from({ length: n }, (_, i) => local(from + i, opts.hostname ? { hostname: String(from + i) } : {}));

/** A host with the optional locality fields the Host class does not carry. */
function lbHost(port: number, zone: string, weight: number, localityWeight: number): HashHost & { port: number } {
  return { port, hostPort: `127.0.0.1:${port}`, hostname: '', weight, priority: 0, zone, healthy: true, localityWeight };
}

/** mulberry32: a seeded PRNG so statistical tests are reproducible. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomKeys(n: number, seed: number): bigint[] {
  const r = prng(seed);
  return Array.from({ length: n }, () => (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32)));
}

describe('xxHash64 and MurmurHash2', () => {
  test('Envoy HashUtil::xxHash64 vectors', () => {
    assert.equal(xxHash64('foo'), 3728699739546630719n);
    assert.equal(xxHash64('bar'), 5234164152756840025n);
    assert.equal(xxHash64('foo\nbar'), 8917841378505826757n);
    assert.equal(xxHash64('lyft'), 4400747396090729504n);
    assert.equal(xxHash64(''), 17241709254077376921n);
  });

  test('long inputs take the 32-byte stripe path (checked against xxhsum)', () => {
    assert.equal(xxHash64('abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ'), 0xd5000c4ac53d14a0n);
    assert.equal(xxHash64('0123456789abcdef0123456789abcdef'), 0x642a94958e71e6c5n);
    assert.equal(xxHash64('0123456789abcdef0123456789abcde'), 0x1fdfc63febacfde7n);
    assert.equal(xxHash64('héllo wörld ✓ 😀 some longer text that crosses the 32 byte stripe boundary!'), 0x16f4e04058c07f5an);
  });

  test('a seed chains values: Envoy hashes the span {foo, bar} to 17745830980996999794', () => {
    assert.equal(xxHash64('bar', xxHash64('foo')), 17745830980996999794n);
  });

  test('xxHash64Into hashes a substring; latin1 mode hashes char codes < 256 as single bytes', () => {
    const out = new Uint32Array(2);
    xxHash64Into(out, 'xxfooyy', 2, 5, 'utf8');
    assert.equal((BigInt(out[1]) << 32n) | BigInt(out[0]), xxHash64('foo'));
    xxHash64Into(out, '\u00e9', 0, 1, 'wire');
    assert.equal((BigInt(out[1]) << 32n) | BigInt(out[0]), 0x725631bb6a18915cn); // the single byte 0xe9
    xxHash64Into(out, '\u00c3\u00a9', 0, 2, 'wire');
    assert.equal((BigInt(out[1]) << 32n) | BigInt(out[0]), xxHash64('é')); // UTF-8 bytes as Node decodes them
  });

  test('native copy (16+ chars) and mixed latin1/UTF-8 loading hash the same bytes as the loop', () => {
    const out = new Uint32Array(2);
    const long = 'x-request-id-0123456789abcdef';
    xxHash64Into(out, long, 0, long.length, 'wire');
    assert.equal((BigInt(out[1]) << 32n) | BigInt(out[0]), xxHash64(long));
    xxHash64Into(out, '\u00e9\u2713', 0, 2, 'latin1');
    assert.equal((BigInt(out[1]) << 32n) | BigInt(out[0]), 0xdf424b576a929ef2n); // bytes e9 e2 9c 93
  });

  test('mod64 equals the 64-bit remainder (random values, table sizes up to 5000011)', () => {
    const r = prng(3);
    for (const m of [100, 7, 17, 65537, 65536, 5000011, 5000010]) {
      for (let i = 0; i < 2000; i++) {
        const hi = Math.floor(r() * 2 ** 32), lo = Math.floor(r() * 2 ** 32);
        const want = Number(((BigInt(hi) << 32n) | BigInt(lo)) % BigInt(m));
        assert.equal(mod64(hi, lo, m), want);
        assert.equal(mod64(hi | 0, lo | 0, m), want, 'int32 halves');
      }
      assert.equal(mod64(0xffffffff, 0xffffffff, m), Number(U64_MAX % BigInt(m)));
    }
  });

  test('Envoy MurmurHash::murmurHash2 vectors (libstdc++ std::hash)', () => {
    assert.equal(murmurHash2('foo'), 9631199822919835226n);
    assert.equal(murmurHash2('bar'), 11474628671133349555n);
    assert.equal(murmurHash2('foo\nbar'), 16306510975912980159n);
    assert.equal(murmurHash2('lyft'), 12847078931730529320n);
    assert.equal(murmurHash2(''), 6142509188972423790n);
  });
});

describe('RING_HASH: Envoy ring conformance', () => {
  const ringOf = (lb: HashLoadBalancer<Host>): Array<[number, bigint]> => (lb.tables[0] as RingHash<Host>).entries().map((e) => [e.host.port, e.hash]);

  test('six hosts, minimum_ring_size 12: the same ring and picks as Envoy', () => {
    const hosts = ports(90, 6);
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 12 });
    const ring = lb.tables[0] as RingHash<Host>;
    assert.equal(ring.size, 12);
    assert.equal(ring.minHashesPerHost, 2);
    assert.equal(ring.maxHashesPerHost, 2);
    assert.deepEqual(ringOf(lb), [
      [94, 833437586790550860n], [92, 928266305478181108n], [90, 1033482794131418490n], [95, 3551244743356806947n],
      [93, 3851675632748031481n], [91, 5583722120771150861n], [91, 6311230543546372928n], [93, 7700377290971790572n],
      [95, 13144177310400110813n], [92, 13444792449719432967n], [94, 15516499411664133160n], [90, 16117243373044804889n],
    ]);
    assert.equal(lb.pick(0n), hosts[4]);
    assert.equal(lb.pick(U64_MAX), hosts[4], 'past the last point wraps to the first');
    assert.equal(lb.pick(3551244743356806947n), hosts[5], 'a hash equal to a point picks that point');
    assert.equal(lb.pick(3551244743356806948n), hosts[3]);
    assert.equal(lb.pick(16117243373044804880n), hosts[0]);
    assert.equal(lb.pick(0), hosts[4], 'a number hash works like the same bigint');
  });

  test('retry attempts walk the ring, wrapping (host_selection_retry_max_attempts)', () => {
    const hosts = ports(90, 6);
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 12 });
    assert.equal(lb.pick(0n, 0), hosts[4]);
    assert.equal(lb.pick(0n, 1), hosts[2]);
    assert.equal(lb.pick(0n, 2), hosts[0]);
    assert.equal(lb.pick(0n, 13), hosts[2]);
  });

  test('no healthy host: panic mode hashes over all hosts', () => {
    const hosts = ports(90, 6);
    for (const h of hosts) h.healthy = false;
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 12 });
    assert.equal(lb.plan.levels[0].panic, true);
    assert.equal(lb.pick(0n), hosts[4]);
  });

  test('MURMUR_HASH_2 ring matches Envoy', () => {
    const hosts = ports(80, 6);
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 12, hashFunction: 'MURMUR_HASH_2' });
    assert.deepEqual(ringOf(lb), [
      [85, 1358027074129602068n], [83, 4361834613929391114n], [84, 7224494972555149682n], [81, 7701421856454313576n],
      [82, 8649315368077433379n], [84, 8739448859063030639n], [81, 9887544217113020895n], [82, 10150910876324007731n],
      [83, 15168472011420622455n], [80, 15427156902705414897n], [85, 16375050414328759093n], [80, 17613279263364193813n],
    ]);
    assert.equal(lb.pick(1358027074129602069n), hosts[3]);
    assert.equal(lb.pick(10150910876324007730n), hosts[2]);
  });

  test('use_hostname_for_hashing keys the ring by hostname', () => {
    const hosts = ports(90, 6, { hostname: true });
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 12, useHostnameForHashing: true });
    assert.deepEqual(ringOf(lb).slice(0, 4), [[95, 1975508444536362413n], [95, 2376063919839173711n], [93, 2386806903309390596n], [94, 6749904478991551885n]]);
    assert.equal(lb.pick(7225015537174310577n), hosts[2]);
    assert.equal(lb.pick(6803900775736438537n), hosts[3]);
  });

  test('uneven hosts: minimum_ring_size 3 over 2 hosts gives 4 points', () => {
    const lb = new HashLoadBalancer(ports(80, 2), { ...RING, minRingSize: 3 });
    assert.deepEqual(ringOf(lb), [[80, 5454692015285649509n], [81, 7859399908942313493n], [80, 13838424394637650569n], [81, 16064866803292627174n]]);
  });

  test('weights 1:2:3 on a ring of exactly 6 points give 1, 2 and 3 points', () => {
    const hosts = [local(90, { weight: 1 }), local(91, { weight: 2 }), local(92, { weight: 3 })];
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 6, maxRingSize: 6 });
    const ring = lb.tables[0] as RingHash<Host>;
    assert.equal(ring.size, 6);
    assert.equal(ring.minHashesPerHost, 1);
    assert.equal(ring.maxHashesPerHost, 3);
    const expected: Array<[bigint, number]> = [[928266305478181108n, 2], [4443673547860492590n, 2], [5583722120771150861n, 1],
      [6311230543546372928n, 1], [13444792449719432967n, 2], [16117243373044804889n, 0]];
    for (const [hash, i] of expected) assert.equal(lb.pick(hash), hosts[i]);
  });

  test('weights 1:2:3 on a large ring split random keys 1/6, 2/6, 3/6 (±2%)', () => {
    const hosts = [local(90, { weight: 1 }), local(91, { weight: 2 }), local(92, { weight: 3 })];
    const lb = new HashLoadBalancer(hosts, { ...RING, minRingSize: 1024 * 16 });
    const counts = new Map<Host, number>();
    const keys = randomKeys(60_000, 7);
    for (const k of keys) { const h = lb.pick(k)!; counts.set(h, (counts.get(h) ?? 0) + 1); }
    hosts.forEach((h, i) => {
      const share = (counts.get(h) ?? 0) / keys.length;
      assert.ok(Math.abs(share - (i + 1) / 6) < 0.02, `host ${h.port}: ${share.toFixed(3)} vs ${((i + 1) / 6).toFixed(3)}`);
    });
  });

  test('minimum_ring_size larger than max is capped by maximum_ring_size', () => {
    const lb = new HashLoadBalancer(ports(80, 3), { ...RING, minRingSize: 100, maxRingSize: 10 });
    assert.equal(lb.tables[0].size, 10);
  });

  test('no hosts: no pick', () => {
    assert.equal(new HashLoadBalancer<Host>([], RING).pick(1n), undefined);
    assert.equal(new HashLoadBalancer<Host>([], MAGLEV).pick(1n), undefined);
  });
});

describe('MAGLEV: Envoy table conformance', () => {
  const seq = (lb: HashLoadBalancer<Host>, n: number, base: number): string => Array.from({ length: n }, (_, i) => lb.pick(i)!.port - base).join(',');

  test('six hosts, table size 7', () => {
    const lb = new HashLoadBalancer(ports(90, 6), { ...MAGLEV, tableSize: 7 });
    assert.equal(seq(lb, 21, 90), '2,4,0,1,5,0,3,2,4,0,1,5,0,3,2,4,0,1,5,0,3');
    const t = lb.tables[0] as MaglevTable<Host>;
    assert.equal(Math.min(...t.counts), 1);
    assert.equal(Math.max(...t.counts), 2);
  });

  test('hostname keys', () => {
    const lb = new HashLoadBalancer(ports(90, 6, { hostname: true }), { ...MAGLEV, tableSize: 7, useHostnameForHashing: true });
    assert.equal(seq(lb, 7, 90), '2,5,0,3,4,1,0');
  });

  test('retry attempts flip the hash: ~0 − attempt + 1', () => {
    const hosts = ports(90, 6);
    const lb = new HashLoadBalancer(hosts, { ...MAGLEV, tableSize: 7 });
    assert.equal(lb.pick(10, 0), hosts[1]);
    assert.equal(lb.pick(10, 1), hosts[0]);
    assert.equal(lb.pick(10, 2), hosts[5]);
  });

  test('the table does not depend on host order', () => {
    const hosts = ports(90, 6);
    const shuffled = [hosts[3], hosts[0], hosts[5], hosts[1], hosts[4], hosts[2]];
    const a = new HashLoadBalancer(hosts, { ...MAGLEV, tableSize: 7 });
    const b = new HashLoadBalancer(shuffled, { ...MAGLEV, tableSize: 7 });
    for (let i = 0; i < 21; i++) assert.equal(a.pick(i), b.pick(i));
  });

  test('weights 1:2, table size 17', () => {
    const lb = new HashLoadBalancer([local(90, { weight: 1 }), local(91, { weight: 2 })], { ...MAGLEV, tableSize: 17 });
    assert.equal(seq(lb, 17, 90), '1,0,0,1,0,1,1,0,1,1,1,1,1,0,1,0,1');
    assert.deepEqual([...(lb.tables[0] as MaglevTable<Host>).counts], [6, 11]);
  });

  test('a single weighted host owns every slot', () => {
    const h = local(90, { weight: 7 });
    const lb = new HashLoadBalancer([h], { ...MAGLEV, tableSize: 17 });
    for (let i = 0; i < 17; i++) assert.equal(lb.pick(i), h);
  });

  test('locality weighted, equal locality weights: host weights across localities do not matter', () => {
    const hosts = [lbHost(90, 'A', 1, 1), lbHost(91, 'B', 2, 1)];
    const lb = new HashLoadBalancer(hosts, { ...MAGLEV, tableSize: 17 }, { overprovisioningFactor: 140, panicThreshold: 50, weightedPriorityHealth: false, localityWeighted: true, failTrafficOnPanic: false });
    assert.equal(Array.from({ length: 17 }, (_, i) => lb.pick(i)!.port - 90).join(','), '1,0,0,1,0,1,1,0,0,1,0,1,0,0,1,0,1');
  });

  test('locality weighted 8:0:2: the zero-weight locality gets nothing', () => {
    const hosts = [lbHost(90, 'A', 1, 8), lbHost(91, 'C', 2, 2), lbHost(92, 'B', 3, 0)];
    const lb = new HashLoadBalancer(hosts, { ...MAGLEV, tableSize: 17 }, { overprovisioningFactor: 140, panicThreshold: 50, weightedPriorityHealth: false, localityWeighted: true, failTrafficOnPanic: false });
    assert.equal(Array.from({ length: 17 }, (_, i) => lb.pick(i)!.port - 90).join(','), '1,0,0,0,0,0,1,0,0,1,0,1,0,0,0,0,0');
  });

  test('locality weighted with every locality weight 0: no host', () => {
    const lb = new HashLoadBalancer([lbHost(90, 'A', 1, 0)], { ...MAGLEV, tableSize: 17 }, { overprovisioningFactor: 140, panicThreshold: 50, weightedPriorityHealth: false, localityWeighted: true, failTrafficOnPanic: false });
    assert.equal(lb.pick(0), undefined);
  });

  test('weights 1:3 on the default table split random keys 1/4, 3/4 (±2%)', () => {
    const hosts = [local(90, { weight: 1 }), local(91, { weight: 3 })];
    const lb = new HashLoadBalancer(hosts, MAGLEV);
    let first = 0;
    const keys = randomKeys(40_000, 11);
    for (const k of keys) if (lb.pick(k) === hosts[0]) first++;
    assert.ok(Math.abs(first / keys.length - 0.25) < 0.02, `${first / keys.length}`);
  });
});

describe('consistent hashing: one membership change moves about 1/N of keys', () => {
  const N = 10;
  const keys = randomKeys(20_000, 42);

  /** Picks every key before and after; counts moved keys and where they came from / went to. */
  function churn(before: HashLoadBalancer<Host>, after: HashLoadBalancer<Host>, gone?: Host, added?: Host): { moved: number; fromGone: number; onGone: number; toAdded: number } {
    let moved = 0, fromGone = 0, onGone = 0, toAdded = 0;
    for (const k of keys) {
      const a = before.pick(k)!, b = after.pick(k)!;
      if (a === gone) onGone++;
      if (a !== b) { moved++; if (a === gone) fromGone++; if (b === added) toAdded++; }
    }
    return { moved, fromGone, onGone, toAdded };
  }

  test('MAGLEV: removing one of 10 hosts moves its keys and little else (1/N ± 30%)', () => {
    const hosts = ports(9000, N);
    const gone = hosts[3];
    const c = churn(new HashLoadBalancer(hosts, MAGLEV), new HashLoadBalancer(hosts.filter((h) => h !== gone), MAGLEV), gone);
    assert.equal(c.fromGone, c.onGone, 'every key of the removed host moves');
    const share = c.moved / keys.length;
    assert.ok(share > 0.7 / N && share < 1.3 / N, `moved ${(share * 100).toFixed(1)}%`);
    assert.ok((c.moved - c.fromGone) / keys.length < 0.02, `collateral moves ${c.moved - c.fromGone}`);
  });

  test('MAGLEV: adding an 11th host moves about 1/(N+1), nearly all of it to the new host', () => {
    const hosts = ports(9000, N);
    const added = local(9000 + N);
    const c = churn(new HashLoadBalancer(hosts, MAGLEV), new HashLoadBalancer([...hosts, added], MAGLEV), undefined, added);
    const share = c.moved / keys.length;
    assert.ok(share > 0.7 / (N + 1) && share < 1.3 / (N + 1), `moved ${(share * 100).toFixed(1)}%`);
    assert.ok(c.toAdded / c.moved > 0.9, `${c.toAdded} of ${c.moved} moved keys went to the new host`);
  });

  test('RING_HASH: with points per host unchanged, removing a host moves exactly its keys (1/N ± 30%)', () => {
    // Ring sizes chosen so every host has 108 points on both rings (the next test shows a fixed size).
    const min = 10 * 9 * 12;
    const hosts = ports(9000, N);
    const gone = hosts[3];
    const before = new HashLoadBalancer(hosts, { ...RING, minRingSize: min, maxRingSize: min });
    const after = new HashLoadBalancer(hosts.filter((h) => h !== gone), { ...RING, minRingSize: min * 9 / 10, maxRingSize: min * 9 / 10 });
    assert.equal((before.tables[0] as RingHash<Host>).maxHashesPerHost, (after.tables[0] as RingHash<Host>).maxHashesPerHost);
    const c = churn(before, after, gone);
    assert.equal(c.moved, c.onGone, 'only the removed host\'s keys move');
    const share = c.moved / keys.length;
    assert.ok(share > 0.7 / N && share < 1.3 / N, `moved ${(share * 100).toFixed(1)}%`);
  });

  test('RING_HASH with a fixed minimum_ring_size: the removed host\'s keys plus Envoy\'s re-scaling churn (< 2/N)', () => {
    // ceil(1024/9) = 114 points per host instead of ceil(1024/10) = 103: the extra points take keys too.
    const hosts = ports(9000, N);
    const gone = hosts[3];
    const c = churn(new HashLoadBalancer(hosts, RING), new HashLoadBalancer(hosts.filter((h) => h !== gone), RING), gone);
    assert.equal(c.fromGone, c.onGone, 'every key of the removed host moves');
    const share = c.moved / keys.length;
    assert.ok(share > 0.7 / N && share < 2 / N, `moved ${(share * 100).toFixed(1)}%`);
  });

  test('RING_HASH: adding an 11th host, points per host unchanged, moves only keys to the new host', () => {
    const per = 110;
    const hosts = ports(9000, N);
    const added = local(9000 + N);
    const before = new HashLoadBalancer(hosts, { ...RING, minRingSize: per * N, maxRingSize: per * N });
    const after = new HashLoadBalancer([...hosts, added], { ...RING, minRingSize: per * (N + 1), maxRingSize: per * (N + 1) });
    const c = churn(before, after, undefined, added);
    assert.equal(c.toAdded, c.moved, 'every moved key went to the new host');
    const share = c.moved / keys.length;
    assert.ok(share > 0.7 / (N + 1) && share < 1.3 / (N + 1), `moved ${(share * 100).toFixed(1)}%`);
  });
});

describe('priorities', () => {
  test('P=0 unhealthy: hashing falls over to P=1', () => {
    const p0 = local(80, { priority: 0, healthy: false });
    const p1 = local(82, { priority: 1 });
    const lb = new HashLoadBalancer([p0, p1], { ...RING, minRingSize: 12 });
    for (const k of randomKeys(50, 1)) assert.equal(lb.pick(k), p1);
  });

  test('P=0 half healthy takes 70% by hash % 100, the rest goes to P=1', () => {
    const a = local(80, { priority: 0 }), b = local(81, { priority: 0, healthy: false }), c = local(82, { priority: 1 });
    const lb = new HashLoadBalancer([a, b, c], { ...RING, minRingSize: 12 });
    assert.deepEqual(lb.plan.load.healthy, [70, 30]);
    assert.equal(lb.pick(69), a);
    assert.equal(lb.pick(71), c);
    assert.equal(lb.pick(169), a);
    assert.equal(lb.pick(170), c);
  });

  test('no hash: a random host, spread over all of them', () => {
    const hosts = ports(90, 6);
    const lb = new HashLoadBalancer(hosts, MAGLEV);
    const counts = new Map<Host, number>();
    for (let i = 0; i < 6000; i++) { const h = lb.pick(undefined)!; counts.set(h, (counts.get(h) ?? 0) + 1); }
    for (const h of hosts) assert.ok((counts.get(h) ?? 0) > 700 && (counts.get(h) ?? 0) < 1300, `${h.port}: ${counts.get(h)}`);
  });
});

describe('compileHashLbConfig', () => {
  const compile = (raw: Record<string, unknown>): HashLbConfig | undefined => compileHashLbConfig(new Msg({ name: 'c', ...raw }, 'clusters[0]'));
  const fails = (raw: Record<string, unknown>, path: string, re: RegExp): void => {
    assert.throws(() => compile(raw), (e: unknown) => e instanceof ConfigError && e.path === path && re.test(e.message));
  };

  test('defaults', () => {
    assert.deepEqual(compile({ lb_policy: 'RING_HASH' }), { policy: 'RING_HASH', minRingSize: 1024, maxRingSize: 8388608, hashFunction: 'XX_HASH', tableSize: 65537, useHostnameForHashing: false });
    assert.equal(compile({ lb_policy: 'MAGLEV' })?.tableSize, 65537);
    assert.equal(compile({ lb_policy: 'ROUND_ROBIN' }), undefined);
    assert.equal(compile({}), undefined);
  });

  test('ring_hash_lb_config fields, wrappers and enum numbers', () => {
    const c = compile({ lb_policy: 'RING_HASH', ring_hash_lb_config: { minimum_ring_size: { value: '4096' }, maximum_ring_size: 65536, hash_function: 1 } });
    assert.equal(c?.minRingSize, 4096);
    assert.equal(c?.maxRingSize, 65536);
    assert.equal(c?.hashFunction, 'MURMUR_HASH_2');
    assert.equal(compile({ lb_policy: 2 })?.policy, 'RING_HASH');
    assert.equal(compile({ lb_policy: 'MAGLEV', maglev_lb_config: { table_size: 7 }, common_lb_config: { consistent_hashing_lb_config: { use_hostname_for_hashing: true } } })?.useHostnameForHashing, true);
  });

  test('errors name the field', () => {
    fails({ lb_policy: 'RING_HASH', ring_hash_lb_config: { minimum_ring_size: 20, maximum_ring_size: 10 } }, 'clusters[0].ring_hash_lb_config.minimum_ring_size', /minimum_ring_size \(20\) > maximum_ring_size \(10\)/);
    fails({ lb_policy: 'RING_HASH', ring_hash_lb_config: { maximum_ring_size: 8388609 } }, 'clusters[0].ring_hash_lb_config.maximum_ring_size', /8388608/);
    fails({ lb_policy: 'RING_HASH', ring_hash_lb_config: { hash_function: 'CITY' } }, 'clusters[0].ring_hash_lb_config.hash_function', /XX_HASH/);
    fails({ lb_policy: 'RING_HASH', ring_hash_lb_config: { use_std_hash: true } }, 'clusters[0].ring_hash_lb_config.use_std_hash', /not supported/);
    fails({ lb_policy: 'MAGLEV', maglev_lb_config: { table_size: 8 } }, 'clusters[0].maglev_lb_config.table_size', /prime/);
    fails({ lb_policy: 'MAGLEV', maglev_lb_config: { table_size: 5000021 } }, 'clusters[0].maglev_lb_config.table_size', /5000011/);
    fails({ lb_policy: 'MAGLEV', ring_hash_lb_config: {} }, 'clusters[0].ring_hash_lb_config', /RING_HASH/);
    fails({ lb_policy: 'ROUND_ROBIN', maglev_lb_config: {} }, 'clusters[0].maglev_lb_config', /MAGLEV/);
    fails({ lb_policy: 'MAGLEV', common_lb_config: { consistent_hashing_lb_config: { hash_balance_factor: 150 } } }, 'clusters[0].common_lb_config.consistent_hashing_lb_config.hash_balance_factor', /not supported/);
  });

  test('isPrime', () => {
    assert.deepEqual([0, 1, 2, 3, 4, 7, 8, 17, 65537, 65539, 5000011].map(isPrime), [false, false, true, true, false, true, false, true, true, true, true]);
    assert.equal(isPrime(65535), false);
  });
});
