import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { applySetCookies, compileHashPolicies, computeRequestHash, computeRequestHashInto, type HashPolicies, type HashRequest } from '../src/http/hash-policy.ts';
import { xxHash64 } from '../src/upstream/lb-hash.ts';

const compile = (list: unknown[]): HashPolicies => {
  const p = compileHashPolicies(list.map((raw, i) => new Msg(raw, `route.hash_policy[${i}]`)));
  assert.ok(p, 'compiled to something');
  return p;
};
const req = (headers: Record<string, string | string[]> = {}, path = '/', more: Partial<HashRequest> = {}): HashRequest => ({ headers, path, ...more });
const conn = { remoteAddress: '1.2.3.4', remotePort: 5678, localAddress: '10.0.0.1', localPort: 80 };
const rotl1 = (h: bigint): bigint => ((h << 1n) | (h >> 63n)) & (2n ** 64n - 1n);

describe('compileHashPolicies', () => {
  const fails = (list: unknown[], path: string, re: RegExp): void => {
    assert.throws(() => compileHashPolicies(list.map((raw, i) => new Msg(raw, `route.hash_policy[${i}]`))),
      (e: unknown) => e instanceof ConfigError && e.path === path && re.test(e.message), `expected ConfigError at ${path}`);
  };

  test('empty list: undefined', () => {
    assert.equal(compileHashPolicies([]), undefined);
    assert.equal(compileHashPolicies([new Msg({ connection_properties: { source_ip: false } }, 'p')]), undefined);
  });

  test('errors name the field', () => {
    fails([{}], 'route.hash_policy[0]', /one of header, cookie/);
    fails([{ header: { header_name: 'a' }, cookie: { name: 'b' } }], 'route.hash_policy[0].cookie', /only one of/);
    fails([{ header: { header_name: 'x' } }, { filter_state: { key: 'k' } }], 'route.hash_policy[1].filter_state', /not supported/);
    fails([{ header: {} }], 'route.hash_policy[0].header.header_name', /required/);
    fails([{ header: { header_name: 'bad name' } }], 'route.hash_policy[0].header.header_name', /invalid header name/);
    fails([{ header: { header_name: 'x', regex_rewrite: { pattern: { regex: '(' }, substitution: '' } } }], 'route.hash_policy[0].header.regex_rewrite.pattern.regex', /invalid regular expression/);
    fails([{ header: { header_name: 'x', regex_rewrite: { pattern: { regex: '(a)' }, substitution: '\\2' } } }], 'route.hash_policy[0].header.regex_rewrite.substitution', /capture group/);
    fails([{ cookie: { name: '' } }], 'route.hash_policy[0].cookie.name', /required/);
    fails([{ cookie: { name: 'a', attributes: [{ name: 'x;y' }] } }], 'route.hash_policy[0].cookie.attributes[0].name', /invalid/);
    fails([{ query_parameter: {} }], 'route.hash_policy[0].query_parameter.name', /required/);
    fails([{ header: { header_name: 'x', extra: 1 } }], 'route.hash_policy[0].header.extra', /not supported/);
  });

  test('generatesCookies only for a cookie policy with ttl', () => {
    assert.equal(compile([{ cookie: { name: 'a' } }]).generatesCookies, false);
    assert.equal(compile([{ cookie: { name: 'a', ttl: '0s' } }]).generatesCookies, true);
  });
});

describe('header policy', () => {
  const p = compile([{ header: { header_name: 'X-User' } }]);

  test('hashes the value with xxHash64; no header, no hash', () => {
    assert.equal(computeRequestHash(p, req({ 'x-user': 'foo' })), xxHash64('foo'));
    assert.equal(computeRequestHash(p, req({ 'x-user': '' })), xxHash64(''), 'an empty value still hashes');
    assert.equal(computeRequestHash(p, req({})), undefined);
  });

  test('several values hash sorted, each seeded with the previous hash (order does not matter)', () => {
    const sorted = xxHash64('foo', xxHash64('bar'));
    assert.equal(computeRequestHash(p, req({ 'x-user': ['foo', 'bar'] })), sorted);
    assert.equal(computeRequestHash(p, req({ 'x-user': ['bar', 'foo'] })), sorted);
    assert.equal(computeRequestHash(p, req({ 'x-user': [] })), undefined);
  });

  test('header bytes are hashed as received (Node decodes them as latin1)', () => {
    // "é" sent as UTF-8 arrives as the two chars \u00c3\u00a9: the hash is that of the UTF-8 bytes.
    assert.equal(computeRequestHash(p, req({ 'x-user': '\u00c3\u00a9' })), xxHash64('é'));
  });

  test('pseudo-headers read the request itself', () => {
    const a = compile([{ header: { header_name: ':authority' } }]);
    assert.equal(computeRequestHash(a, req({}, '/', { authority: 'svc.local' })), xxHash64('svc.local'));
    const path = compile([{ header: { header_name: ':path' } }]);
    assert.equal(computeRequestHash(path, req({}, '/a?b=1')), xxHash64('/a?b=1'));
    const host = compile([{ header: { header_name: 'host' } }]);
    assert.equal(computeRequestHash(host, req({}, '/', { authority: 'h:80' })), xxHash64('h:80'));
  });

  test('regex_rewrite applies to the value before hashing (RE2 \\1 substitutions)', () => {
    const rw = compile([{ header: { header_name: 'x-path', regex_rewrite: { pattern: { regex: '^/(\\w+)/\\d+$' }, substitution: '\\1' } } }]);
    assert.equal(computeRequestHash(rw, req({ 'x-path': '/users/123' })), xxHash64('users'));
    const all = compile([{ header: { header_name: 'x', regex_rewrite: { pattern: { regex: '\\d' }, substitution: '#$\\0' } } }]);
    assert.equal(computeRequestHash(all, req({ x: 'a1b2' })), xxHash64('a#$1b#$2'), 'global replace; $ is literal; \\0 is the match');
    const lit = compile([{ header: { header_name: 'x', regex_rewrite: { pattern: { regex: '(a)' }, substitution: '\\10' } } }]);
    assert.equal(computeRequestHash(lit, req({ x: 'a' })), xxHash64('a0'), 'a digit after \\1 stays literal');
  });
});

describe('combining policies', () => {
  test('hash = rotl(hash, 1) ^ next', () => {
    const p = compile([{ header: { header_name: 'a' } }, { header: { header_name: 'b' } }]);
    assert.equal(computeRequestHash(p, req({ a: 'x', b: 'y' })), rotl1(xxHash64('x')) ^ xxHash64('y'));
    assert.equal(computeRequestHash(p, req({ b: 'y' })), xxHash64('y'), 'a policy without a value is skipped');
  });

  test('duplicate policies do not cancel out', () => {
    const p = compile([{ header: { header_name: 'a' } }, { header: { header_name: 'a' } }]);
    const h = xxHash64('x');
    assert.equal(computeRequestHash(p, req({ a: 'x' })), rotl1(h) ^ h);
    assert.notEqual(computeRequestHash(p, req({ a: 'x' })), 0n);
  });

  test('terminal: a terminal policy that produced a hash ends the walk; one that did not, does not', () => {
    const p = compile([{ header: { header_name: 'a' }, terminal: true }, { header: { header_name: 'b' } }]);
    assert.equal(computeRequestHash(p, req({ a: 'x', b: 'y' })), xxHash64('x'));
    assert.equal(computeRequestHash(p, req({ b: 'y' })), xxHash64('y'));
  });

  test('computeRequestHashInto writes the halves', () => {
    const p = compile([{ header: { header_name: 'a' } }]);
    const out = new Uint32Array(2);
    assert.equal(computeRequestHashInto(p, req({ a: 'foo' }), undefined, undefined, out), true);
    assert.equal((BigInt(out[1]) << 32n) | BigInt(out[0]), xxHash64('foo'));
    assert.equal(computeRequestHashInto(p, req({}), undefined, undefined, out), false);
  });
});

describe('cookie policy', () => {
  test('hashes the cookie value; quotes are dropped; first match wins', () => {
    const p = compile([{ cookie: { name: 'session' } }]);
    assert.equal(computeRequestHash(p, req({ cookie: 'a=1; session=abc; z=2' })), xxHash64('abc'));
    assert.equal(computeRequestHash(p, req({ cookie: 'session="abc"' })), xxHash64('abc'));
    assert.equal(computeRequestHash(p, req({ cookie: 'session=abc; session=def' })), xxHash64('abc'));
    assert.equal(computeRequestHash(p, req({ cookie: ['a=1', 'session=q'] })), xxHash64('q'));
    assert.equal(computeRequestHash(p, req({ cookie: 'xsession=abc; sessionx=1' })), undefined);
    assert.equal(computeRequestHash(p, req({})), undefined, 'absent and no ttl: no hash');
    assert.equal(computeRequestHash(p, req({ cookie: 'session=' })), undefined, 'empty value and no ttl: no hash');
  });

  test('ttl set and cookie absent: a cookie is generated from the connection and must be set on the response', () => {
    const p = compile([{ cookie: { name: 'sticky', ttl: '3600s', path: '/app', attributes: [{ name: 'SameSite', value: 'Strict' }, { name: 'Secure' }] } }]);
    const cookies: string[] = [];
    const h = computeRequestHash(p, req({}), conn, cookies);
    // Envoy: hex(xxHash64(remote "ip:port" + local "ip:port")), 16 lower-case digits.
    const value = xxHash64('1.2.3.4:567810.0.0.1:80').toString(16).padStart(16, '0');
    assert.equal(value, '5e1192314817394d');
    assert.deepEqual(cookies, [`sticky="${value}"; Max-Age=3600; Path=/app; SameSite=Strict; Secure; HttpOnly`]);
    assert.equal(h, xxHash64(value));
    // The client sends it back: same hash, nothing generated.
    const again: string[] = [];
    assert.equal(computeRequestHash(p, req({ cookie: `sticky="${value}"` }), conn, again), h);
    assert.deepEqual(again, []);
  });

  test('ttl 0 makes a session cookie; IPv6 addresses are bracketed', () => {
    const p = compile([{ cookie: { name: 's', ttl: { seconds: 0 } } }]);
    const cookies: string[] = [];
    computeRequestHash(p, req({}), { remoteAddress: '::1', remotePort: 1, localAddress: '::1', localPort: 2 }, cookies);
    const value = xxHash64('[::1]:1[::1]:2').toString(16).padStart(16, '0');
    assert.deepEqual(cookies, [`s="${value}"; HttpOnly`]);
  });

  test('no connection: no cookie, no hash', () => {
    const p = compile([{ cookie: { name: 's', ttl: '10s' } }]);
    assert.equal(computeRequestHash(p, req({})), undefined);
  });

  test('applySetCookies keeps the upstream set-cookie headers', () => {
    const h: Record<string, string | string[] | undefined> = { 'set-cookie': 'up=1' };
    applySetCookies(h, ['s="x"; HttpOnly']);
    assert.deepEqual(h['set-cookie'], ['up=1', 's="x"; HttpOnly']);
    const e: Record<string, string | string[] | undefined> = {};
    applySetCookies(e, ['a']);
    assert.deepEqual(e['set-cookie'], ['a']);
  });
});

describe('source_ip and query_parameter', () => {
  test('source_ip hashes the address without port; IPv4-mapped IPv6 counts as IPv4', () => {
    const p = compile([{ connection_properties: { source_ip: true } }]);
    assert.equal(computeRequestHash(p, req(), { remoteAddress: '10.1.2.3' }), 0x43bc2967acb25af4n);
    assert.equal(computeRequestHash(p, req(), { remoteAddress: '10.1.2.3' }), xxHash64('10.1.2.3'));
    assert.equal(computeRequestHash(p, req(), { remoteAddress: '::ffff:10.1.2.3' }), xxHash64('10.1.2.3'));
    assert.equal(computeRequestHash(p, req(), { remoteAddress: '2001:db8::1' }), xxHash64('2001:db8::1'));
    assert.equal(computeRequestHash(p, req()), undefined);
  });

  test('query_parameter: the first value, undecoded; a bare name hashes ""', () => {
    const p = compile([{ query_parameter: { name: 'user' } }]);
    assert.equal(computeRequestHash(p, req({}, '/p?a=1&user=bob&user=eve')), xxHash64('bob'));
    assert.equal(computeRequestHash(p, req({}, '/p?user=a%20b')), xxHash64('a%20b'));
    assert.equal(computeRequestHash(p, req({}, '/p?x=1&user')), xxHash64(''));
    assert.equal(computeRequestHash(p, req({}, '/p?username=x&xuser=y')), undefined);
    assert.equal(computeRequestHash(p, req({}, '/p')), undefined);
    assert.equal(computeRequestHash(p, req({}, '/user=bob')), undefined, 'only after ?');
  });
});
