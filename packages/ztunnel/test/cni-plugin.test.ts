// `skua-ztunnel cni-standin --plugin-socket` with `skua-ztunnel cni-plugin` (needs root): pods
// announced while the stand-in runs, each by a process inside the pod's network namespace (as
// compose.yaml's ambient pods do with a per-pod init container). The stand-in applies the in-pod
// rules there once, tells the connected ztunnel (a real ZdsClient) with the namespace's fd, and
// sends every pod in the next snapshot; the same pod announced twice changes nothing, the same pod
// in a new namespace replaces the old one; no stand-in, or a bad --pod, is one clear line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { netnsAvailable } from '../src/core.ts';
import { deletePod } from '../src/cni/pods.ts';
import { WorkloadManager, type InpodWorkload } from '../src/inpod/workload-manager.ts';
import { ZdsClient } from '../src/inpod/zds-client.ts';
import { waitFor } from './lib/wait.ts';

const execFileAsync = promisify(execFile);
const skip = process.getuid?.() !== 0 || !netnsAvailable ? 'needs root and the netns addon' : false;
const TAG = `${process.pid % 10000}`;
const PODS = [`skpa${TAG}`, `skpb${TAG}`];
const BIN = new URL('../bin/skua-ztunnel.js', import.meta.url).pathname;

const ino = (netns: string): number => { const fd = openSync(`/var/run/netns/${netns}`, 'r'); try { return fstatSync(fd).ino; } finally { closeSync(fd); } };

/** `skua-ztunnel cni-plugin ...` inside `netns`: exit code and output. */
async function plugin(netns: string | undefined, ...args: string[]): Promise<{ code: number; out: string }> {
  const cmd = netns ? ['ip', 'netns', 'exec', netns, process.execPath, BIN, 'cni-plugin', ...args] : [process.execPath, BIN, 'cni-plugin', ...args];
  return execFileAsync(cmd[0], cmd.slice(1)).then((r) => ({ code: 0, out: r.stdout + r.stderr }), (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }));
}

describe('skua-ztunnel cni-plugin → cni-standin --plugin-socket: pods added while running', { skip, timeout: 90_000 }, () => {
  let dir = '';
  let cni: ChildProcess | undefined;
  let out = '';
  before(() => {
    for (const p of PODS) execFileSync('ip', ['netns', 'add', p]);
    dir = mkdtempSync(join(tmpdir(), 'skua-cni-plugin-'));
  });
  after(async () => {
    if (cni && cni.exitCode === null) { cni.kill('SIGTERM'); await once(cni, 'exit'); }
    for (const p of PODS) deletePod(p);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('announced pods get the rules once and reach ztunnel (live and in the snapshot); a new namespace replaces the old', async () => {
    const zds = join(dir, 'zds.sock'), sock = join(dir, 'plugin.sock');
    cni = spawn(process.execPath, [BIN, 'cni-standin', '--socket', zds, '--apply-rules', '--plugin-socket', sock], { stdio: ['ignore', 'pipe', 'pipe'] });
    cni.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    cni.stderr!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    // Announced before any ztunnel is connected: set up, and kept for the snapshot.
    const a = await plugin(PODS[0], '--plugin-socket', sock, '--pod', 'shop/cart/cart-sa');
    assert.equal(a.code, 0, a.out);
    assert.equal(a.out, `cni-plugin: pod shop/cart added by the CNI stand-in at ${sock}\n`);
    assert.match(out, /cni-standin: pod shop\/cart \(sa cart-sa, netns inode \d+\) added; no ztunnel connected yet/);
    const rules = (await execFileAsync('ip', ['netns', 'exec', PODS[0], 'iptables-save', '-t', 'nat'])).stdout;
    assert.match(rules, /-A ISTIO_OUTPUT .*-j REDIRECT --to-ports 15001/);
    assert.match(rules, /-A ISTIO_PRERT .*! --dport 15008 .*-j REDIRECT --to-ports 15006/);

    const started: InpodWorkload[] = [];
    const manager = new WorkloadManager(async (pod) => { started.push(pod); return { close: async () => {} }; });
    const client = new ZdsClient(zds, manager);
    try {
      client.start();
      await waitFor(() => manager.ready, 'the snapshot', 10_000);
      assert.deepEqual(manager.locals().map((l) => [l.uid, l.serviceAccount]), [['shop/cart', 'cart-sa']]);
      assert.deepEqual(started.map((w) => w.netnsIno), [ino(PODS[0])], 'the pod\'s own namespace arrived by SCM_RIGHTS');

      // Announced while ztunnel is connected: it gets AddWorkload and acks before the plugin returns.
      const b = await plugin(PODS[1], '--plugin-socket', sock, '--pod', 'default/web/web-sa');
      assert.equal(b.code, 0, b.out);
      assert.ok(manager.has('default/web'));
      assert.equal(started.at(-1)?.netnsIno, ino(PODS[1]));
      assert.match(out, /ack add default\/web: ok/);

      // The same pod again (a re-run init container): no second set of rules, no new AddWorkload.
      const again = await plugin(PODS[0], '--plugin-socket', sock, '--pod', 'shop/cart/cart-sa');
      assert.equal(again.code, 0, again.out);
      const nat = (await execFileAsync('ip', ['netns', 'exec', PODS[0], 'iptables-save', '-t', 'nat'])).stdout;
      assert.equal(nat.match(/-A PREROUTING -j ISTIO_PRERT/g)?.length, 1, nat);
      assert.equal(started.length, 2);

      // The pod re-created (a new sandbox under the same name): ztunnel moves it to the new namespace.
      deletePod(PODS[0]);
      execFileSync('ip', ['netns', 'add', PODS[0]]);
      const re = await plugin(PODS[0], '--plugin-socket', sock, '--pod', 'shop/cart/cart-sa');
      assert.equal(re.code, 0, re.out);
      assert.equal(started.length, 3);
      assert.equal(started.at(-1)?.netnsIno, ino(PODS[0]));
      assert.match((await execFileAsync('ip', ['netns', 'exec', PODS[0], 'iptables-save', '-t', 'nat'])).stdout, /-A ISTIO_OUTPUT .*--to-ports 15001/, 'the new namespace got the rules');
      assert.deepEqual(manager.locals().map((l) => l.uid).sort(), ['default/web', 'shop/cart']);
    } finally {
      await client.stop();
      await manager.drainAll();
    }
    cni.kill('SIGTERM');
    const [code] = await once(cni, 'exit') as [number | null];
    assert.equal(code, 0, out);
  });

  test('no stand-in listening: one line after --timeout; a bad --pod: usage error', async () => {
    const none = await plugin(undefined, '--plugin-socket', join(dir, 'nobody.sock'), '--pod', 'a/b/c', '--timeout', '1s');
    assert.equal(none.code, 1);
    assert.match(none.out, /^skua-ztunnel cni-plugin: no CNI stand-in at \S+nobody\.sock after 1 s: .*\n$/);
    const bad = await plugin(undefined, '--pod', 'a/b');
    assert.equal(bad.code, 2);
    assert.equal(bad.out, 'skua-ztunnel cni-plugin: --pod "a/b": expected namespace/name/service-account\n');
  });
});
