// request_mirror_policies: a copy of each request goes to the mirror cluster (host with -shadow), fire-and-forget.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { cleanup, startProxy, validate, fixturesDir, type RunningProxy } from './lib/proxy.ts';
import { request, sleep } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';
import { join } from 'node:path';

interface Seen { method: string; url: string; headers: IncomingHttpHeaders; body: string }

function recorder(status: number, delayMs = 0): Promise<{ port: number; server: Server; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      setTimeout(() => res.writeHead(status).end(`status ${status}`), delayMs);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    resolve({ port: typeof a === 'object' && a ? a.port : 0, server, seen });
  }));
}

describe('request mirroring', { timeout: 30_000 }, () => {
  let primary: Awaited<ReturnType<typeof recorder>>, shadow: Awaited<ReturnType<typeof recorder>>;
  let proxy: RunningProxy, base: string;

  before(async () => {
    primary = await recorder(200);
    shadow = await recorder(500, 2000); // slow and failing: must not affect the client
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([
        routeTo('primary', '/half', { request_mirror_policies: [{ cluster: 'shadow', runtime_fraction: { default_value: { numerator: 0, denominator: 'HUNDRED' } } }] }),
        routeTo('primary', '/', { request_mirror_policies: [{ cluster: 'shadow' }] }),
      ])], { statPrefix: 'mirror' }))]),
    ], [cluster('primary', [primary.port]), cluster('shadow', [shadow.port])]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });

  after(() => cleanup(() => proxy?.stop(), () => primary?.server.close(), () => shadow?.server.close()));

  test('GET and POST are mirrored with the body and a -shadow authority; the client only sees the primary', async () => {
    const t0 = Date.now();
    const g = await request(`${base}/a?x=1`, { headers: { host: 'reviews:9080' } });
    assert.equal(g.status, 200);
    assert.ok(Date.now() - t0 < 1500, 'the slow mirror (2 s) does not delay the response');
    const p = await request(`${base}/b`, { method: 'POST', body: 'mirror-me' });
    assert.equal(p.status, 200);
    for (let i = 0; i < 150 && shadow.seen.length < 2; i++) await sleep(20);
    assert.equal(shadow.seen.length, 2);
    assert.equal(shadow.seen[0].url, '/a?x=1');
    assert.equal(shadow.seen[0].headers.host, 'reviews-shadow:9080');
    assert.equal(shadow.seen[1].method, 'POST');
    assert.equal(shadow.seen[1].body, 'mirror-me');
    assert.equal(primary.seen.length, 2);
  });

  test('runtime_fraction 0% mirrors nothing', async () => {
    const before = shadow.seen.length;
    for (let i = 0; i < 5; i++) assert.equal((await request(`${base}/half`)).status, 200);
    await sleep(100);
    assert.equal(shadow.seen.length, before);
  });

  test('the route-mirror example validates', async () => {
    const r = await validate(join(fixturesDir, 'envoyproxy-examples', 'route-mirror', 'envoy.yaml'));
    assert.equal(r.code, 0, r.stderr);
  });
});
