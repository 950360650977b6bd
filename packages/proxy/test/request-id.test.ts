import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomRequestId } from '../src/core/request-id.ts';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('request ids are version-4 UUIDs, distinct across many pool refills', () => {
  const seen = new Set<string>();
  // 256 ids per refill: 5,000 ids cross the pool boundary many times.
  for (let i = 0; i < 5000; i++) {
    const id = randomRequestId();
    assert.match(id, UUID_V4);
    seen.add(id);
  }
  assert.equal(seen.size, 5000);
});

test('request ids are flat strings that keep their value after the scratch buffer is reused', () => {
  const a = randomRequestId();
  const copy = `${a}`;
  randomRequestId();
  assert.equal(a, copy);
  assert.equal(Buffer.byteLength(a, 'latin1'), 36);
});

test('every hex digit position varies (no byte of the pool is skipped or reused)', () => {
  const positions = Array.from({ length: 36 }, () => new Set<string>());
  for (let i = 0; i < 2000; i++) {
    const id = randomRequestId();
    for (let p = 0; p < 36; p++) positions[p].add(id[p]);
  }
  for (let p = 0; p < 36; p++) {
    if ([8, 13, 18, 23].includes(p)) assert.deepEqual([...positions[p]], ['-']);
    else if (p === 14) assert.deepEqual([...positions[p]], ['4']);
    else if (p === 19) assert.equal(positions[p].size, 4, 'variant nibble takes 8, 9, a, b');
    else assert.equal(positions[p].size, 16, `position ${p} takes all 16 hex digits`);
  }
});
