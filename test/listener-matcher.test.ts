// Listener.filter_chain_matcher end to end: one skua-proxy listener on 0.0.0.0 whose unified matcher
// has the shape istiod gives the waypoint's main_internal (DestinationIPInput → IPMatcher → port /
// application protocol maps, on_no_match), plus TLS transport / SNI predicates, exclusive ranges and a
// name that is not a chain. Real clients (node:http, curl over h2c, raw TCP, a real ClientHello) reach
// the chain the matcher names; without a default chain an unmatched connection is closed and counted.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { createHash } from 'node:crypto';
import { startProxy, cleanup, type Json, type RunningProxy } from './lib/proxy.ts';
import { startTcpEcho, patternStream, patternDigest, type Backend } from './lib/backends.ts';
import { request, openSocket, readUntil, run, have } from './lib/client.ts';
import { chain, hcm, vhost, tcpProxy, cluster, directResponse, socketAddress } from './lib/config.ts';

const NET = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.';
const input = (kind: string): Json => ({ name: kind, typed_config: { '@type': NET + kind } });
const action = (name: string): Json => ({ action: { name, typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: name } } });
const nested = (matcher: Json): Json => ({ matcher });
const exactTree = (kind: string, map: Record<string, Json>, onNoMatch?: Json): Json =>
  ({ matcher_tree: { input: input(kind), exact_match_map: { map } }, ...(onNoMatch ? { on_no_match: onNoMatch } : {}) });
const range = (ip: string, len: number, onMatch: Json, exclusive = false): Json =>
  ({ ranges: [{ address_prefix: ip, prefix_len: len }], on_match: onMatch, ...(exclusive ? { exclusive: true } : {}) });
const inspectors: Json[] = [
  { name: 'envoy.filters.listener.tls_inspector', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector' } },
  { name: 'envoy.filters.listener.http_inspector', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector' } },
];
const answering = (name: string): Json => chain(hcm([vhost([directResponse(200, name)])], { statPrefix: name }), { name });

/** A TCP server that answers `<name> <bytes received> <sha256>` once the client half-closes. */
async function startCounter(name: string): Promise<{ port: number; server: Server }> {
  const server = createServer({ allowHalfOpen: true }, (s: Socket) => {
    const h = createHash('sha256');
    let n = 0;
    s.on('data', (b: Buffer) => { n += b.length; h.update(b); });
    s.on('end', () => s.end(`${name} ${n} ${h.digest('hex')}`));
    s.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, server };
}

/** The bytes of a real ClientHello (node:tls) for `servername` and ALPN h2. */
async function clientHello(servername: string): Promise<Buffer> {
  const sink = createServer();
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const got = new Promise<Buffer>((resolve) => sink.once('connection', (s: Socket) => s.once('data', (b: Buffer) => { resolve(b); s.destroy(); })));
  const c = tlsConnect({ host: '127.0.0.1', port: (sink.address() as { port: number }).port, servername, ALPNProtocols: ['h2'], rejectUnauthorized: false });
  c.on('error', () => {});
  const hello = await got;
  c.destroy();
  await new Promise<void>((r) => sink.close(() => r()));
  return hello;
}

async function sendAndRead(host: string, port: number, data: Buffer): Promise<string> {
  const s = await openSocket(port, host);
  s.end(data);
  return (await readUntil(s, undefined, 5000)).toString();
}

describe('filter_chain_matcher selects filter chains by name, with real traffic', () => {
  let proxy: RunningProxy;
  let echo: Backend;
  let tlsSide: { port: number; server: Server };
  before(async () => {
    echo = await startTcpEcho();
    tlsSide = await startCounter('tls-a');
    proxy = await startProxy((ports) => {
      const p = ports('main');
      const matcher: Json = {
        matcher_tree: {
          input: input('DestinationIPInput'),
          custom_match: {
            name: 'ip',
            typed_config: {
              '@type': 'type.googleapis.com/xds.type.matcher.v3.IPMatcher',
              range_matchers: [
                // istiod's VIP entry: the service port names the chain.
                range('127.0.0.2', 32, nested(exactTree('DestinationPortInput', { [String(p)]: action('vip-http') }))),
                // istiod's workload entry: HTTP by the http_inspector, else raw TCP.
                range('127.0.0.3', 32, nested(exactTree('ApplicationProtocolInput', { "'h2c'": action('direct-http'), "'http/1.1'": action('direct-http') }, action('direct-tcp')))),
                // A more specific range whose nested match fails: non-exclusive falls back to the /8, exclusive does not.
                range('127.0.0.4', 32, nested(exactTree('DestinationPortInput', { 1: action('vip-http') }))),
                range('127.0.0.5', 32, nested(exactTree('DestinationPortInput', { 1: action('vip-http') })), true),
                // A chain name the listener does not have: the match fails, the default chain serves.
                range('127.0.0.6', 32, action('no-such-chain')),
                // TLS with an SNI under example.com (a matcher_list with an and_matcher of two inputs).
                range('127.0.0.7', 32, nested({
                  matcher_list: { matchers: [{
                    predicate: { and_matcher: { predicate: [
                      { single_predicate: { input: input('TransportProtocolInput'), value_match: { exact: 'tls' } } },
                      { single_predicate: { input: input('ServerNameInput'), value_match: { suffix: '.example.com' } } },
                    ] } },
                    on_match: action('tls-a'),
                  }] },
                })),
                range('127.0.0.0', 8, action('wide')),
              ],
            },
          },
        },
      };
      const strict: Json = {
        name: 'strict', address: socketAddress(ports('strict'), '0.0.0.0'),
        filter_chains: [answering('only')],
        filter_chain_matcher: exactTree('DestinationIPInput', { '127.0.0.9': action('only') }),
      };
      return {
        static_resources: {
          listeners: [{
            name: 'main', address: socketAddress(p, '0.0.0.0'), listener_filters: inspectors,
            filter_chains: [
              answering('vip-http'), answering('direct-http'), answering('wide'),
              chain(tcpProxy('echo', { stat_prefix: 'direct-tcp' }), { name: 'direct-tcp' }),
              chain(tcpProxy('tls_side', { stat_prefix: 'tls-a' }), { name: 'tls-a' }),
            ],
            default_filter_chain: answering('default'),
            filter_chain_matcher: matcher,
          }, strict],
          clusters: [cluster('echo', [echo.port]), cluster('tls_side', [tlsSide.port])],
        },
      };
    }, { ports: ['main', 'strict'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => echo?.close(), () => new Promise<void>((r) => tlsSide ? tlsSide.server.close(() => r()) : r())));

  const get = async (host: string): Promise<string> => (await request(`http://${host}:${proxy.ports.main}/`)).text;

  test('destination IP then port (the VIP entry); the /8 catches the rest of loopback', async () => {
    assert.equal(await get('127.0.0.2'), 'vip-http');
    assert.equal(await get('127.0.0.1'), 'wide');
    assert.equal(await get('127.0.0.8'), 'wide');
  });

  test('a failed nested match: non-exclusive falls to the wider range, exclusive to the default chain; an unknown name to the default chain', async () => {
    assert.equal(await get('127.0.0.4'), 'wide');
    assert.equal(await get('127.0.0.5'), 'default');
    assert.equal(await get('127.0.0.6'), 'default');
  });

  test('application protocol: HTTP/1.1 and h2c (curl --http2-prior-knowledge) reach direct-http, raw TCP reaches direct-tcp with every byte', async (t) => {
    assert.equal(await get('127.0.0.3'), 'direct-http');
    if (await have('curl')) {
      const r = await run('curl', ['-s', '--http2-prior-knowledge', '-w', ' %{http_version}', `http://127.0.0.3:${proxy.ports.main}/`], 10_000);
      assert.equal(r.stdout, 'direct-http 2');
    } else t.diagnostic('curl missing: h2c case skipped');
    const total = 3 << 20;
    const s = await openSocket(proxy.ports.main, '127.0.0.3');
    const h = createHash('sha256');
    let bytes = 0;
    s.on('data', (b: Buffer) => { bytes += b.length; h.update(b); });
    const ended = new Promise<void>((r) => s.once('end', r));
    patternStream(total).pipe(s);
    await ended;
    s.destroy();
    assert.equal(bytes, total);
    assert.equal(h.digest('hex'), patternDigest(total));
  });

  test('TLS transport and SNI suffix (a real ClientHello) reach tls-a; another SNI falls back to the /8', async () => {
    const hello = await clientHello('api.example.com');
    const answer = await sendAndRead('127.0.0.7', proxy.ports.main, hello);
    assert.equal(answer, `tls-a ${hello.length} ${createHash('sha256').update(hello).digest('hex')}`);
    const other = await clientHello('api.example.org');
    // 'wide' is HTTP: a ClientHello is not HTTP, so the HCM closes the connection without routing it to tls-a.
    const s = await openSocket(proxy.ports.main, '127.0.0.7');
    s.end(other);
    const reply = (await readUntil(s, undefined, 5000)).toString();
    assert.doesNotMatch(reply, /tls-a/);
  });

  test('no match and no default chain: the connection is closed and counted', async () => {
    const before = (await proxy.stat(`listener.0.0.0.0_${proxy.ports.strict}.no_filter_chain_match`)) ?? 0;
    assert.equal((await request(`http://127.0.0.9:${proxy.ports.strict}/`)).text, 'only');
    await assert.rejects(request(`http://127.0.0.1:${proxy.ports.strict}/`), /socket hang up|ECONNRESET/);
    assert.equal(await proxy.stat(`listener.0.0.0.0_${proxy.ports.strict}.no_filter_chain_match`), before + 1);
  });
});
