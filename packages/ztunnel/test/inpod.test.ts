// In-pod mode's plumbing in real network namespaces (needs root): the CNI stand-in creates pod
// namespaces with ambient's in-pod rules and speaks ZDS; ztunnel's ZDS client says hello, gets
// each pod's netns fd by SCM_RIGHTS, starts listeners inside the pod, acks; an app's outbound
// connection lands on 15001 with its original destination, inbound plaintext on 15006, 15008 is
// not redirected, sockets marked 0x539 pass untouched; pods are added and deleted live; after a
// reconnect the snapshot drops a pod deleted meanwhile and keeps the others; a pod whose proxies
// fail is nacked and retried. `skua-ztunnel cni-standin` does the same as a process, applying the
// rules in namespaces named or given by path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { getOriginalDst, listenInNetns, netnsAvailable, SeqpacketServer, socketInNetns } from '../src/core.ts';
import { decodeAck, decodeHello, encodeRequest } from '../src/inpod/zds-messages.ts';
import { CniStandIn } from '../src/cni/standin.ts';
import { createNode, createPod, deleteNode, deletePod, type NodeNetwork } from '../src/cni/pods.ts';
import { WorkloadManager, type InpodWorkload } from '../src/inpod/workload-manager.ts';
import { ZdsClient } from '../src/inpod/zds-client.ts';
import { waitFor } from './lib/wait.ts';

const execFileAsync = promisify(execFile);
const skip = process.getuid?.() !== 0 || !netnsAvailable ? 'needs root and the netns addon' : false;
const TAG = `${process.pid % 10000}`;
const NODE: NodeNetwork = { netns: `skzn${TAG}`, bridge: 'skzbr0', gateway: '10.77.9.1', prefixLength: 24 };
const POD_A = { name: `skza${TAG}`, ip: '10.77.9.2' };
const POD_B = { name: `skzb${TAG}`, ip: '10.77.9.3' };
const POD_C = { name: `skzc${TAG}`, ip: '10.77.9.4' };
const info = (name: string) => ({ name, namespace: 'default', serviceAccount: `sa-${name}` });

interface Seen { port: number; original: string; from: string }

describe('in-pod mode: ZDS and the pod namespaces', { skip }, () => {
  let dir = '', cni: CniStandIn, manager: WorkloadManager, client: ZdsClient;
  const seen: Seen[] = [];
  const started: InpodWorkload[] = [];
  let failNext = false;

  before(async () => {
    createNode(NODE);
    for (const p of [POD_A, POD_B, POD_C]) createPod(NODE, p);
    dir = mkdtempSync(join(tmpdir(), 'skua-zds-'));
    cni = new CniStandIn(join(dir, 'ztunnel.sock'));
    cni.start();
    // Proxies that only listen: enough to see where the in-pod rules send each connection.
    manager = new WorkloadManager(async (pod) => {
      if (failNext) { failNext = false; throw new Error('cannot bind 15001: EADDRINUSE'); }
      started.push(pod);
      const servers: net.Server[] = [];
      for (const port of [15001, 15006, 15008]) {
        const s = await listenInNetns(pod.netnsFd, '0.0.0.0', port);
        s.on('connection', (c) => {
          const o = getOriginalDst(c);
          seen.push({ port, original: o ? `${o.address}:${o.port}` : '', from: pod.info.name });
          c.end(`${pod.info.name}:${port}`);
        });
        servers.push(s);
      }
      return { close: async () => { for (const s of servers) s.close(); } };
    });
    client = new ZdsClient(cni.path, manager);
  });
  after(async () => {
    await client?.stop();
    await manager?.drainAll();
    cni?.close();
    for (const p of [POD_A, POD_B, POD_C]) deletePod(p.name);
    deleteNode(NODE);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs a TCP client inside a namespace (python, async: this loop serves the other end). */
  async function dialFrom(netns: string, ip: string, port: number): Promise<string> {
    const { stdout } = await execFileAsync('ip', ['netns', 'exec', netns, 'python3', '-c',
      `import socket;s=socket.create_connection(("${ip}",${port}),3);print(s.recv(100).decode())`]);
    return stdout.trim();
  }

  test('hello, the snapshot with the pod and its netns fd, listeners inside the pod', async () => {
    await cni.addPod({ uid: 'uid-a', info: info('a'), netnsPath: `/var/run/netns/${POD_A.name}` });
    const snap = cni.nextSnapshot();
    client.start();
    await snap;
    assert.deepEqual(cni.acks.map((a) => [a.request.kind, a.error]), [['add', ''], ['snapshot_sent', '']]);
    assert.equal(started.length, 1);
    assert.deepEqual(started[0].info, info('a'));
    assert.equal(started[0].netnsIno, (() => { const fd = openSync(`/var/run/netns/${POD_A.name}`, 'r'); try { return fstatSync(fd).ino; } finally { closeSync(fd); } })());
    assert.deepEqual(manager.locals(), [{ uid: 'uid-a', ...info('a'), state: 'Up' }]);
    assert.ok(manager.ready);
  });

  test("the pod's rules: outbound to 15001 with the original destination, inbound plaintext to 15006, 15008 untouched", async () => {
    assert.equal(await dialFrom(POD_A.name, '93.184.216.34', 80), 'a:15001');
    assert.deepEqual(seen.at(-1), { port: 15001, original: '93.184.216.34:80', from: 'a' });
    assert.equal(await dialFrom(NODE.netns, POD_A.ip, 8080), 'a:15006');
    assert.deepEqual(seen.at(-1), { port: 15006, original: `${POD_A.ip}:8080`, from: 'a' });
    assert.equal(await dialFrom(NODE.netns, POD_A.ip, 15008), 'a:15008');
    assert.equal(seen.at(-1)?.original, `${POD_A.ip}:15008`);
  });

  test("ztunnel's own sockets (mark 0x539) leave the pod untouched; unmarked ones are captured", async () => {
    const nodeFd = openSync(`/var/run/netns/${NODE.netns}`, 'r');
    const direct = await listenInNetns(nodeFd, NODE.gateway, 18080);
    closeSync(nodeFd);
    direct.on('connection', (c) => c.end('node'));
    const podFd = openSync(`/var/run/netns/${POD_A.name}`, 'r');
    try {
      const answer = async (mark: number): Promise<string> => {
        const s = socketInNetns(podFd, 4, { mark });
        s.connect(18080, NODE.gateway);
        const chunks: Buffer[] = [];
        s.on('data', (c: Buffer) => chunks.push(c));
        await once(s, 'end');
        s.destroy();
        return Buffer.concat(chunks).toString();
      };
      assert.equal(await answer(0x539), 'node');
      assert.equal(await answer(0), 'a:15001');
    } finally {
      closeSync(podFd);
      direct.close();
    }
  });

  test('pods added and deleted live', async () => {
    assert.equal(await cni.addPod({ uid: 'uid-b', info: info('b'), netnsPath: `/var/run/netns/${POD_B.name}` }), '');
    assert.ok(manager.has('uid-b'));
    assert.equal(await dialFrom(POD_B.name, '10.0.0.1', 443), 'b:15001');
    assert.equal(await cni.delPod('uid-b'), '');
    await waitFor(() => manager.stopped === 1, 'pod b drained');
    assert.ok(!manager.has('uid-b'));
  });

  test('a pod whose proxies fail is nacked with the reason, shown Pending, and retried', async () => {
    failNext = true;
    assert.equal(await cni.addPod({ uid: 'uid-b', info: info('b'), netnsPath: `/var/run/netns/${POD_B.name}` }), 'cannot bind 15001: EADDRINUSE');
    assert.deepEqual(manager.locals().find((l) => l.uid === 'uid-b')?.state, 'Pending');
    await waitFor(() => manager.has('uid-b'), 'the retry', 8000);
    assert.equal(manager.locals().find((l) => l.uid === 'uid-b')?.state, 'Up');
  });

  test('after a reconnect the snapshot keeps known pods and drops one deleted meanwhile', async () => {
    assert.equal(await cni.addPod({ uid: 'uid-c', info: info('c'), netnsPath: `/var/run/netns/${POD_C.name}` }), '');
    const before = started.length;
    const stoppedBefore = manager.stopped;
    const snap = cni.nextSnapshot();
    cni.forgetPod('uid-c');
    cni.disconnect();
    await snap;
    assert.equal(client.connections, 2);
    await waitFor(() => manager.stopped === stoppedBefore + 1, 'pod c drained');
    assert.deepEqual(manager.locals().map((l) => l.uid).sort(), ['uid-a', 'uid-b']);
    // a and b were re-sent with the same namespaces: nothing restarted.
    assert.equal(started.length, before);
    assert.equal(await dialFrom(POD_A.name, '10.0.0.1', 443), 'a:15001');
  });

  test('a request ztunnel cannot use is nacked with the reason; the connection stays up', async () => {
    const raw = new SeqpacketServer(join(dir, 'raw.sock'));
    const accepted = raw.accept();
    const m2 = new WorkloadManager(async () => ({ close: async () => {} }));
    const c2 = new ZdsClient(join(dir, 'raw.sock'), m2);
    c2.start();
    const peer = (await accepted)!;
    try {
      assert.equal(decodeHello((await peer.receive())!.data), 1);
      const ask = async (bytes: Uint8Array, fds: number[] = []): Promise<string | undefined> => {
        peer.send(bytes, fds);
        return decodeAck((await peer.receive())!.data);
      };
      assert.equal(await ask(encodeRequest({ kind: 'add', uid: 'u1', info: info('x') })), 'AddWorkload u1: expected exactly one netns fd, got 0');
      assert.match(await ask(Buffer.from([0xff, 0xff, 0xff])) ?? '', /index out of range/);
      assert.equal(await ask(encodeRequest({ kind: 'snapshot_sent' })), '');
      assert.equal(await ask(encodeRequest({ kind: 'snapshot_sent' })), 'pod snapshot received already');
      assert.equal(await ask(encodeRequest({ kind: 'keep', uid: 'u2' })), 'pod keep received after snapshot');
      assert.equal(c2.connected, true);
    } finally {
      await c2.stop();
      peer.close();
      raw.close();
    }
  });
});


describe('skua-ztunnel cni-standin: the stand-in as a process', { skip, timeout: 60_000 }, () => {
  const PODS = [`skzd${TAG}`, `skze${TAG}`];
  let dir = '';
  before(() => {
    for (const p of PODS) execFileSync('ip', ['netns', 'add', p]);
    dir = mkdtempSync(join(tmpdir(), 'skua-cni-'));
  });
  after(() => {
    for (const p of PODS) deletePod(p);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('applies the in-pod rules (netns by name and by path), serves the pods to a ztunnel, logs the acks, exits 0 on SIGTERM', async () => {
    const sock = join(dir, 'zds.sock');
    const bin = new URL('../bin/skua-ztunnel.js', import.meta.url).pathname;
    const cni = spawn(process.execPath, [bin, 'cni-standin', '--socket', sock, '--apply-rules',
      '--pod', `default/web/web-sa=${PODS[0]}`, '--pod', `shop/cart/cart-sa=/var/run/netns/${PODS[1]}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    cni.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    cni.stderr.setEncoding('utf8').on('data', (d: string) => { out += d; });
    const started: InpodWorkload[] = [];
    const manager = new WorkloadManager(async (pod) => { started.push(pod); return { close: async () => {} }; });
    const client = new ZdsClient(sock, manager);
    try {
      await waitFor(() => out.includes('serving ZDS'), 'the stand-in to listen', 20_000);
      for (const p of PODS) {
        const rules = (await execFileAsync('ip', ['netns', 'exec', p, 'iptables-save', '-t', 'nat'])).stdout;
        assert.match(rules, /-A ISTIO_OUTPUT .*-j REDIRECT --to-ports 15001/, p);
        assert.match(rules, /-A ISTIO_PRERT .*! --dport 15008 .*-j REDIRECT --to-ports 15006/, p);
      }
      client.start();
      await waitFor(() => manager.ready, 'the snapshot');
      assert.deepEqual(manager.locals().map((l) => [l.uid, l.name, l.namespace, l.serviceAccount]).sort(),
        [['default/web', 'web', 'default', 'web-sa'], ['shop/cart', 'cart', 'shop', 'cart-sa']]);
      const ino = (p: string): number => { const fd = openSync(`/var/run/netns/${p}`, 'r'); try { return fstatSync(fd).ino; } finally { closeSync(fd); } };
      assert.deepEqual(started.map((w) => w.netnsIno).sort(), PODS.map(ino).sort(), "each pod's own namespace arrived by SCM_RIGHTS");
      await waitFor(() => out.includes('ack snapshot_sent: ok'), 'the acks logged');
      assert.match(out, /ack add default\/web: ok\nack add shop\/cart: ok\n/);
    } finally {
      await client.stop();
      await manager.drainAll();
      cni.kill('SIGTERM');
    }
    const [code] = await once(cni, 'exit') as [number | null];
    assert.equal(code, 0, out);
    assert.throws(() => fstatSync(openSync(sock, 'r')), /ENOENT/, 'the socket is removed');
  });
});
