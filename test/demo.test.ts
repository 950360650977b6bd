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

test('the default (mesh) demo: sidecars from the control plane, mTLS, a live mesh edit', { timeout: 90_000 }, async () => {
  const out = await runDemo([]);
  assert.match(out, /ok +mTLS: reviews sees productpage's SPIFFE id +x-forwarded-client-cert URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/bookinfo-productpage/);
  assert.match(out, /ok +live mesh edit: weights 0\/100 +applied in \d+ ms/);
  assert.match(out, /control_plane\.connected_state: 1/);
});

test('the bookinfo demo (one skua-proxy, static bootstrap) runs, passes its checks and stops everything', { timeout: 60_000 }, async () => {
  await runDemo(['--topology', 'bookinfo']);
});
