// TLS: downstream TLS with ALPN (curl --http2 / --http1.1), filter chain selection by SNI
// (tls_inspector + server_names) and by destination port, and upstream TLS clusters (SNI, CA, SAN).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as tlsConnect } from 'node:tls';
import { cleanup, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { makeCert, startHttpBackend, startHttpsBackend, type Backend, type EchoReply, type TestCert } from './lib/backends.ts';
import { request, run } from './lib/client.ts';
import { T, bootstrap, chain, cluster, directResponse, downstreamTls, hcm, listener, routeTo, vhost } from './lib/config.ts';

/** The certificate CN a TLS server presents for `servername` (or the handshake error). */
function presentedCn(port: number, servername: string): Promise<string> {
  return new Promise((resolve) => {
    const s = tlsConnect({ port, host: '127.0.0.1', servername, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
    const timer = setTimeout(() => { s.destroy(); resolve('timeout'); }, 3000);
    s.once('secureConnect', () => { clearTimeout(timer); const cn = s.getPeerCertificate().subject?.CN; s.destroy(); resolve(String(cn)); });
    s.once('error', (e: NodeJS.ErrnoException) => { clearTimeout(timer); resolve(`error: ${e.code ?? e.message}`); });
  });
}

function upstreamTls(sni: string | undefined, validation?: Json): Json {
  return {
    transport_socket: {
      name: 'envoy.transport_sockets.tls',
      typed_config: { '@type': T.upstreamTls, ...(sni ? { sni } : {}), ...(validation ? { common_tls_context: { validation_context: validation } } : {}) },
    },
  };
}

const ca = (cert: TestCert, san?: string): Json => ({
  trusted_ca: { filename: cert.certPath },
  ...(san ? { match_typed_subject_alt_names: [{ san_type: 'DNS', matcher: { exact: san } }] } : {}),
});

let certs: Record<'proxy' | 'a' | 'b' | 'wild' | 'backend', TestCert>;
before(async () => {
  const [p, a, b, w, be] = await Promise.all([makeCert('proxy.test', ['127.0.0.1']), makeCert('a.test'), makeCert('b.test'), makeCert('*.wild.test'), makeCert('backend.test')]);
  certs = { proxy: p, a, b, wild: w, backend: be };
});
after(() => { for (const c of Object.values(certs ?? {})) c.remove(); });

describe('downstream TLS with ALPN', { timeout: 30_000 }, () => {
  let backend: Backend, proxy: RunningProxy;
  before(async () => {
    backend = await startHttpBackend();
    proxy = await startProxy((p) => bootstrap([
      listener(p('tls'), [chain(hcm([vhost([routeTo('backend')])], { statPrefix: 'tls' }), { transport_socket: downstreamTls(certs.proxy.certPath, certs.proxy.keyPath, ['h2', 'http/1.1']) })]),
    ], [cluster('backend', [backend.port])]), { ports: ['tls'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close()));

  test('curl --http1.1 negotiates http/1.1; the upstream sees x-forwarded-proto https', async () => {
    const r = await run('curl', ['-sk', '--http1.1', '-m', '10', '-w', '\n%{http_version}', `https://127.0.0.1:${proxy.ports.tls}/alpn-h1`]);
    assert.equal(r.code, 0, r.stderr);
    const [body, version] = r.stdout.split('\n');
    assert.equal(version, '1.1');
    const echo = JSON.parse(body) as EchoReply;
    assert.equal(echo.url, '/alpn-h1');
    assert.equal(echo.headers['x-forwarded-proto'], 'https');
  });

  test('plaintext to a TLS listener does not get an HTTP answer', async () => {
    await assert.rejects(request(`http://127.0.0.1:${proxy.ports.tls}/plain`, { timeoutMs: 3000 }));
  });

  test('curl --http2 negotiates h2 by ALPN', async () => {
    const r = await run('curl', ['-sk', '--http2', '-m', '10', '-w', '\n%{http_version}', `https://127.0.0.1:${proxy.ports.tls}/alpn-h2`]);
    assert.equal(r.code, 0, r.stderr);
    const [body, version] = r.stdout.split('\n');
    assert.equal(version, '2');
    const echo = JSON.parse(body) as EchoReply;
    assert.equal(echo.url, '/alpn-h2');
    assert.equal(echo.headers['x-forwarded-proto'], 'https');
  });
});

describe('filter chain selection', { timeout: 30_000 }, () => {
  let proxy: RunningProxy;
  before(async () => {
    const sniChain = (names: string[], cert: TestCert, body: string): Json =>
      chain(hcm([vhost([directResponse(200, body)])], { statPrefix: `sni_${body}` }), { filter_chain_match: { server_names: names }, transport_socket: downstreamTls(cert.certPath, cert.keyPath) });
    const portChains = (one: number, two: number): Json[] => [
      chain(hcm([vhost([directResponse(200, 'port-one')])], { statPrefix: 'p1' }), { filter_chain_match: { destination_port: one } }),
      chain(hcm([vhost([directResponse(200, 'port-two')])], { statPrefix: 'p2' }), { filter_chain_match: { destination_port: two } }),
    ];
    proxy = await startProxy((p) => bootstrap([
      listener(p('sni'), [sniChain(['a.test'], certs.a, 'chain-a'), sniChain(['b.test'], certs.b, 'chain-b'), sniChain(['*.wild.test'], certs.wild, 'chain-wild')],
        { name: 'sni', listenerFilters: [{ name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': T.tlsInspector } }] }),
      listener(p('dp1'), portChains(p('dp1'), p('dp2')), { name: 'dp1' }),
      listener(p('dp2'), portChains(p('dp1'), p('dp2')), { name: 'dp2' }),
    ], []), { ports: ['sni', 'dp1', 'dp2'] });
  });
  after(() => cleanup(() => proxy?.stop()));

  test('by SNI: each name gets its chain and its certificate', async () => {
    for (const [name, cn, body] of [['a.test', 'a.test', 'chain-a'], ['b.test', 'b.test', 'chain-b'], ['x.wild.test', '*.wild.test', 'chain-wild']]) {
      assert.equal(await presentedCn(proxy.ports.sni, name), cn);
      const r = await run('curl', ['-sk', '--http1.1', '-m', '10', '--resolve', `${name}:${proxy.ports.sni}:127.0.0.1`, `https://${name}:${proxy.ports.sni}/`]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, body);
    }
  });

  test('by SNI: an unknown name matches no chain and the connection is closed', async () => {
    const stat = `listener.127.0.0.1_${proxy.ports.sni}.no_filter_chain_match`;
    const before = (await proxy.stat(stat)) ?? 0;
    assert.match(await presentedCn(proxy.ports.sni, 'c.test'), /^error: /);
    const r = await run('curl', ['-sk', '-m', '10', '--resolve', `c.test:${proxy.ports.sni}:127.0.0.1`, `https://c.test:${proxy.ports.sni}/`]);
    assert.notEqual(r.code, 0);
    assert.ok(((await proxy.stat(stat)) ?? 0) >= before + 2, `${stat} did not count the two connections`);
  });

  test('by destination port: the same chains on two listeners answer differently', async () => {
    assert.equal((await request(`http://127.0.0.1:${proxy.ports.dp1}/`)).text, 'port-one');
    assert.equal((await request(`http://127.0.0.1:${proxy.ports.dp2}/`)).text, 'port-two');
  });
});

describe('upstream TLS (UpstreamTlsContext)', { timeout: 30_000 }, () => {
  let secure: Backend, proxy: RunningProxy, base: string;
  before(async () => {
    secure = await startHttpsBackend(certs.backend);
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([
        routeTo('secure', '/upstream-tls'),
        routeTo('nosni', '/no-sni'),
        routeTo('wrongca', '/wrong-ca'),
        routeTo('wrongsan', '/wrong-san'),
      ])], { statPrefix: 'up' }))]),
    ], [
      cluster('secure', [secure.port], { extra: upstreamTls('backend.test', ca(certs.backend, 'backend.test')) }),
      cluster('nosni', [secure.port], { extra: upstreamTls(undefined) }),
      cluster('wrongca', [secure.port], { extra: upstreamTls('backend.test', ca(certs.a)) }),
      cluster('wrongsan', [secure.port], { extra: upstreamTls('backend.test', ca(certs.backend, 'other.test')) }),
    ]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => secure?.close()));

  test('SNI from the context; the backend certificate is verified against trusted_ca and the SAN', async () => {
    const r = await request(`${base}/upstream-tls`);
    assert.equal(r.status, 200, r.text);
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.backend, 'https');
    assert.equal(echo.servername, 'backend.test');
    assert.equal(echo.url, '/upstream-tls');
  });

  test('without sni no SNI is sent', async () => {
    const r = await request(`${base}/no-sni`);
    assert.equal(r.status, 200, r.text);
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.backend, 'https');
    assert.equal(echo.servername, undefined);
  });

  test('an untrusted CA or a SAN mismatch fails the connection (503), nothing reaches the backend', async () => {
    const before = secure.requests.length;
    for (const path of ['/wrong-ca', '/wrong-san']) {
      const r = await request(`${base}${path}`);
      assert.equal(r.status, 503, `${path}: ${r.text}`);
      assert.match(r.text, /^upstream connect error or disconnect\/reset before headers\./);
    }
    assert.equal(secure.requests.length, before);
  });
});
