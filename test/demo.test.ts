// The README's main job must keep working: run the demo briefly and expect a clean pass.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './lib/proxy.ts';

test('the local demo runs, passes its checks and stops everything', { timeout: 60_000 }, async () => {
  const child = spawn(process.execPath, [join(repoRoot, 'demo', 'run.ts'), '--duration', '1'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d; });
  child.stderr.on('data', (d: Buffer) => { out += d; });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
  assert.match(out, /OK: \d+ checks passed, \d+ requests, no failures/);
  assert.match(out, /observed split: v1 \d+/);
});
