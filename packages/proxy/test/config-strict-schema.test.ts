// The .proto scanner that gives static bootstraps their field names (config/proto-schema.ts)
// against protobufjs's full parse of the same files (what the xDS layer decodes with): for every
// message type under envoy.config, envoy.extensions, envoy.type, udpa.type, xds.type and Skua's
// Istio protos, the same field names, and per field the same message type, map and repeated.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Namespace, Type } from 'protobufjs';
import { envoySchemas } from '../src/config/proto-schema.ts';
import { xdsRootComplete, isType } from '../src/xds/protos.ts';

const ROOTS = ['envoy.config', 'envoy.extensions', 'envoy.type', 'udpa.type', 'xds.type', 'stats', 'istio'];

function typesUnder(ns: Namespace, out: Type[]): void {
  for (const child of ns.nestedArray) {
    if (isType(child)) out.push(child);
    if ('nestedArray' in child) typesUnder(child as Namespace, out);
  }
}

test('the scanner reads every message protobufjs does, field for field', () => {
  const root = xdsRootComplete();
  const schemas = envoySchemas();
  const types: Type[] = [];
  typesUnder(root, types);
  const name = (t: Type): string => t.fullName.slice(1);
  const checked = types.filter((t) => ROOTS.some((r) => name(t).startsWith(`${r}.`)));
  assert.ok(checked.length > 1000, `only ${checked.length} message types`);
  const problems: string[] = [];
  for (const t of checked) {
    const s = schemas.message(name(t));
    if (!s) { problems.push(`${name(t)}: not found`); continue; }
    assert.equal(s.fullName, name(t));
    const expected = t.fieldsArray.map((f) => f.name).sort();
    const got = schemas.fieldNames(name(t)).sort();
    if (expected.join() !== got.join()) { problems.push(`${name(t)}: fields ${got.join(',')} instead of ${expected.join(',')}`); continue; }
    for (const f of t.fieldsArray) {
      const sf = s.field(f.name)!;
      const camel = s.field(f.name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()));
      const rt = f.resolvedType;
      const message = rt !== null && isType(rt) ? name(rt) : null;
      const shape = (x: { map: boolean; repeated: boolean; message: string | null }): string => `${x.message} map=${x.map} repeated=${x.repeated}`;
      const want = shape({ message, map: f.map, repeated: f.repeated && !f.map });
      const have = shape({ message: sf.message?.fullName ?? null, map: sf.map, repeated: sf.repeated });
      if (want !== have) problems.push(`${name(t)}.${f.name}: ${have} instead of ${want}`);
      if (camel?.message !== sf.message || camel?.map !== sf.map) problems.push(`${name(t)}.${f.name}: the lowerCamel name is another field`);
    }
  }
  assert.deepEqual(problems, []);
});
