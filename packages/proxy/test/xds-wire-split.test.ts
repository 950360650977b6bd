// Lazily decoded discovery responses: the split keeps each resource's bytes and decodes the rest as before.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeAnyBytes, decodeDeltaResource, encodeDeltaResponse, encodeSotwResponse, removedNames, splitDeltaResponse, splitSotwResponse, TYPE_URL,
} from '../src/xds/discovery.ts';
import { encodeResource } from '../src/xds/encode.ts';
import { decodeResource } from '../src/xds/decode.ts';
import { splitRepeated } from '../src/xds/wire-split.ts';
import { CONFIG_SLICE_MS, TimeSlice } from '../src/core/time-slice.ts';

const cluster = (name: string): { type_url: string; value: Uint8Array } => encodeResource({ '@type': TYPE_URL.cluster, name, type: 'EDS' });

describe('split discovery responses', () => {
  test('SotW: every Any comes back as it went, the other fields decode as before', async () => {
    const anys = Array.from({ length: 300 }, (_, i) => cluster(`c${i}`));
    const bytes = encodeSotwResponse({ version_info: 'v7', resources: anys, type_url: TYPE_URL.cluster, nonce: 'n1' });
    const { response, resources } = await splitSotwResponse(bytes);
    assert.deepEqual({ ...response, resources: [] }, { version_info: 'v7', resources: [], type_url: TYPE_URL.cluster, nonce: 'n1' });
    assert.equal(resources.length, 300);
    const back = decodeAnyBytes(resources.at(299));
    assert.equal(back.type_url, TYPE_URL.cluster);
    assert.equal(decodeResource(back).name, 'c299');
  });

  test('Delta: names, versions and removals; a wrapper without a resource stays one', async () => {
    const bytes = encodeDeltaResponse({
      system_version_info: 's1', type_url: TYPE_URL.cluster, nonce: 'n2', removed_resources: ['gone1', 'gone2'],
      resources: [{ name: 'a', version: '1', resource: cluster('a') }, { name: 'b', version: '2', resource: undefined }],
    });
    const { response, resources, removed } = await splitDeltaResponse(bytes);
    // removed_resources stay bytes until read in time slices.
    assert.deepEqual(response.removed_resources, []);
    assert.deepEqual(await removedNames(removed), ['gone1', 'gone2']);
    assert.equal(response.nonce, 'n2');
    assert.equal(response.resources.length, 0);
    const [a, b] = [0, 1].map((i) => decodeDeltaResource(resources.at(i)));
    assert.equal(resources.length, 2);
    assert.equal(a.name, 'a');
    assert.equal(a.version, '1');
    assert.equal(decodeResource(a.resource!).name, 'a');
    assert.deepEqual(b, { name: 'b', version: '2', resource: undefined });
  });

  test('removed names that are not UTF-8 are refused', async () => {
    const bytes = Buffer.concat([encodeDeltaResponse({ system_version_info: '', type_url: TYPE_URL.cluster, nonce: 'n', removed_resources: ['ok', 'é'], resources: [] }), Buffer.from([0x32, 0x02, 0xc3, 0x28])]);
    const { removed } = await splitDeltaResponse(bytes);
    assert.equal(removed?.length, 3);
    await assert.rejects(removedNames(removed), TypeError);
    const { removed: fine } = await splitDeltaResponse(bytes.subarray(0, bytes.length - 4));
    assert.deepEqual(await removedNames(fine), ['ok', 'é']);
  });

  test('bytes that are not a message are refused with where they broke', async () => {
    const bytes = encodeSotwResponse({ version_info: 'v', resources: [cluster('a')], type_url: TYPE_URL.cluster, nonce: 'n' });
    await assert.rejects(splitRepeated(bytes.subarray(0, bytes.length - 1), 2), /runs past the end/);
    await assert.rejects(splitRepeated(Uint8Array.from([0x0b, 0x00]), 2), /unsupported wire type 3/);
    await assert.rejects(splitRepeated(Uint8Array.from([0x0a, 0xff]), 2), /invalid varint/);
    // Fields of every wire type around the split field are kept in the rest, in order.
    const mixed = Uint8Array.from([0x08, 0x96, 0x01, 0x12, 0x01, 0x41, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4]);
    const { entries, rest } = await splitRepeated(mixed, 2);
    assert.equal(entries.length, 1);
    assert.deepEqual([...entries.at(0)], [0x41]);
    assert.deepEqual([...rest], [0x08, 0x96, 0x01, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4]);
  });

  test('a 20,000-resource response is split in time slices, yields changing nothing in the entries and rest', async () => {
    const anys = Array.from({ length: 20_000 }, (_, i) => cluster(`svc-${i}`));
    const bytes = encodeSotwResponse({ version_info: 'v1', resources: anys, type_url: TYPE_URL.cluster, nonce: 'n9' });
    const whole = await splitRepeated(bytes, 2);
    const slice = new TimeSlice();
    await slice.next();
    // Each look at the clock spins 0.2 ms, so the walk takes over 8 ms (many budgets) on any machine.
    let yields = 0;
    const slowSlice = Object.create(slice, {
      due: { get: () => { const end = performance.now() + 0.2; while (performance.now() < end) { /* spin */ } return slice.due; } },
      next: { value: async () => { yields++; await slice.next(); } },
    }) as TimeSlice;
    const sliced = await splitRepeated(bytes, 2, slowSlice);
    assert.equal(sliced.entries.length, 20_000);
    assert.deepEqual([...sliced.rest], [...whole.rest]);
    for (const i of [0, 1, 9_999, 19_999]) assert.deepEqual([...sliced.entries.at(i)], [...whole.entries.at(i)]);
    // 39 looks x 0.2 ms is at least two budgets of CONFIG_SLICE_MS (3 ms).
    assert.ok(yields >= Math.floor(39 * 0.2 / CONFIG_SLICE_MS), `${yields} yields`);
  });
});
