// h2spec (HTTP/2 conformance, RFC 7540/9113 + HPACK) against skua-proxy, with an HTTP/2 and an
// HTTP/1.1 upstream, and against a bare node:http2 server as the yardstick: the proxy must pass
// every case bare Node passes (so at least as many), stay alive, and close every connection.
// h2spec comes from scripts/go-tools.sh (./dev setup); without Go the test skips, saying so.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Http2Server } from 'node:http2';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cleanup, startProxy, type RunningProxy } from '../lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from '../lib/config.ts';
import { startHttpBackend, type Backend } from '../lib/backends.ts';
import { run, sleep } from '../lib/client.ts';
import { goTool } from '../lib/go-tools.ts';
import { startH2Backend, type H2Backend } from './http2-backend.ts';

type Outcome = 'pass' | 'fail' | 'skip';

interface Report { readonly total: number; readonly passed: number; readonly cases: ReadonlyMap<string, Outcome> }

/** Per-case outcomes from h2spec's JUnit report. */
function parseJunit(xml: string): Report {
  const cases = new Map<string, Outcome>();
  const re = /<testcase package="([^"]*)" classname="([^"]*)"[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g;
  for (let m = re.exec(xml); m; m = re.exec(xml)) {
    const body = m[3] ?? '';
    cases.set(`${m[1]} ${m[2]}`, /<failure|<error/.test(body) ? 'fail' : /<skipped/.test(body) ? 'skip' : 'pass');
  }
  let passed = 0;
  for (const o of cases.values()) if (o === 'pass') passed++;
  return { total: cases.size, passed, cases };
}

describe('h2spec conformance', { timeout: 300_000 }, () => {
  let h2spec = '', skip = '';
  let h2up: H2Backend, h1up: Backend, bare: Http2Server, proxy: RunningProxy, dir = '';

  async function h2specAt(port: number, name: string): Promise<Report> {
    const report = path.join(dir, `${name}.xml`);
    const r = await run(h2spec, ['-h', '127.0.0.1', '-p', String(port), '-j', report], 240_000);
    assert.ok(r.signal === null, `h2spec (${name}) was killed: ${r.stdout.slice(-2000)}`);
    return parseJunit(readFileSync(report, 'utf8'));
  }

  before(async () => {
    const tool = await goTool('h2spec');
    if ('skip' in tool) { skip = tool.skip; return; }
    h2spec = tool.path;
    dir = mkdtempSync(path.join(tmpdir(), 'skua-h2spec-'));
    h2up = await startH2Backend();
    h1up = await startHttpBackend();
    // h2spec opens as many streams as SETTINGS_MAX_CONCURRENT_STREAMS allows (5.1.2): the default
    // 2^31-1 would have it open streams for ever, so the listeners advertise 100.
    const h2opts = { http2_protocol_options: { max_concurrent_streams: 100 } };
    proxy = await startProxy((p) => bootstrap([
      listener(p('h2up'), [chain(hcm([vhost([routeTo('h2', '/')])], { statPrefix: 'h2up', codec: 'HTTP2', extra: h2opts }))]),
      listener(p('h1up'), [chain(hcm([vhost([routeTo('h1', '/')])], { statPrefix: 'h1up', codec: 'HTTP2', extra: h2opts }))]),
    ], [cluster('h2', [h2up.port], { http2: true }), cluster('h1', [h1up.port])]), { ports: ['h2up', 'h1up'] });
    bare = createServer();
    bare.on('stream', (s) => { s.on('error', () => { /* h2spec resets */ }); s.resume(); s.respond({ ':status': 200 }); s.end('ok'); });
    await new Promise<void>((r) => bare.listen(0, '127.0.0.1', () => r()));
  });
  after(() => cleanup(
    () => proxy?.stop(), () => h2up?.close(), () => h1up?.close(),
    () => new Promise<void>((r) => (bare ? bare.close(() => r()) : r())),
    () => { if (dir) rmSync(dir, { recursive: true, force: true }); },
  ));

  test('the proxy passes every h2spec case bare node:http2 passes, with an HTTP/2 and an HTTP/1.1 upstream', async (t) => {
    if (skip) { t.skip(skip); return; }
    const yardstick = await h2specAt((bare.address() as { port: number }).port, 'bare');
    assert.ok(yardstick.total >= 140, `h2spec ran ${yardstick.total} cases`);
    for (const name of ['h2up', 'h1up'] as const) {
      const r = await h2specAt(proxy.ports[name], name);
      t.diagnostic(`h2spec ${name}: ${r.passed}/${r.total} passed (bare node:http2: ${yardstick.passed}/${yardstick.total})`);
      const regressions = [...yardstick.cases].filter(([k, o]) => o === 'pass' && r.cases.get(k) !== 'pass').map(([k]) => k);
      assert.deepEqual(regressions, [], `cases bare Node passes that fail through the proxy (${name})`);
      assert.ok(r.passed >= yardstick.passed, `${name}: ${r.passed} < ${yardstick.passed}`);
    }
    // Alive, and every h2spec connection closed.
    assert.equal((await proxy.admin('/ready')).status, 200);
    for (let i = 0; i < 100 && ((await proxy.stat('http.h2up.downstream_cx_active')) ?? 0) + ((await proxy.stat('http.h1up.downstream_cx_active')) ?? 0) > 0; i++) await sleep(50);
    assert.equal(await proxy.stat('http.h2up.downstream_cx_active'), 0);
    assert.equal(await proxy.stat('http.h1up.downstream_cx_active'), 0);
  });
});
