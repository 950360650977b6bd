import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeRequestPath, type PathNormalization } from '../src/http/path-normalize.ts';

const N: PathNormalization = { normalize: true, mergeSlashes: false, escapedSlashes: 'KEEP_UNCHANGED' };

describe('HCM path normalisation (RFC 3986, as normalize_path / merge_slashes / escaped slashes)', () => {
  const cases: Array<[string, PathNormalization, string]> = [
    ['/a/./b/../c', N, '/a/c'],
    ['/a/b/..', N, '/a/'],
    ['/../../x', N, '/x'],
    ['/%61%62c/%7e', N, '/abc/~'],
    ['/a%2fb', N, '/a%2Fb'],
    ['/a\\b\\..\\c', N, '/a/c'],
    ['/a/b?x=/../y#f', N, '/a/b?x=/../y#f'],
    ['//a///b', { ...N, mergeSlashes: true }, '/a/b'],
    ['//a//b', { normalize: false, mergeSlashes: true, escapedSlashes: 'KEEP_UNCHANGED' }, '/a/b'],
    ['/a%2Fb', { normalize: false, mergeSlashes: false, escapedSlashes: 'UNESCAPE_AND_FORWARD' }, '/a/b'],
  ];
  for (const [input, opts, want] of cases) {
    test(`${input} → ${want}`, () => assert.deepEqual(normalizeRequestPath(input, opts), { kind: 'ok', path: want }));
  }
  test('a path with no backslash, escape or dot segment comes back as it is (names with dots are not segments)', () => {
    for (const path of ['/', '/a/b', '/.well-known/acme', '/a.b/c..d/...', '/x/.hidden/..dots', '/a/b/', '/api/v1/items?x=/./y']) {
      assert.deepEqual(normalizeRequestPath(path, N), { kind: 'ok', path });
    }
    // A dot segment at the end, or followed by a slash, is one.
    assert.deepEqual(normalizeRequestPath('/a/.', N), { kind: 'ok', path: '/a/' });
    assert.deepEqual(normalizeRequestPath('/a/b/../', N), { kind: 'ok', path: '/a/' });
  });
  test('a bad percent-escape or a path that is not origin-form is rejected', () => {
    assert.deepEqual(normalizeRequestPath('/a%zz', N), { kind: 'reject' });
    assert.deepEqual(normalizeRequestPath('a/b', N), { kind: 'reject' });
  });
  test('escaped slashes: REJECT_REQUEST rejects, UNESCAPE_AND_REDIRECT redirects to the unescaped path', () => {
    assert.deepEqual(normalizeRequestPath('/a%2fb', { ...N, escapedSlashes: 'REJECT_REQUEST' }), { kind: 'reject' });
    assert.deepEqual(normalizeRequestPath('/a%2Fb?q', { ...N, escapedSlashes: 'UNESCAPE_AND_REDIRECT' }), { kind: 'redirect', path: '/a/b?q' });
  });
});
