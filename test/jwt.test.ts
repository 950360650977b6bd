// JWT authentication (as istiod generates it from a RequestAuthentication) in front of RBAC,
// through a real skua-proxy: tokens signed here with node:crypto, a remote JWKS served by a real
// local HTTP server through a cluster (fetched once, then cached), Envoy's 401 bodies and
// www-authenticate, and the verified claims reaching RBAC's metadata principals.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, T, vhost } from './lib/config.ts';

const JWT_AUTHN = 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication';
const HTTP_RBAC = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';
const LOCAL_ISS = 'https://issuer.example';
const REMOTE_ISS = 'https://remote.example';

const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' });

function token(alg: 'ES256' | 'RS256' | 'PS256', key: KeyObject, kid: string, claims: Record<string, unknown>): string {
  const enc = (o: unknown): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  const data = `${enc({ alg, kid, typ: 'JWT' })}.${enc(claims)}`;
  const opts = alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' as const }
    : alg === 'PS256' ? { key, padding: 6 /* RSA_PKCS1_PSS_PADDING */, saltLength: 32 } : key;
  return `${data}.${sign('sha256', Buffer.from(data), opts).toString('base64url')}`;
}

const now = (): number => Math.floor(Date.now() / 1000);
const localJwks = JSON.stringify({ keys: [{ ...ec.publicKey.export({ format: 'jwk' }), kid: 'ec-1', alg: 'ES256', use: 'sig' }] });
const remoteJwks = JSON.stringify({ keys: [{ ...rsa.publicKey.export({ format: 'jwk' }), kid: 'rsa-1' }] });

describe('jwt_authn + RBAC (e2e)', { timeout: 60_000 }, () => {
  let backend: Backend, jwksServer: Server, jwksHits = 0, proxy: RunningProxy, base: string;

  before(async () => {
    backend = await startHttpBackend('jwt-backend');
    jwksServer = createServer((req, res) => {
      if (req.url !== '/keys/jwks.json') { res.writeHead(404).end(); return; }
      jwksHits++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(remoteJwks);
    });
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
    const jwksPort = (jwksServer.address() as AddressInfo).port;
    const provider = (extra: Record<string, unknown>) => ({ forward: false, payload_in_metadata: 'payload', ...extra });
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([{ match: { prefix: '/' }, route: { cluster: 'backend' } }])], {
        statPrefix: 'jwt_e2e',
        extra: {
          http_filters: [
            {
              name: 'envoy.filters.http.jwt_authn',
              typed_config: {
                '@type': JWT_AUTHN,
                providers: {
                  'origins-0': provider({ issuer: LOCAL_ISS, local_jwks: { inline_string: localJwks }, forward_payload_header: 'x-jwt-payload' }),
                  'origins-1': provider({
                    issuer: REMOTE_ISS, audiences: ['api.example'],
                    remote_jwks: { http_uri: { uri: `http://jwks.example:${jwksPort}/keys/jwks.json`, cluster: 'jwks', timeout: '2s' }, cache_duration: '300s' },
                  }),
                },
                rules: [
                  { match: { prefix: '/strict' }, requires: { provider_name: 'origins-0' } },
                  { match: { prefix: '/' }, requires: { requires_any: { requirements: [{ provider_name: 'origins-0' }, { provider_name: 'origins-1' }, { allow_missing: {} }] } } },
                ],
                bypass_cors_preflight: true,
              },
            },
            {
              name: 'envoy.filters.http.rbac',
              typed_config: {
                '@type': HTTP_RBAC,
                rules: {
                  policies: {
                    'alice': {
                      permissions: [{ any: true }],
                      principals: [{ and_ids: { ids: [
                        { metadata: { filter: 'envoy.filters.http.jwt_authn', path: [{ key: 'payload' }, { key: 'iss' }], value: { string_match: { exact: LOCAL_ISS } } } },
                        { metadata: { filter: 'envoy.filters.http.jwt_authn', path: [{ key: 'payload' }, { key: 'sub' }], value: { string_match: { exact: 'alice' } } } },
                      ] } }],
                    },
                    'admins': {
                      permissions: [{ any: true }],
                      principals: [{ metadata: { filter: 'envoy.filters.http.jwt_authn', path: [{ key: 'payload' }, { key: 'groups' }], value: { list_match: { one_of: { string_match: { exact: 'admins' } } } } } }],
                    },
                    'public': { permissions: [{ url_path: { path: { prefix: '/public' } } }], principals: [{ any: true }] },
                  },
                },
              },
            },
            { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } },
          ],
        },
      }))]),
    ], [cluster('backend', [backend.port]), cluster('jwks', [jwksPort])]), { ports: ['http'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close(), () => new Promise((r) => jwksServer?.close(r))));

  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  const realm = (path: string) => `Bearer realm="http://127.0.0.1:${proxy.ports.http}${path}"`;

  test('a valid ES256 token passes; its claims reach RBAC; the token is not forwarded, the payload is', async () => {
    const t = token('ES256', ec.privateKey, 'ec-1', { iss: LOCAL_ISS, sub: 'alice', exp: now() + 600 });
    const r = await request(`${base}/data?x=1`, { headers: bearer(t) });
    assert.equal(r.status, 200);
    const echo = JSON.parse(r.text) as EchoReply;
    assert.equal(echo.headers.authorization, undefined, 'forward: false removes the token');
    assert.equal(JSON.parse(Buffer.from(echo.headers['x-jwt-payload'] as string, 'base64url').toString()).sub, 'alice');
  });

  test('a valid token whose claims no policy allows is a 403 from RBAC, not a 401', async () => {
    const t = token('ES256', ec.privateKey, 'ec-1', { iss: LOCAL_ISS, sub: 'bob', exp: now() + 600 });
    const r = await request(`${base}/data`, { headers: bearer(t) });
    assert.equal(r.status, 403);
    assert.equal(r.text, 'RBAC: access denied');
  });

  const failures: Array<[string, () => string, number, string]> = [
    ['expired', () => token('ES256', ec.privateKey, 'ec-1', { iss: LOCAL_ISS, sub: 'alice', exp: now() - 120 }), 401, 'Jwt is expired'],
    ['not yet valid', () => token('ES256', ec.privateKey, 'ec-1', { iss: LOCAL_ISS, sub: 'alice', nbf: now() + 600 }), 401, 'Jwt not yet valid'],
    ['wrong issuer', () => token('ES256', ec.privateKey, 'ec-1', { iss: 'https://evil.example', sub: 'alice' }), 401, 'Jwt issuer is not configured'],
    ['bad signature', () => token('ES256', stranger.privateKey, 'ec-1', { iss: LOCAL_ISS, sub: 'alice' }), 401, 'Jwt verification fails'],
    ['unknown kid', () => token('ES256', ec.privateKey, 'ec-9', { iss: LOCAL_ISS, sub: 'alice' }), 401, "Jwks doesn't have key to match kid or alg from Jwt"],
    ['not a JWT', () => 'abc.def', 401, 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections'],
    ['remote issuer, wrong audience', () => token('RS256', rsa.privateKey, 'rsa-1', { iss: REMOTE_ISS, aud: 'other.example', sub: 'carol' }), 403, 'Audiences in Jwt are not allowed'],
  ];
  for (const [name, make, status, body] of failures) {
    test(`${name}: ${status} "${body}"`, async () => {
      const r = await request(`${base}/data?q=1`, { headers: bearer(make()) });
      assert.equal(r.status, status);
      assert.equal(r.text, body);
      assert.equal(r.headers['www-authenticate'], `${realm('/data')}, error="invalid_token"`);
    });
  }

  test('missing token: 401 "Jwt is missing" where a provider is required; allowed through allow_missing to RBAC elsewhere', async () => {
    const r = await request(`${base}/strict/x`);
    assert.equal(r.status, 401);
    assert.equal(r.text, 'Jwt is missing');
    assert.equal(r.headers['www-authenticate'], realm('/strict/x'));
    assert.equal((await request(`${base}/public/x`)).status, 200);
    assert.equal((await request(`${base}/private`)).status, 403, 'no token, no policy');
  });

  test('remote JWKS through the cluster: RS256 and PS256 tokens verify, the keys are fetched once', async () => {
    const before = jwksHits;
    for (const alg of ['RS256', 'PS256', 'RS256'] as const) {
      const t = token(alg, rsa.privateKey, 'rsa-1', { iss: REMOTE_ISS, aud: 'https://api.example/', sub: 'carol', groups: ['dev', 'admins'], exp: now() + 600 });
      const r = await request(`${base}/admin`, { headers: bearer(t) });
      assert.equal(r.status, 200, `${alg}: ${r.text}`);
    }
    assert.ok(jwksHits - before <= 1, `fetched ${jwksHits - before} times`);
    assert.equal(jwksHits, 1);
    assert.equal(await proxy.stat('http.jwt_e2e.jwt_authn.jwks_fetch_success'), 1);
  });

  test('CORS preflights bypass verification; stats count allowed and denied', async () => {
    const r = await request(`${base}/strict/x`, { method: 'OPTIONS', headers: { origin: 'http://a.example', 'access-control-request-method': 'GET' } });
    assert.notEqual(r.status, 401);
    assert.equal(await proxy.stat('http.jwt_e2e.jwt_authn.cors_preflight_bypassed'), 1);
    assert.equal(await proxy.stat('http.jwt_e2e.jwt_authn.denied'), failures.length + 1);
    assert.ok(((await proxy.stat('http.jwt_e2e.jwt_authn.allowed')) ?? 0) >= 6);
  });
});
