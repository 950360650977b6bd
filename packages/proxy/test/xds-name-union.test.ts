// The union of SDS secret names that clusters and listeners use, with a revision the ADS client
// compares instead of the names (re-read after every response).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NameUnion } from '../src/xds/name-union.ts';

test('a name stays subscribed while any owner uses it; the revision moves only when the union does', () => {
  const u = new NameUnion();
  u.set('cluster/a', ['default', 'ROOTCA']);
  const r1 = u.revision;
  assert.deepEqual([...u.names].sort(), ['ROOTCA', 'default']);
  u.set('cluster/b', ['default', 'ROOTCA']);
  assert.equal(u.revision, r1, 'a second owner of the same names changes nothing');
  u.set('cluster/b', ['default', 'ROOTCA']);
  assert.equal(u.revision, r1, 'the same list again changes nothing');
  u.delete('cluster/a');
  assert.deepEqual([...u.names].sort(), ['ROOTCA', 'default'], 'b still uses both');
  assert.equal(u.revision, r1);
  u.set('cluster/b', ['default']);
  assert.deepEqual([...u.names], ['default']);
  assert.notEqual(u.revision, r1, 'ROOTCA left the union');
  const r2 = u.revision;
  u.set('listener/x', ['file-cert']);
  assert.notEqual(u.revision, r2);
  assert.deepEqual(u.of('listener/x'), ['file-cert']);
  u.delete('cluster/b');
  u.delete('listener/x');
  assert.deepEqual(u.of('listener/x'), []);
  u.delete('listener/never-set');
  assert.equal(u.names.size, 0);
});

test('an owner listing a name twice releases it once it drops the name', () => {
  const u = new NameUnion();
  u.set('listener/l', ['a', 'a']);
  u.set('listener/l', ['b']);
  assert.deepEqual([...u.names], ['b']);
});
