/**
 * The .proto texts protobufjs parses are not kept alive by the reflection it builds (issue 13):
 * its names, type names and option values were slices of each whole file (~1 MB in a sidecar).
 * A child process loads the types a sidecar's xDS uses, collects garbage and writes a heap
 * snapshot; no string in it may be a .proto file's text.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { ownProtoStrings, type OwnedObjects } from '../src/xds/proto-strings.ts';

const PROTOS = new URL('../src/xds/protos.ts', import.meta.url).href;

test('no .proto text stays in the heap once the types a sidecar uses are loaded', () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-proto-strings-'));
  try {
    const script = `
      import { writeHeapSnapshot } from 'node:v8';
      import { readFileSync } from 'node:fs';
      const { protoLookup } = await import(${JSON.stringify(PROTOS)});
      const names = ['envoy.config.cluster.v3.Cluster', 'envoy.config.listener.v3.Listener',
        'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
        'envoy.config.route.v3.RouteConfiguration', 'envoy.config.endpoint.v3.ClusterLoadAssignment',
        'envoy.extensions.transport_sockets.tls.v3.Secret'];
      for (const n of names) if (!protoLookup(n)) throw new Error('not found: ' + n);
      // The reflection still answers with its option values (a file option, a field's validation rule).
      const cluster = protoLookup('envoy.config.cluster.v3.Cluster');
      const javaPackage = cluster.parent.getOption('java_package');
      globalThis.gc(); globalThis.gc();
      const file = writeHeapSnapshot(${JSON.stringify(join(dir, 'heap.heapsnapshot'))});
      const { strings } = JSON.parse(readFileSync(file, 'utf8'));
      const texts = strings.filter((s) => s.startsWith('syntax = "proto3"')).length;
      process.stdout.write(JSON.stringify({ texts, javaPackage, strings: strings.length }));
    `;
    const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { texts: number; javaPackage: string; strings: number };
    assert.ok(out.strings > 1000, 'the snapshot has the heap\'s strings');
    assert.equal(out.javaPackage, 'io.envoyproxy.envoy.config.cluster.v3');
    assert.equal(out.texts, 0, `${out.texts} .proto texts are still in the heap`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('ownProtoStrings keeps every value and reaches what a later load added to a walked namespace', () => {
  const root = new protobuf.Root();
  const text = (pkg: string, opt: string): string => `syntax = "proto3"; package ${pkg}; option java_package = "${opt}";
    message LongEnoughName { reserved "some_reserved_field_name"; string field_with_a_long_name = 1 [deprecated = true]; }`;
  protobuf.parse(text('a.first.package', 'io.example.first.package'), root, { keepCase: true });
  root.resolveAll();
  const owned: OwnedObjects = new WeakMap();
  ownProtoStrings(root, owned);
  // A second file of the same package adds an option to the namespace already walked, and a type.
  protobuf.parse(text('a.first.package', 'io.example.second.option').replace('LongEnoughName', 'AnotherLongName'), root, { keepCase: true });
  root.resolveAll();
  ownProtoStrings(root, owned);
  const ns = root.lookup('a.first.package') as protobuf.Namespace;
  assert.deepEqual(ns.parsedOptions, [{ java_package: 'io.example.first.package' }, { java_package: 'io.example.second.option' }]);
  for (const name of ['LongEnoughName', 'AnotherLongName']) {
    const t = root.lookupType(`a.first.package.${name}`);
    assert.deepEqual(t.reserved, ['some_reserved_field_name']);
    assert.equal(t.fields.field_with_a_long_name.name, 'field_with_a_long_name');
    assert.equal(t.fields.field_with_a_long_name.getOption('deprecated'), true);
    assert.ok(owned.has(t), `${name} was walked`);
  }
});
