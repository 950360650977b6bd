// The README's main job must keep working: run each demo topology briefly and expect a clean pass.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './lib/proxy.ts';

async function runDemo(args: readonly string[]): Promise<string> {
  const child = spawn(process.execPath, [join(repoRoot, 'demo', 'run.ts'), '--duration', '1', ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d; });
  child.stderr.on('data', (d: Buffer) => { out += d; });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
  assert.match(out, /OK: \d+ checks passed, \d+ requests, no failures/);
  assert.match(out, /observed split: v1 \d+/);
  return out;
}

test('the default (istio) demo: Bookinfo from Istio YAML, each bookinfo sample applied and its effect measured', { timeout: 300_000 }, async () => {
  const out = await runDemo([]);
  for (const step of ['bookinfo-gateway.yaml', 'virtual-service-all-v1.yaml', 'virtual-service-reviews-jason-v2-v3.yaml', 'virtual-service-ratings-test-delay.yaml',
    'virtual-service-ratings-test-abort.yaml', 'fault-injection-details-v1.yaml', 'egress-rule-google-apis.yaml', 'virtual-service-reviews-50-v3.yaml', 'route-reviews-90-10.yaml', 'peer-authn-strict.yaml', 'deny-both-http-tcp-in.yaml', 'authz-valid.yaml']) {
    assert.match(out, new RegExp(`ok +[^\\n]*${step.replace(/[.]/g, '\\.')}`), step);
  }
  assert.match(out, /ok +virtual-service-reviews-50-v3\.yaml[^\n]*v1 \d+ \/ v3 \d+; v3 [\d.]+%/);
  assert.match(out, /reviews sees spiffe:\/\/cluster\.local\/ns\/default\/sa\/bookinfo-productpage/);
  assert.match(out, /httpbin rbac denied [1-9]/);
});

test('the mesh demo: sidecars from the control plane\'s compact mesh file, mTLS, a live mesh edit', { timeout: 90_000 }, async () => {
  const out = await runDemo(['--topology', 'mesh']);
  assert.match(out, /ok +mTLS: reviews sees productpage's SPIFFE id +x-forwarded-client-cert URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/bookinfo-productpage/);
  assert.match(out, /ok +live mesh edit: weights 0\/100 +applied in \d+ ms/);
  assert.match(out, /control_plane\.connected_state: 1/);
});

test('the bookinfo demo (one skua-proxy, static bootstrap) runs, passes its checks and stops everything', { timeout: 60_000 }, async () => {
  await runDemo(['--topology', 'bookinfo']);
});
