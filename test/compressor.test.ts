// envoy.filters.http.compressor end to end, on the ambient bootstrap golden's own 15090 listener (brotli,
// zstd and gzip compressors in one chain in front of /stats/prometheus): Accept-Encoding negotiation
// across the chain, every byte intact after decompression (HTTP/1.1 and HTTP/2 clients, a client that
// stops reading mid-body), the content-type list, the minimum length, Vary, ETag and the stats.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { connect as h2connect } from 'node:http2';
import { createHash, randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { startProxy, cleanup, fixturesDir, type Json, type RunningProxy } from './lib/proxy.ts';
import { cluster } from './lib/config.ts';

const BIG = randomBytes(3 << 20).toString('base64'); // ~4 MiB of text that does not shrink much: real backpressure
const METRICS = Array.from({ length: 4000 }, (_, i) => `istio_requests_total{reporter="waypoint",n="${i}"} ${i}`).join('\n') + '\n';
const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

interface Reply { status: number; headers: Record<string, string | string[] | undefined>; raw: Buffer }

function get(port: number, path: string, headers: Record<string, string>, slow = false): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let paused = false;
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        if (slow && !paused) { paused = true; res.pause(); setTimeout(() => res.resume(), 400); }
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.setTimeout(15_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject).end();
  });
}

function decode(r: Reply): Buffer {
  switch (r.headers['content-encoding']) {
    case 'gzip': return zlib.gunzipSync(r.raw);
    case 'br': return zlib.brotliDecompressSync(r.raw);
    case 'zstd': return zlib.zstdDecompressSync(r.raw);
    case undefined: return r.raw;
    default: throw new Error(`unexpected content-encoding ${String(r.headers['content-encoding'])}`);
  }
}

describe('the compressor filters of the ambient bootstrap golden, with real traffic', () => {
  let backend: Server;
  let proxy: RunningProxy;
  before(async () => {
    backend = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const kind = url.searchParams.get('kind');
      if (kind === 'big') { res.setHeader('content-type', 'text/plain; charset=utf-8'); res.end(BIG); return; }
      if (kind === 'small') { res.setHeader('content-type', 'text/plain'); res.end('tiny'); return; }
      if (kind === 'binary') { res.setHeader('content-type', 'application/octet-stream'); res.end(METRICS); return; }
      if (kind === 'etag') { res.setHeader('content-type', 'text/plain'); res.setHeader('etag', '"v1"'); res.end(METRICS); return; }
      res.setHeader('content-type', 'text/plain; version=0.0.4');
      res.write(METRICS.slice(0, 1000)); // chunked: no content-length
      res.end(METRICS.slice(1000));
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    const golden = JSON.parse(readFileSync(`${fixturesDir}/istio-istio/pkg/bootstrap/testdata/ambient_golden.json`, 'utf8')) as Json;
    const stats = structuredClone(((golden.static_resources as Json).listeners as Json[])[0]);
    proxy = await startProxy((ports) => {
      ((stats.address as Json).socket_address as Json).port_value = ports('stats');
      ((stats.address as Json).socket_address as Json).address = '127.0.0.1';
      return { static_resources: { listeners: [stats], clusters: [cluster('prometheus_stats', [(backend.address() as { port: number }).port])] } };
    }, { ports: ['stats'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => new Promise<void>((r) => backend ? backend.close(() => r()) : r())));

  const port = (): number => proxy.ports.stats;

  test('each encoding the chain offers: the body decodes to every original byte; Vary is set', async () => {
    for (const enc of ['gzip', 'br', 'zstd']) {
      const r = await get(port(), '/stats/prometheus', { 'accept-encoding': enc });
      assert.equal(r.status, 200);
      assert.equal(r.headers['content-encoding'], enc);
      assert.equal(r.headers['content-length'], undefined);
      assert.equal(r.headers.vary, 'Accept-Encoding');
      assert.ok(r.raw.length < METRICS.length / 3, `${enc}: ${r.raw.length} bytes`);
      assert.equal(sha(decode(r)), sha(METRICS), enc);
    }
  });

  test('negotiation: highest q wins; equal q goes to the first compressor in the chain; identity and q=0 refuse', async () => {
    const pick = async (ae: string): Promise<string | undefined> => (await get(port(), '/stats/prometheus', { 'accept-encoding': ae })).headers['content-encoding'] as string | undefined;
    assert.equal(await pick('gzip;q=0.5, br;q=0.9, zstd;q=0.1'), 'br');
    assert.equal(await pick('gzip, zstd'), 'zstd', 'zstd comes before gzip in the chain');
    assert.equal(await pick('*'), 'br');
    assert.equal(await pick('br;q=0, *;q=0.5'), 'zstd');
    assert.equal(await pick('identity'), undefined);
    assert.equal(await pick('deflate'), undefined);
    const none = await get(port(), '/stats/prometheus', {});
    assert.equal(none.headers['content-encoding'], undefined);
    assert.equal(none.headers.vary, 'Accept-Encoding');
    assert.equal(none.raw.toString(), METRICS);
  });

  test('not compressed: a type outside the list, a body under 30 bytes; a strong ETag turns weak', async () => {
    const bin = await get(port(), '/stats/prometheus?kind=binary', { 'accept-encoding': 'gzip' });
    assert.equal(bin.headers['content-encoding'], undefined);
    assert.equal(bin.raw.toString(), METRICS);
    const small = await get(port(), '/stats/prometheus?kind=small', { 'accept-encoding': 'gzip' });
    assert.equal(small.headers['content-encoding'], undefined);
    assert.equal(small.raw.toString(), 'tiny');
    const etag = await get(port(), '/stats/prometheus?kind=etag', { 'accept-encoding': 'gzip' });
    assert.equal(etag.headers['content-encoding'], 'gzip');
    assert.equal(etag.headers.etag, 'W/"v1"');
  });

  test('a 4 MiB body to a client that stops reading, over HTTP/1.1 and HTTP/2: every byte, nothing stuck at the tail', async () => {
    const slow = await get(port(), '/stats/prometheus?kind=big', { 'accept-encoding': 'gzip' }, true);
    assert.equal(slow.headers['content-encoding'], 'gzip');
    assert.equal(sha(decode(slow)), sha(BIG));
    const session = h2connect(`http://127.0.0.1:${port()}`);
    try {
      const r = await new Promise<Reply>((resolve, reject) => {
        const s = session.request({ ':path': '/stats/prometheus?kind=big', 'accept-encoding': 'zstd' });
        const chunks: Buffer[] = [];
        let headers: Record<string, string | string[] | undefined> = {};
        s.on('response', (h) => { headers = h as typeof headers; });
        s.on('data', (c: Buffer) => chunks.push(c));
        s.on('end', () => resolve({ status: Number(headers[':status']), headers, raw: Buffer.concat(chunks) }));
        s.on('error', reject);
      });
      assert.equal(r.headers['content-encoding'], 'zstd');
      assert.equal(sha(decode(r)), sha(BIG));
    } finally { session.close(); }
  });

  test('stats: http.stats.compressor.<library name>.<library>.*', async () => {
    const v = async (n: string): Promise<number> => (await proxy.stat(`http.stats.compressor.${n}`)) ?? -1;
    assert.ok(await v('stats_gzip.gzip.compressed') >= 3);
    assert.ok(await v('stats_brotli.brotli.compressed') >= 3);
    assert.ok(await v('stats_zstd.zstd.compressed') >= 2);
    assert.ok(await v('stats_gzip.gzip.no_accept_header') >= 1);
    assert.ok(await v('stats_gzip.gzip.content_length_too_small') >= 1);
    assert.ok(await v('stats_gzip.gzip.total_uncompressed_bytes') > await v('stats_gzip.gzip.total_compressed_bytes'));
  });
});
