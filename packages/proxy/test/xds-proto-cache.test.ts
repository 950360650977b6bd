// The xDS proto Root kept as JSON beside the compile cache (src/xds/proto-cache.ts): read back, it must
// describe every message, field and enum exactly as the Root parsed from the .proto files does —
// numbers, types, labels, packing, presence, editions features, options — or decoding would differ.
// (Not parsedOptions, the options' nested form: protobufjs's JSON keeps their flat form, `options`,
// and nothing reads the nested one.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import type { Root } from 'protobufjs';
import { parseRoot, protoDirs } from '../src/xds/protos.ts';
import { readCachedRoot, writeCachedRoot } from '../src/xds/proto-cache.ts';

/** What a decoder or encoder reads of each reflection object, by full name. */
function describeRoot(root: Root): Map<string, string> {
  const out = new Map<string, string>();
  const features = (o: object): unknown => (o as { _features?: unknown })._features;
  const walk = (ns: protobuf.NamespaceBase): void => {
    for (const o of ns.nestedArray) {
      if (o instanceof protobuf.Type) {
        out.set(o.fullName, JSON.stringify({
          features: features(o), options: o.options, reserved: o.reserved, extensions: o.extensions,
          oneofs: o.oneofsArray.map((x) => [x.name, x.oneof, features(x)]),
          // By number: declaration order is not kept for extensions of descriptor options (nothing reads it).
          fields: [...o.fieldsArray].sort((x, y) => x.id - y.id || (x.name < y.name ? -1 : 1)).map((f) => [f.id, f.name, f.type, f.rule, f.repeated, f.map, (f as unknown as { keyType?: string }).keyType, f.packed, f.hasPresence,
            f.optional, f.bytes, f.long, String(f.typeDefault), f.resolvedType?.fullName, f.partOf?.name, features(f), f.options]),
        }));
      } else if (o instanceof protobuf.Enum) {
        out.set(o.fullName, JSON.stringify({ values: o.values, features: features(o), options: o.options, valuesOptions: o.valuesOptions }));
      }
      if (o instanceof protobuf.Namespace || o instanceof protobuf.Type) walk(o);
    }
  };
  walk(root);
  return out;
}

test('the cached Root reads back the same as the Root parsed from the .proto files', () => {
  const parsed = parseRoot(protoDirs());
  const dir = mkdtempSync(join(tmpdir(), 'skua-proto-cache-'));
  try {
    const file = join(dir, 'root.json');
    writeCachedRoot(file, parsed);
    const kept = readCachedRoot(file);
    assert.ok(kept, 'read back');
    const a = describeRoot(parsed), b = describeRoot(kept);
    assert.ok(a.size > 1000, `${a.size} types and enums`);
    assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort());
    for (const [name, d] of a) {
      const other = b.get(name) ?? '';
      let at = 0;
      while (at < d.length && d[at] === other[at]) at++;
      assert.equal(other, d, `${name}: differs at …${d.slice(Math.max(0, at - 200), at + 100)}… vs …${other.slice(Math.max(0, at - 200), at + 100)}…`);
    }
    // A message both ways: what the encoder writes and the decoder reads back.
    const Cluster = 'envoy.config.cluster.v3.Cluster';
    const msg = { name: 'c', type: 3, connect_timeout: { seconds: 1 }, circuit_breakers: { thresholds: [{ max_requests: { value: 5 }, track_remaining: true }] } };
    const bytes = parsed.lookupType(Cluster).encode(msg).finish();
    assert.deepEqual(Buffer.from(kept.lookupType(Cluster).encode(msg).finish()), Buffer.from(bytes));
    assert.deepEqual(kept.lookupType(Cluster).toObject(kept.lookupType(Cluster).decode(bytes)), parsed.lookupType(Cluster).toObject(parsed.lookupType(Cluster).decode(bytes)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a cache file that is missing, cut short or not JSON is not used', () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-proto-cache-'));
  try {
    assert.equal(readCachedRoot(join(dir, 'none.json')), undefined);
    writeFileSync(join(dir, 'short.json'), '{"nested":{"envoy":');
    assert.equal(readCachedRoot(join(dir, 'short.json')), undefined);
    writeFileSync(join(dir, 'bad.json'), 'not json');
    assert.equal(readCachedRoot(join(dir, 'bad.json')), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
