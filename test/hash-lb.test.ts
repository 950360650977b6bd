// Consistent hashing end to end: route hash_policy + RING_HASH / MAGLEV clusters keep a key on one backend.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';

function named(name: string): Promise<{ port: number; server: Server }> {
  const server = createServer((_req, res) => res.end(name));
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    resolve({ port: typeof a === 'object' && a ? a.port : 0, server });
  }));
}

describe('consistent hashing', { timeout: 30_000 }, () => {
  const backends: Array<{ port: number; server: Server }> = [];
  let proxy: RunningProxy, base: string;

  before(async () => {
    for (const n of ['b0', 'b1', 'b2']) backends.push(await named(n));
    const ports = backends.map((b) => b.port);
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([
        routeTo('ring', '/ring', { hash_policy: [{ header: { header_name: 'x-user' } }] }),
        routeTo('maglev', '/maglev', { hash_policy: [{ cookie: { name: 'session', ttl: '60s', path: '/' } }] }),
      ])], { statPrefix: 'hash' }))]),
    ], [
      cluster('ring', ports, { extra: { lb_policy: 'RING_HASH', ring_hash_lb_config: { minimum_ring_size: 1024 } } }),
      cluster('maglev', ports, { extra: { lb_policy: 'MAGLEV' } }),
    ]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });

  after(() => cleanup(() => proxy?.stop(), ...backends.map((b) => () => b.server.close())));

  test('RING_HASH: each x-user sticks to one backend, and users spread over all three', async () => {
    const owner = new Map<string, string>();
    for (let round = 0; round < 3; round++) {
      for (let u = 0; u < 30; u++) {
        const r = await request(`${base}/ring`, { headers: { 'x-user': `user-${u}` } });
        const got = r.body.toString();
        const prev = owner.get(`user-${u}`);
        if (prev) assert.equal(got, prev, `user-${u} moved`);
        owner.set(`user-${u}`, got);
      }
    }
    assert.equal(new Set(owner.values()).size, 3);
  });

  test('MAGLEV with a generated cookie: the first response sets it, requests carrying it stick', async () => {
    const first = await request(`${base}/maglev`);
    const setCookie = String(first.headers['set-cookie'] ?? '');
    assert.match(setCookie, /^session="?[^;]+"?; Max-Age=60; Path=\//);
    const cookie = setCookie.split(';')[0];
    const seen = new Set<string>();
    for (let i = 0; i < 15; i++) seen.add((await request(`${base}/maglev`, { headers: { cookie } })).body.toString());
    assert.equal(seen.size, 1);
  });
});
