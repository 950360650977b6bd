/**
 * The periodic native-heap trim (issue 13): memory freed in the middle of glibc's heap, which free()
 * cannot give back, returns to the system at the trimmer's next tick.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

const TRIM = new URL('../src/core/native-heap-trim.ts', import.meta.url).href;

function freedThenWaited(trim: boolean): number {
  const script = `
    import { readFileSync } from 'node:fs';
    const { trimNativeHeapPeriodically } = await import(${JSON.stringify(TRIM)});
    const anonKb = () => Number(/^RssAnon:\\s+(\\d+)/m.exec(readFileSync('/proc/self/status', 'latin1'))[1]);
    // 4,000 blocks of 16 KB (under glibc's mmap threshold: from the heap), touched; one kept at the top.
    let blocks = Array.from({ length: 4000 }, () => Buffer.allocUnsafeSlow(16384).fill(1));
    const top = Buffer.allocUnsafeSlow(16384).fill(2);
    const before = anonKb();
    blocks = null;
    globalThis.gc(); globalThis.gc();
    ${trim ? 'trimNativeHeapPeriodically(50);' : ''}
    await new Promise((r) => setTimeout(r, 300));
    process.stdout.write(JSON.stringify({ returnedKb: before - anonKb(), top: top.length }) + '\\n');`;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' });
  return (JSON.parse(out.trim().split('\n').at(-1)!) as { returnedKb: number }).returnedKb;
}

test('memory freed below the top of the heap stays without the trimmer and returns with it', () => {
  const without = freedThenWaited(false);
  const withTrim = freedThenWaited(true);
  assert.ok(withTrim >= 32_000, `with the trimmer ${withTrim} kB of the 64 MB freed returned`);
  assert.ok(withTrim - without >= 24_000, `the trimmer gave back ${withTrim - without} kB more than free() alone (${without} kB)`);
});
