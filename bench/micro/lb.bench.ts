import type { Bench } from 'tinybench';
import { Host } from '../../packages/proxy/src/upstream/host.ts';
import { HostSet } from '../../packages/proxy/src/upstream/lb.ts';
import { HashLoadBalancer, type HashLbConfig } from '../../packages/proxy/src/upstream/lb-hash.ts';
import { PriorityPlan, DEFAULT_LOCALITY_LB, type LbHost } from '../../packages/proxy/src/upstream/locality.ts';
import { compileHashPolicies, computeRequestHash } from '../../packages/proxy/src/http/hash-policy.ts';
import { Msg } from '../../packages/proxy/src/config/fields.ts';

/**
 * Load-balancer picks. One pick is tens of nanoseconds, below what timing a single call can
 * resolve, so each task runs N = 1000 operations over varied inputs: divide the mean by 1000
 * for ns per pick.
 */
const N = 1000;

const hosts = (n: number, weighted = false): Host[] =>
  Array.from({ length: n }, (_, i) => new Host(`10.0.${i >> 8}.${i & 255}`, 8080, { weight: weighted ? 1 + (i % 5) : 1 }));

/** Deterministic 64-bit keys. */
const keys: bigint[] = (() => {
  let x = 0x9e3779b97f4a7c15n;
  return Array.from({ length: N }, () => {
    x = BigInt.asUintN(64, x * 6364136223846793005n + 1442695040888963407n);
    return x;
  });
})();

const RING: HashLbConfig = { policy: 'RING_HASH', minRingSize: 1024, maxRingSize: 8388608, hashFunction: 'XX_HASH', tableSize: 65537, useHostnameForHashing: false };
const MAGLEV: HashLbConfig = { ...RING, policy: 'MAGLEV' };

export default function register(bench: Bench): void {
  let sink: unknown;

  const rr = new HostSet(hosts(100), 'ROUND_ROBIN');
  bench.add(`lb pick: round robin, 100 hosts (x${N})`, () => { for (let i = 0; i < N; i++) sink = rr.pick(); });
  const wrr = new HostSet(hosts(100, true), 'ROUND_ROBIN');
  bench.add(`lb pick: weighted round robin, 100 hosts (x${N})`, () => { for (let i = 0; i < N; i++) sink = wrr.pick(); });
  const lr = new HostSet(hosts(100), 'LEAST_REQUEST');
  bench.add(`lb pick: least request (P2C), 100 hosts (x${N})`, () => { for (let i = 0; i < N; i++) sink = lr.pick(); });

  const ring = new HashLoadBalancer(hosts(100), RING);
  bench.add(`lb pick: ring hash, 100 hosts, ${ring.tables[0].size} points (x${N})`, () => { for (let i = 0; i < N; i++) sink = ring.pick(keys[i]); });
  const bigRing = new HashLoadBalancer(hosts(100), { ...RING, minRingSize: 1 << 17 });
  bench.add(`lb pick: ring hash, 100 hosts, ${bigRing.tables[0].size} points (x${N})`, () => { for (let i = 0; i < N; i++) sink = bigRing.pick(keys[i]); });
  const maglev = new HashLoadBalancer(hosts(100), MAGLEV);
  bench.add(`lb pick: maglev, 100 hosts, table 65537 (x${N})`, () => { for (let i = 0; i < N; i++) sink = maglev.pick(keys[i]); });
  bench.add(`lb pick: maglev, no hash (random) (x${N})`, () => { for (let i = 0; i < N; i++) sink = maglev.pick(undefined); });

  const policies = compileHashPolicies([new Msg({ header: { header_name: 'x-user-id' } }, 'hash_policy[0]')])!;
  const requests = Array.from({ length: N }, (_, i) => ({ headers: { 'x-user-id': `user-${100000 + i * 7919}`, host: 'reviews:9080' } as Record<string, string>, path: '/reviews/1' }));
  bench.add(`hash policy: header x-user-id, 11 chars -> bigint (x${N})`, () => { for (let i = 0; i < N; i++) sink = computeRequestHash(policies, requests[i]); });
  const cookie = compileHashPolicies([new Msg({ cookie: { name: 'session' } }, 'hash_policy[0]')])!;
  const cookieReqs = requests.map((r, i) => ({ headers: { cookie: `_ga=GA1.2.3; session=${(i * 2654435761).toString(16)}; theme=dark` }, path: r.path }));
  bench.add(`hash policy: cookie in a 3-cookie header (x${N})`, () => { for (let i = 0; i < N; i++) sink = computeRequestHash(cookie, cookieReqs[i]); });
  bench.add(`hash policy + ring pick: header x-user-id (x${N})`, () => { for (let i = 0; i < N; i++) sink = ring.pick(computeRequestHash(policies, requests[i])); });

  const zoned: LbHost[] = hosts(90).map((h, i) => Object.assign(h, { zone: `z${i % 3}`, localityWeight: 1 + (i % 3) }));
  const plan = new PriorityPlan(zoned, { ...DEFAULT_LOCALITY_LB, localityWeighted: true });
  bench.add(`locality: PriorityPlan.hostsForRandom, 3 weighted zones (x${N})`, () => { for (let i = 0; i < N; i++) sink = plan.hostsForRandom(); });

  const h100 = hosts(100);
  bench.add('lb build: ring hash, 100 hosts, min ring 1024', () => { sink = new HashLoadBalancer(h100, RING); });
  bench.add('lb build: maglev, 100 hosts, table 65537', () => { sink = new HashLoadBalancer(h100, MAGLEV); });
  void sink;
}
