// Envoy's own example configs (shared/fixtures, read in place): every one through --mode validate,
// with the expected verdict per file; then several run for real with their addresses rewritten
// to local test servers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { cleanup, fixturesDir, startProxy, validate, type Json } from './lib/proxy.ts';
import { makeCert, startHttpsBackend, startTcpEcho, type Backend, type EchoReply, type TestCert } from './lib/backends.ts';
import { openSocket, readUntil, request } from './lib/client.ts';
import { parseYaml } from './lib/yaml.ts';

/**
 * The verdict each fixture should get from the features skua-proxy supports today: `ok`, or the
 * field path / type URL the error must name. When support for one of these lands, move the file
 * to `ok` here.
 */
const EXPECTED: Record<string, 'ok' | RegExp> = {
  'envoyproxy-envoy/configs/encapsulate_in_http2_connect.yaml': 'ok',
  'envoyproxy-envoy/configs/terminate_http2_connect.yaml': 'ok',
  'envoyproxy-envoy/configs/envoy-demo.yaml': 'ok',
  'envoyproxy-envoy/configs/envoyproxy_io_proxy.yaml': 'ok',
  'envoyproxy-envoy/configs/internal_listener_proxy.yaml': 'ok',
  'envoyproxy-examples/dynamic-config-cp/envoy.yaml': 'ok',
  // File-based LDS/CDS (path_config_source) is not built: only ADS config sources.
  'envoyproxy-examples/dynamic-config-fs/envoy.yaml': /dynamic_resources\.ads_config: only ADS/,
  'envoyproxy-examples/fault-injection/envoy.yaml': 'ok',
  'envoyproxy-examples/local_ratelimit/envoy.yaml': /http_filters\[0\]\.typed_config.*type\.googleapis\.com\/envoy\.extensions\.filters\.http\.local_ratelimit\.v3\.LocalRateLimit/,
  'envoyproxy-examples/rbac/envoy.yaml': 'ok',
  'envoyproxy-examples/locality-load-balancing/envoy.yaml': /clusters\[0\]\.health_checks/,
  'envoyproxy-examples/route-mirror/envoy.yaml': 'ok',
};

/** A field path as the proxy prints it, e.g. `static_resources.listeners[0].filter_chains[0]`. */
const FIELD_PATH = /[a-z_]+(\[\d+\])?(\.[a-z_@]+(\[\d+\])?)*: /;

function fixtureFiles(): string[] {
  const out: string[] = [];
  const configs = path.join(fixturesDir, 'envoyproxy-envoy', 'configs');
  for (const f of readdirSync(configs).sort()) if (/\.ya?ml$/.test(f)) out.push(`envoyproxy-envoy/configs/${f}`);
  const examples = path.join(fixturesDir, 'envoyproxy-examples');
  for (const d of readdirSync(examples).sort()) if (existsSync(path.join(examples, d, 'envoy.yaml'))) out.push(`envoyproxy-examples/${d}/envoy.yaml`);
  return out;
}

function loadFixture(rel: string): Json {
  return parseYaml(readFileSync(path.join(fixturesDir, rel), 'utf8')) as Json;
}

type SocketAddress = { address: string; port_value: number };

/**
 * Points a fixture at this test: every listener to 127.0.0.1:<ports(old port)>, and every endpoint
 * through `endpoint` (which may move it to a local server); other fields stay as written.
 */
function rewrite(doc: Json, ports: (old: number) => number, endpoint: (a: SocketAddress) => SocketAddress): Json {
  const copy = structuredClone(doc);
  const sr = copy.static_resources as { listeners?: Array<{ address: { socket_address: SocketAddress } }>; clusters?: Json[] };
  for (const l of sr.listeners ?? []) {
    const sa = l.address.socket_address;
    l.address.socket_address = { ...sa, address: '127.0.0.1', port_value: ports(sa.port_value) };
  }
  for (const c of sr.clusters ?? []) {
    const la = c.load_assignment as { endpoints: Array<{ lb_endpoints: Array<{ endpoint: { address: { socket_address: SocketAddress } } }> }> };
    for (const e of la.endpoints) for (const lb of e.lb_endpoints) {
      const sa = lb.endpoint.address.socket_address;
      lb.endpoint.address.socket_address = { ...sa, ...endpoint(sa) };
    }
  }
  return copy;
}

test('fixtures: every Envoy example config through --mode validate', { timeout: 90_000 }, async (t) => {
  assert.ok(existsSync(fixturesDir), `fixtures not found at ${fixturesDir} (shared/ must sit beside the repo)`);
  const files = fixtureFiles();
  assert.ok(files.length >= 10, `only ${files.length} fixture files found`);
  const results: Array<{ file: string; code: number | null; message: string }> = [];
  for (let i = 0; i < files.length; i += 4) {
    const batch = files.slice(i, i + 4);
    const out = await Promise.all(batch.map((f) => validate(path.join(fixturesDir, f))));
    batch.forEach((file, j) => results.push({ file, code: out[j].code, message: (out[j].code === 0 ? out[j].stdout : out[j].stderr).trim().split('\n')[0] }));
  }
  t.diagnostic('fixture | exit | verdict');
  for (const r of results) t.diagnostic(`${r.file} | ${r.code} | ${r.message.replace(`${fixturesDir}/`, '')}`);
  const problems: string[] = [];
  for (const r of results) {
    const expected = EXPECTED[r.file];
    if (expected === 'ok') {
      if (r.code !== 0) problems.push(`${r.file}: expected to validate, got exit ${r.code}: ${r.message}`);
    } else if (expected instanceof RegExp) {
      if (r.code !== 1) problems.push(`${r.file}: expected exit 1 naming ${expected}, got exit ${r.code}`);
      else if (!expected.test(r.message)) problems.push(`${r.file}: the error does not name ${expected}: ${r.message}`);
    } else if (!(r.code === 0 || (r.code === 1 && FIELD_PATH.test(r.message)))) {
      problems.push(`${r.file} (new fixture): exit ${r.code} without a field path: ${r.message}`);
    }
  }
  assert.deepEqual(problems, []);
});

describe('fixtures run for real (addresses rewritten to local servers)', { timeout: 60_000 }, () => {
  let cert: TestCert, tlsBackend: Backend, echo: Backend;
  before(async () => {
    cert = await makeCert('www.envoyproxy.io');
    tlsBackend = await startHttpsBackend(cert, 'envoyproxy.io');
    echo = await startTcpEcho();
  });
  after(() => cleanup(() => tlsBackend?.close(), () => echo?.close(), () => cert?.remove()));

  test('envoy-demo.yaml: listener_0 → loopback cluster → listener_1, whose local_reply_config answers GET with the welcome page', async (t) => {
    const doc = loadFixture('envoyproxy-envoy/configs/envoy-demo.yaml');
    const proxy = await startProxy((p) => rewrite(doc, (old) => p(String(old)), (sa) => ({ ...sa, port_value: p(String(sa.port_value)) })), { ports: ['10000', '10001'] });
    t.after(() => proxy.stop());
    const get = await request(`http://127.0.0.1:${proxy.ports['10000']}/`);
    assert.equal(get.status, 404);
    assert.match(get.text, /<h1>Welcome to Envoy<\/h1>/);
    assert.equal(get.headers['content-type'], 'text/html; charset=UTF-8');
    const post = await request(`http://127.0.0.1:${proxy.ports['10000']}/`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 404);
    assert.doesNotMatch(post.text, /Welcome to Envoy/, 'the mapper only applies to GET');
  });

  test('envoyproxy_io_proxy.yaml: LOGICAL_DNS (localhost) + UpstreamTlsContext sni + host_rewrite_literal', async (t) => {
    const doc = loadFixture('envoyproxy-envoy/configs/envoyproxy_io_proxy.yaml');
    const proxy = await startProxy((p) => rewrite(doc, (old) => p(String(old)), () => ({ address: 'localhost', port_value: tlsBackend.port })), { ports: ['10000'] });
    t.after(() => proxy.stop());
    const r = await request(`http://127.0.0.1:${proxy.ports['10000']}/docs?x=1`);
    assert.equal(r.status, 200, r.text);
    const e = JSON.parse(r.text) as EchoReply;
    assert.equal(e.backend, 'envoyproxy.io');
    assert.equal(e.url, '/docs?x=1');
    assert.equal(e.headers.host, 'www.envoyproxy.io');
    assert.equal(e.servername, 'www.envoyproxy.io');
  });

  test('encapsulate_in_http2_connect.yaml → terminate_http2_connect.yaml: TCP over HTTP/2 CONNECT to an echo server', async (t) => {
    const terminate = await startProxy((p) => rewrite(loadFixture('envoyproxy-envoy/configs/terminate_http2_connect.yaml'),
      (old) => p(String(old)), () => ({ address: 'localhost', port_value: echo.port })), { ports: ['10001'] });
    t.after(() => terminate.stop());
    const encapsulate = await startProxy((p) => rewrite(loadFixture('envoyproxy-envoy/configs/encapsulate_in_http2_connect.yaml'),
      (old) => p(String(old)), (sa) => ({ ...sa, port_value: sa.port_value === 10001 ? terminate.ports['10001'] : sa.port_value })), { ports: ['10000'] });
    t.after(() => encapsulate.stop());
    const payload = randomBytes(512 * 1024);
    const s = await openSocket(encapsulate.ports['10000']);
    try {
      const back = readUntil(s, undefined, 10_000);
      s.end(payload);
      const got = await back;
      assert.equal(got.length, payload.length);
      assert.equal(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(payload).digest('hex'));
    } finally {
      s.destroy();
    }
    assert.ok(((await terminate.stat('http.ingress_http.downstream_rq_total')) ?? 0) >= 1, 'the tunnel went through the terminating HCM');
  });
});

