// External authorization (Istio's CUSTOM AuthorizationPolicy) through a real skua-proxy: a real
// grpc-js Authorization server written here (allow with header edits, deny with its own status,
// headers and body, a slow answer that hits the timeout), a real node:http authorization server
// for http_service, and a real echo backend behind the proxy. Checks what the authorization
// servers receive (attributes, headers, the buffered body), what the backend receives, what the
// client gets, the UAEX flag in the access log, and Envoy's stat names.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect as h2connect } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Server as GrpcServer, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, T } from './lib/config.ts';
import { authProtos } from '../packages/proxy/src/filters/http/ext_authz/protos.ts';

type Json = Record<string, unknown>;

const EXT_AUTHZ = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz';
const PER_ROUTE = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute';
const CHECK = '/envoy.service.auth.v3.Authorization/Check';

/** What the gRPC authorization server saw: the decoded CheckRequest attributes. */
interface SeenCheck {
  readonly http: Json & { headers: Record<string, string>; path: string; body?: string; size?: number };
  readonly attributes: Json;
  /** :authority of the Check call. */
  readonly authority: string;
}

/** The Authorization service: its answer depends on the checked request's path. */
async function startGrpcAuthz(seen: SeenCheck[]): Promise<{ port: number; close(): void }> {
  const p = authProtos();
  const server = new GrpcServer();
  const answer = (path: string): Json => {
    if (path.startsWith('/deny')) {
      return {
        status: { code: 7 },
        denied_response: {
          status: { code: 401 }, body: 'custom denied',
          headers: [{ header: { key: 'www-authenticate', value: 'Bearer realm="authz"' } }, { header: { key: 'x-deny-reason', value: 'no-token' } }],
        },
      };
    }
    if (path.startsWith('/plain-deny')) return { status: { code: 7 } };
    return {
      status: { code: 0 },
      ok_response: {
        headers: [
          { header: { key: 'x-authz-user', value: 'alice' } },
          { header: { key: 'x-existing', value: 'two' }, append: { value: true } },
          { header: { key: 'x-absent', value: 'never' }, append: { value: true } },
        ],
        headers_to_remove: ['x-remove-me'],
        response_headers_to_add: [{ header: { key: 'x-authz-resp', value: 'r1' } }],
        query_parameters_to_set: [{ key: 'added', value: '1' }],
      },
      dynamic_metadata: { fields: { user: { stringValue: 'alice' } } },
    };
  };
  server.register(CHECK, (call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => {
    const req = p.checkRequest.toObject(p.checkRequest.decode(call.request), { longs: Number, defaults: false }) as { attributes: Json };
    const http = (req.attributes.request as Json).http as SeenCheck['http'];
    seen.push({ http, attributes: req.attributes, authority: call.getHost() });
    const reply = (): void => cb(null, Buffer.from(p.checkResponse.encode(p.checkResponse.fromObject(answer(http.path))).finish()));
    if (http.path.startsWith('/slow')) setTimeout(reply, 2000); else reply();
  }, (b: Buffer) => b, (b: Buffer) => b, 'unary');
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
  return { port, close: () => server.forceShutdown() };
}

interface SeenHttpCheck { readonly method: string; readonly url: string; readonly headers: IncomingHttpHeaders; readonly body: string }

/** The http_service authorization server: 200 allows, 403 denies with a body, 500 is an error. */
async function startHttpAuthz(seen: SeenHttpCheck[]): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
      const url = req.url ?? '';
      if (url.startsWith('/authz/deny')) {
        res.writeHead(403, { 'content-type': 'text/plain', 'x-deny': 'yes', 'x-secret': 'hidden' }).end('http denied');
      } else if (url.startsWith('/authz/broken')) {
        res.writeHead(500).end('oops');
      } else {
        res.writeHead(200, { 'x-authz-user': 'bob', 'x-not-allowed': 'no', 'x-envoy-auth-headers-to-remove': 'x-drop' }).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

const authzLog = (tag: string): Json[] => [{
  name: 'envoy.access_loggers.stdout',
  typed_config: { '@type': T.stdoutLog, log_format: { text_format: `${tag} %REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%\n` } },
}];

function authzHcm(statPrefix: string, extAuthz: Json, routes: Json[]): Json {
  return hcm([{ name: 'vh', domains: ['*'], routes }], {
    statPrefix,
    extra: {
      access_log: authzLog(statPrefix.toUpperCase()),
      http_filters: [
        { name: 'envoy.filters.http.ext_authz', typed_config: { '@type': EXT_AUTHZ, ...extAuthz } },
        { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } },
      ],
    },
  });
}

const grpcService = (timeout: string): Json => ({
  grpc_service: { envoy_grpc: { cluster_name: 'outbound|9191||ext-authz-grpc', authority: 'ext-authz-grpc.local' }, timeout },
  transport_api_version: 'V3',
});

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('ext_authz (e2e)', { timeout: 90_000 }, () => {
  let backend: Backend, grpcAuthz: { port: number; close(): void }, httpAuthz: Server, proxy: RunningProxy;
  const checks: SeenCheck[] = [];
  const httpChecks: SeenHttpCheck[] = [];
  const url = (port: string, path: string): string => `http://127.0.0.1:${proxy.ports[port]}${path}`;
  const lastCheck = (path: string): SeenCheck | undefined => checks.filter((c) => c.http.path === path).at(-1);

  before(async () => {
    backend = await startHttpBackend('authz-backend');
    grpcAuthz = await startGrpcAuthz(checks);
    httpAuthz = await startHttpAuthz(httpChecks);
    const httpAuthzPort = (httpAuthz.address() as AddressInfo).port;
    const toBackend = { route: { cluster: 'backend' } };
    proxy = await startProxy((p) => bootstrap([
      listener(p('grpc'), [chain(authzHcm('authz_grpc', {
        ...grpcService('1s'), with_request_body: { max_request_bytes: 32, allow_partial_message: true },
      }, [
        { match: { prefix: '/public' }, ...toBackend, typed_per_filter_config: { 'envoy.filters.http.ext_authz': { '@type': PER_ROUTE, disabled: true } } },
        { match: { prefix: '/' }, ...toBackend, typed_per_filter_config: { 'envoy.filters.http.ext_authz': { '@type': PER_ROUTE, check_settings: { context_extensions: { route: 'main' } } } } },
      ]))]),
      listener(p('fma'), [chain(authzHcm('authz_fma', { ...grpcService('0.3s'), failure_mode_allow: true, failure_mode_allow_header_add: true },
        [{ match: { prefix: '/' }, ...toBackend }]))]),
      listener(p('strict'), [chain(authzHcm('authz_strict', { ...grpcService('0.5s'), with_request_body: { max_request_bytes: 16 } },
        [{ match: { prefix: '/' }, ...toBackend }]))]),
      listener(p('http'), [chain(authzHcm('authz_http', {
        http_service: {
          server_uri: { uri: `http://ext-authz-http:${httpAuthzPort}`, cluster: 'ext-authz-http', timeout: '1s' },
          path_prefix: '/authz',
          authorization_request: { headers_to_add: [{ key: 'x-authz-caller', value: 'skua' }] },
          authorization_response: {
            allowed_upstream_headers: { patterns: [{ exact: 'x-authz-user' }] },
            allowed_client_headers: { patterns: [{ exact: 'x-deny' }, { exact: 'content-type' }] },
          },
        },
        allowed_headers: { patterns: [{ exact: 'x-user' }] },
      }, [{ match: { prefix: '/' }, ...toBackend }]))]),
    ], [
      cluster('backend', [backend.port]),
      cluster('outbound|9191||ext-authz-grpc', [grpcAuthz.port], { http2: true }),
      cluster('ext-authz-http', [httpAuthzPort]),
    ]), { ports: ['grpc', 'fma', 'strict', 'http'] });
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close(), () => grpcAuthz?.close(), () => new Promise((r) => httpAuthz?.close(r))));

  test('allowed: the backend gets the request with the header edits; the client gets response_headers_to_add', async () => {
    const r = await request(url('grpc', '/allow?x=1'), { headers: { 'x-existing': 'one', 'x-remove-me': 'bye', 'x-user': 'carol' } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['x-authz-resp'], 'r1');
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.url, '/allow?x=1&added=1', 'query_parameters_to_set');
    assert.equal(echo.headers['x-authz-user'], 'alice');
    assert.equal(echo.headers['x-existing'], 'one,two', 'append joins an existing header');
    assert.equal(echo.headers['x-absent'], undefined, 'append never creates a header');
    assert.equal(echo.headers['x-remove-me'], undefined);
    const c = lastCheck('/allow?x=1');
    assert.ok(c, 'the authorization server saw the check');
    assert.equal(c.authority, 'ext-authz-grpc.local', 'envoy_grpc.authority');
    assert.equal(c.http.method, 'GET');
    assert.equal(c.http.host, `127.0.0.1:${proxy.ports.grpc}`);
    assert.equal(c.http.scheme, 'http');
    assert.equal(c.http.protocol, 'HTTP/1.1');
    assert.equal(c.http.headers[':path'], '/allow?x=1');
    assert.equal(c.http.headers[':method'], 'GET');
    assert.equal(c.http.headers['x-user'], 'carol');
    assert.equal(c.http.body, undefined, 'no body on a GET');
    assert.deepEqual(c.attributes.context_extensions, { route: 'main' });
    const src = ((c.attributes.source as Json).address as Json).socket_address as Json;
    const dst = ((c.attributes.destination as Json).address as Json).socket_address as Json;
    assert.equal(src.address, '127.0.0.1');
    assert.equal(dst.port_value, proxy.ports.grpc);
  });

  test('denied: the client gets the server\'s status, headers and body; UAEX; the backend is never reached', async () => {
    const before = backend.requests.length;
    const r = await request(url('grpc', '/deny/1'));
    assert.equal(r.status, 401);
    assert.equal(r.text, 'custom denied');
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="authz"');
    assert.equal(r.headers['x-deny-reason'], 'no-token');
    assert.equal(backend.requests.length, before);
    const line = await proxy.waitForStdout(/^AUTHZ_GRPC \/deny\/1 /m);
    assert.equal(line.trim(), 'AUTHZ_GRPC /deny/1 401 UAEX ext_authz_denied');
    const plain = await request(url('grpc', '/plain-deny'));
    assert.equal(plain.status, 403, 'a non-OK status without denied_response is a 403');
    assert.equal(plain.text, '');
  });

  test('timeout: 403 with UAEX (status_on_error); with failure_mode_allow the request passes, marked', async () => {
    const r = await request(url('grpc', '/slow/a'));
    assert.equal(r.status, 403);
    const line = await proxy.waitForStdout(/^AUTHZ_GRPC \/slow\/a /m);
    assert.equal(line.trim(), 'AUTHZ_GRPC /slow/a 403 UAEX ext_authz_error');
    const allowed = await request(url('fma', '/slow/b'));
    assert.equal(allowed.status, 200, allowed.text);
    assert.equal((JSON.parse(allowed.text) as EchoReply).headers['x-envoy-auth-failure-mode-allowed'], 'true');
  });

  test('a client that leaves during the check: the call is cancelled, the request ends as DC, the backend never sees it', async () => {
    const before = backend.requests.length;
    // HTTP/2: the client resets its stream while the check is pending.
    const client = h2connect(`http://127.0.0.1:${proxy.ports.grpc}`);
    try {
      const s = client.request({ ':method': 'GET', ':path': '/slow/gone' });
      s.on('error', () => { /* our own reset */ });
      await new Promise((r) => setTimeout(r, 200));
      s.close(8 /* CANCEL */);
    } finally {
      client.close();
    }
    const line = await proxy.waitForStdout(/^AUTHZ_GRPC \/slow\/gone /m);
    assert.match(line.trim(), /^AUTHZ_GRPC \/slow\/gone \d+ DC /);
    assert.equal(backend.requests.length, before);
    assert.equal((await request(url('grpc', '/allow/after-gone'))).status, 200, 'the proxy keeps serving');
  });

  test('with_request_body: the check carries the body (cut at max_request_bytes); the backend still gets all of it', async () => {
    const small = Buffer.from('hello body');
    const r1 = await request(url('grpc', '/allow/small'), { method: 'POST', body: small, headers: { 'content-type': 'text/plain' } });
    assert.equal(r1.status, 200, r1.text);
    assert.equal((JSON.parse(r1.text) as EchoReply).bodySha256, sha(small));
    const c1 = lastCheck('/allow/small');
    assert.equal(c1?.http.body, 'hello body');
    assert.equal(c1?.http.size, small.length);
    assert.equal(c1?.http.headers['x-envoy-auth-partial-body'], 'false');

    const big = Buffer.from('0123456789'.repeat(1000));
    const r2 = await request(url('grpc', '/allow/big'), { method: 'POST', body: big });
    assert.equal(r2.status, 200, r2.text);
    const echo = JSON.parse(r2.text) as EchoReply;
    assert.equal(echo.bodyBytes, big.length);
    assert.equal(echo.bodySha256, sha(big), 'the buffered prefix and the rest reach the backend intact');
    const c2 = lastCheck('/allow/big');
    assert.equal(c2?.http.body, big.subarray(0, 32).toString());
    assert.equal(c2?.http.headers['x-envoy-auth-partial-body'], 'true');

    const tooBig = await request(url('strict', '/allow/strict'), { method: 'POST', body: Buffer.alloc(17, 'x') });
    assert.equal(tooBig.status, 413, 'without allow_partial_message a body over the limit is refused');
    assert.equal(tooBig.text, 'Payload Too Large');
  });

  test('HTTP/2 downstream: the buffered body is replayed upstream', async () => {
    const client = h2connect(`http://127.0.0.1:${proxy.ports.grpc}`);
    try {
      const body = Buffer.from('h2 body '.repeat(100));
      const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const s = client.request({ ':method': 'POST', ':path': '/allow/h2' });
        let status = 0;
        const chunks: Buffer[] = [];
        s.on('response', (h) => { status = Number(h[':status']); });
        s.on('data', (d: Buffer) => chunks.push(d));
        s.on('end', () => resolve({ status, text: Buffer.concat(chunks).toString() }));
        s.on('error', reject);
        s.end(body);
      });
      assert.equal(res.status, 200, res.text);
      assert.equal((JSON.parse(res.text) as EchoReply).bodySha256, sha(body));
      assert.equal(lastCheck('/allow/h2')?.http.protocol, 'HTTP/2');
    } finally {
      client.close();
    }
  });

  test('per-route disabled skips the check', async () => {
    const n = checks.length;
    const r = await request(url('grpc', '/public/page'));
    assert.equal(r.status, 200);
    assert.equal(checks.length, n);
  });

  test('http_service: allowed headers go to the server under path_prefix; allowed_upstream_headers reach the backend', async () => {
    const r = await request(url('http', '/allow/h?q=1'), { headers: { 'x-user': 'bob', 'x-other': 'no', authorization: 'Bearer t', 'x-drop': 'me' } });
    assert.equal(r.status, 200, r.text);
    const seen = httpChecks.at(-1) as SeenHttpCheck;
    assert.equal(seen.url, '/authz/allow/h?q=1');
    assert.equal(seen.method, 'GET');
    assert.equal(seen.headers.host, `127.0.0.1:${proxy.ports.http}`);
    assert.equal(seen.headers['x-user'], 'bob');
    assert.equal(seen.headers.authorization, 'Bearer t');
    assert.equal(seen.headers['x-other'], undefined, 'headers outside allowed_headers stay home');
    assert.equal(seen.headers['x-authz-caller'], 'skua');
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.headers['x-authz-user'], 'bob');
    assert.equal(echo.headers['x-not-allowed'], undefined);
    assert.equal(echo.headers['x-drop'], undefined, 'x-envoy-auth-headers-to-remove');
  });

  test('http_service: a denial is relayed with its allowed headers; a 5xx is an error (403)', async () => {
    const r = await request(url('http', '/deny/h'));
    assert.equal(r.status, 403);
    assert.equal(r.text, 'http denied');
    assert.equal(r.headers['x-deny'], 'yes');
    assert.equal(r.headers['x-secret'], undefined);
    const line = await proxy.waitForStdout(/^AUTHZ_HTTP \/deny\/h /m);
    assert.equal(line.trim(), 'AUTHZ_HTTP /deny/h 403 UAEX ext_authz_denied');
    const broken = await request(url('http', '/broken'));
    assert.equal(broken.status, 403);
    assert.equal(broken.text, '');
  });

  test('stats as Envoy names them', async () => {
    // grpc listener: ok = allow, after-gone, small, big, h2; denied = deny, plain-deny; error = slow (the cancelled call counts nothing).
    assert.equal(await proxy.stat('http.authz_grpc.ext_authz.ok'), 5);
    assert.equal(await proxy.stat('http.authz_grpc.ext_authz.denied'), 2);
    assert.equal(await proxy.stat('http.authz_grpc.ext_authz.error'), 1);
    assert.equal(await proxy.stat('http.authz_fma.ext_authz.error'), 1);
    assert.equal(await proxy.stat('http.authz_fma.ext_authz.failure_mode_allowed'), 1);
    assert.equal(await proxy.stat('http.authz_http.ext_authz.ok'), 1);
    assert.equal(await proxy.stat('http.authz_http.ext_authz.denied'), 1);
    assert.equal(await proxy.stat('http.authz_http.ext_authz.error'), 1);
    // The route's cluster counts too (6 OK checks over the gRPC listeners and the HTTP one).
    assert.equal(await proxy.stat('cluster.backend.ext_authz.ok'), 6);
    assert.equal(await proxy.stat('cluster.backend.ext_authz.denied'), 3);
  });
});
