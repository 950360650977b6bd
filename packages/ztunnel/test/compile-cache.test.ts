/**
 * skua-ztunnel's compile cache (bin/warm-compile-cache.js, run at image build): a start after the
 * warm-up finds every module it loads there and V8 accepts each entry. The entries are keyed by the
 * V8 flags, so a flag set at run time (the regexp engine flags of the proxy's matchers/regex.ts,
 * loaded with the policy code) made entries written in another import order be rejected and the
 * modules compiled again at every start.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = new URL('../bin/', import.meta.url).pathname;

test('after warm-compile-cache.js, a start loads its modules from the cache with no entry rejected', () => {
  const dir = mkdtempSync(join(tmpdir(), 'skua-zt-cc-'));
  try {
    const env = { ...process.env, NODE_COMPILE_CACHE: join(dir, 'cache'), NODE_DISABLE_COMPILE_CACHE: undefined, NODE_OPTIONS: undefined };
    execFileSync(process.execPath, [join(BIN, 'warm-compile-cache.js')], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    const local = join(dir, 'local.yaml');
    writeFileSync(local, 'workloads: []\n');
    // The app loads in full, then start-up stops at a missing setting: the modules are all read by then.
    const run = spawnSync(process.execPath, [join(BIN, 'skua-ztunnel.js')], {
      cwd: dir, encoding: 'utf8', timeout: 60_000,
      env: { ...env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', XDS_ADDRESS: '', CA_ADDRESS: '', FAKE_CA: 'true', LOCAL_XDS_PATH: local, PROXY_MODE: 'dedicated', PROXY_WORKLOAD_INFO: '' },
    });
    assert.match(run.stderr, /PROXY_WORKLOAD_INFO/, 'start-up stopped where expected');
    const lines = run.stderr.split('\n');
    const accepted = lines.filter((l) => l.includes(' was accepted'));
    assert.ok(accepted.some((l) => l.includes('/proxy/src/matchers/regex.ts')), 'the policy code (regex.ts) was loaded');
    assert.ok(accepted.length > 200, `${accepted.length} entries accepted`);
    assert.deepEqual(lines.filter((l) => l.includes(' was rejected')), []);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});
