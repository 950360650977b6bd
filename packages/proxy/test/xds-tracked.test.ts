// CDS / EDS resources are remembered for /config_dump as their bytes and decoded on each read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeResource, setUnknownFieldPolicy } from '../src/xds/decode.ts';
import { encodeResource } from '../src/xds/encode.ts';
import { TYPE_URL } from '../src/xds/discovery.ts';
import { resourceHash, track, TrackedBytes } from '../src/xds/state.ts';

test('tracked bytes read back as the resource, without counting its unknown fields again', () => {
  const cluster = { '@type': TYPE_URL.cluster, name: 'outbound|80||ñ.svc', type: 'EDS', connect_timeout: '1.5s', metadata: { filter_metadata: { istio: { services: [{ host: 'a' }] } } } };
  const any = encodeResource(cluster);
  // Field 999 (varint 1), unknown to the descriptors.
  const value = Buffer.concat([Buffer.from(any.value), Buffer.from([0xb8, 0x3e, 0x01])]);
  let unknown = 0;
  setUnknownFieldPolicy({ mode: 'warn', onUnknown: () => { unknown++; } });
  try {
    const json = decodeResource({ type_url: TYPE_URL.cluster, value });
    assert.equal(unknown, 1);
    const t = track({ name: 'c', version: 'v1', json, any: { type_url: TYPE_URL.cluster, value } }, 'v1', 'h', true);
    assert.ok(t instanceof TrackedBytes);
    assert.deepEqual(t.json, json);
    assert.deepEqual(t.json, json);
    assert.equal(unknown, 1, 'config_dump reads do not count unknown fields');
    assert.equal(t.version, 'v1');
  } finally {
    setUnknownFieldPolicy({ mode: 'warn' });
  }
});

test('a resource without bytes is kept as its JSON, or as nothing on a worker; hashes follow the bytes', () => {
  const json = { name: 'x' };
  assert.equal(track({ name: 'x', version: '1', json }, '1', '', true).json, json);
  assert.deepEqual(track({ name: 'x', version: '1', json }, '1', '', false).json, {});
  const a = encodeResource({ '@type': TYPE_URL.cluster, name: 'x' });
  const b = encodeResource({ '@type': TYPE_URL.cluster, name: 'y' });
  assert.equal(resourceHash({ name: 'x', version: '', json, any: a }), resourceHash({ name: 'x', version: '', json: {}, any: a }));
  assert.notEqual(resourceHash({ name: 'x', version: '', json, any: a }), resourceHash({ name: 'x', version: '', json, any: b }));
});
