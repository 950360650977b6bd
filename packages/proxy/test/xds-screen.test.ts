// What the ADS client refuses before the config layer sees a response (screen.ts), rule by rule,
// on real encoded Anys: whole-response refusals, refusals by name, duplicates, unsubscribed names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { screenResponse } from '../src/xds/screen.ts';
import { TYPE_URL, type AnyBytes } from '../src/xds/discovery.ts';
import { encodeResource } from '../src/xds/encode.ts';

const route = (name: string): AnyBytes => encodeResource({ '@type': TYPE_URL.route, name });
const cluster = (name: string): AnyBytes => encodeResource({ '@type': TYPE_URL.cluster, name, type: 'STATIC' });
const sotw = (anys: AnyBytes[]) => anys.map((any) => ({ version: 'v1', any }));
const SOTW = { delta: false, full: false };

test('SotW RDS: every copy of a duplicated name is refused, the other names apply', async () => {
  const s = await screenResponse(TYPE_URL.route, sotw([route('a'), route('b'), route('a')]), [], undefined, SOTW);
  assert.equal(s.fatal, undefined);
  assert.deepEqual(s.resources.map((r) => r.name), ['b']);
  assert.deepEqual(s.refused, [{ name: 'a', message: 'duplicate route configuration a found' }, { name: 'a', message: 'duplicate route configuration a found' }]);
});

test('SotW CDS (full state): the first copy stands, later ones are refused', async () => {
  const s = await screenResponse(TYPE_URL.cluster, sotw([cluster('a'), cluster('a')]), [], undefined, { delta: false, full: true });
  assert.deepEqual(s.resources.map((r) => r.name), ['a']);
  assert.deepEqual(s.refused, [{ name: 'a', message: 'duplicate cluster a found' }]);
});

test('only subscribed names pass; a removal of a name never asked for is dropped', async () => {
  const wanted = (n: string): boolean => n === 'a' || n === 'b';
  const s = await screenResponse(TYPE_URL.route, [{ name: 'a', version: '1', any: route('a') }, { name: 'z', version: '1', any: route('z') }], ['y', 'b'], wanted, { delta: true, full: false });
  assert.equal(s.fatal, undefined);
  assert.deepEqual(s.resources.map((r) => r.name), ['a']);
  assert.deepEqual(s.removed, ['b']);
});

test('an Any whose type URL differs, or whose bytes do not decode, refuses the whole response', async () => {
  const mismatch = await screenResponse(TYPE_URL.route, sotw([route('a'), cluster('c')]), [], undefined, SOTW);
  assert.deepEqual(mismatch.resources, []);
  assert.match(mismatch.fatal?.lines[0].message ?? '', /^type URL .*Cluster does not match the message-wide type URL .*RouteConfiguration$/);
  assert.equal(mismatch.fatal?.lines[0].name, 'resources[1]');
  assert.deepEqual(mismatch.fatal?.named, [], 'SotW: no name to show as error_state');
  const garbage = await screenResponse(TYPE_URL.route, [{ name: 'a', version: '1', any: { type_url: TYPE_URL.route, value: Uint8Array.from([0x0a, 0xff]) } }], [], undefined, { delta: true, full: false });
  assert.equal(garbage.fatal?.named[0].name, 'a', 'Delta: the wrapper names it');
});

test('Delta: a name both added and removed refuses the response', async () => {
  const s = await screenResponse(TYPE_URL.route, [{ name: 'a', version: '1', any: route('a') }], ['a'], undefined, { delta: true, full: false });
  assert.equal(s.fatal?.lines[0].message, 'duplicate name a found in the union of added+removed resources');
});
