// `skua-controlplane compose-kube`'s copy of the Istio YAML: pod addresses filled in from
// spec.hostname, and two compose-kubes sharing one --istio tree (compose.yaml's sidecar `kube` in
// the directory, the ambient profile's `kube-ambient` in a subdirectory): each removes only the
// files it wrote when their manifests go, never the other's nor a file someone else put there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { syncOnce } from '../src/compose/kube-standin.ts';

const POD = (name: string, host: string): string =>
  `apiVersion: v1\nkind: Pod\nmetadata: { name: ${name}, namespace: default }\nspec: { hostname: ${host}, serviceAccountName: sa }\n`;

test('compose-kube: pod IPs from spec.hostname; two of them share one tree and remove only their own files', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-compose-kube-'));
  try {
    const [sidecar, ambient, out, state] = ['sidecar', 'ambient', 'out', 'state'].map((d) => join(dir, d));
    for (const d of [sidecar, ambient, out, state]) mkdirSync(d);
    writeFileSync(join(sidecar, 'pods.yaml'), POD('web', 'localhost'));
    writeFileSync(join(sidecar, 'old.yaml'), POD('old', 'localhost'));
    writeFileSync(join(ambient, 'pods.yaml'), POD('amb', 'localhost'));
    writeFileSync(join(ambient, 'later.yaml'), POD('gone', 'no-such-host.invalid'));
    const side = { manifests: sidecar, out, stateDir: state, tokenTtlSec: 3600 };
    const amb = { manifests: ambient, out: join(out, 'ambient'), stateDir: state, tokenTtlSec: 3600 };
    // The CA's keys are missing here: only the config part runs ('CA' is reported as waiting).
    assert.deepEqual(await syncOnce(side), ['CA']);
    assert.deepEqual(await syncOnce(amb), ['gone (no-such-host.invalid)', 'CA']);
    const web = readFileSync(join(out, 'pods.yaml'), 'utf8');
    assert.match(web, /podIP: 127\.0\.0\.1/);
    assert.doesNotMatch(web, /hostname/, 'the hostname is replaced by the address');
    assert.match(readFileSync(join(out, 'ambient', 'pods.yaml'), 'utf8'), /name: amb[\s\S]*podIP: 127\.0\.0\.1/);
    assert.doesNotMatch(readFileSync(join(out, 'ambient', 'later.yaml'), 'utf8'), /kind: Pod/, 'an unresolved pod is left out');
    writeFileSync(join(out, 'applied.yaml'), POD('applied', 'localhost'));

    // The sidecar side's next pass keeps the ambient files and the applied one; a removed manifest goes.
    rmSync(join(sidecar, 'old.yaml'));
    await syncOnce(side);
    assert.ok(!existsSync(join(out, 'old.yaml')), 'its own file whose manifest went is removed');
    assert.ok(existsSync(join(out, 'ambient', 'pods.yaml')), 'the other compose-kube\'s file stays');
    assert.ok(existsSync(join(out, 'applied.yaml')), 'a file it did not write stays');
    rmSync(join(ambient, 'later.yaml'));
    await syncOnce(amb);
    assert.ok(!existsSync(join(out, 'ambient', 'later.yaml')));
    assert.ok(existsSync(join(out, 'pods.yaml')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
