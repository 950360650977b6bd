// The fuzzing habit in CI: every committed seed and regression input replays clean, then each
// target runs under Jazzer.js (libFuzzer, coverage-guided) for a few seconds and must not crash.
// SKUA_FUZZ_SECONDS sets the per-target time (default 5); `./dev fuzz` runs the long version.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FUZZ_DIR, TARGETS, fuzzTarget } from '../fuzz/run.ts';
import { addonPath, loadError } from '../fuzz/engine/glibc-compat.ts';

const SECONDS = Number(process.env.SKUA_FUZZ_SECONDS ?? 5);
const ROOT = path.resolve(import.meta.dirname, '..');

function inputs(target: string): Array<{ file: string; data: Buffer }> {
  const out: Array<{ file: string; data: Buffer }> = [];
  for (const dir of ['corpus', 'regressions']) {
    const d = path.join(FUZZ_DIR, dir, target);
    if (!existsSync(d)) continue;
    for (const f of readdirSync(d).sort()) out.push({ file: `${dir}/${target}/${f}`, data: readFileSync(path.join(d, f)) });
  }
  return out;
}

describe('fuzz targets', () => {
  test('there are targets for the HTTP/1 parser, its differential, the header normaliser and config compilation', () => {
    for (const t of ['h1-head', 'h1-llhttp', 'http-request', 'config']) assert.ok(TARGETS.includes(t), `missing target ${t}`);
  });

  test('the libFuzzer addon loads on this machine (setup made it glibc-compatible)', () => {
    assert.equal(loadError(addonPath(ROOT)), '');
  });

  for (const target of TARGETS) {
    test(`${target}: committed seeds and regression inputs replay without a finding`, async () => {
      const { fuzz } = await import(path.join(FUZZ_DIR, 'targets', `${target}.ts`)) as { fuzz(data: Buffer): void };
      const all = inputs(target);
      assert.ok(all.length > 0, `no seeds for ${target}`);
      for (const { file, data } of all) assert.doesNotThrow(() => fuzz(data), `${file} is a finding again`);
    });
  }

  for (const target of TARGETS) {
    test(`${target}: ${SECONDS} s of coverage-guided fuzzing, zero crashes`, async (t) => {
      const out = mkdtempSync(path.join(tmpdir(), 'skua-fuzz-'));
      try {
        const r = await fuzzTarget(target, SECONDS, out);
        t.diagnostic(`${target}: ${r.executions} executions, ${r.crashed ? 'CRASH' : '0 crashes'}`);
        assert.equal(r.crashed, false, `${target} crashed:\n${r.report}`);
        assert.ok(r.executions > 0, `${target} ran no input`);
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });
  }
});
