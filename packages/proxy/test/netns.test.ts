// Sockets in other network namespaces and SEQPACKET with SCM_RIGHTS, in real namespaces (needs
// root): a listener bound inside a namespace is reachable there and not from the host; UDP too;
// SO_MARK is set before connect (counted by an iptables rule matching the mark inside the
// namespace); a namespace fd passed over SEQPACKET arrives as the same namespace, messages keep
// their boundaries, and the end of stream is seen.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { closeSync, fstatSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { listenInNetns, netnsAvailable, SeqpacketServer, SeqpacketSocket, socketInNetns, udpInNetns } from '../src/sys/netns.ts';

const NS = `skua-nt-${process.pid}`;
const root = process.getuid?.() === 0;
const skip = !root || !netnsAvailable ? 'needs root and the netns addon' : false;
const execFileAsync = promisify(execFile);
const run = (...args: string[]): string => execFileSync(args[0], args.slice(1), { encoding: 'utf8' });

describe('network namespaces and SEQPACKET', { skip }, () => {
  let nsFd = -1, dir = '';
  before(() => {
    run('ip', 'netns', 'add', NS);
    run('ip', '-n', NS, 'link', 'set', 'lo', 'up');
    nsFd = openSync(`/var/run/netns/${NS}`, 'r');
    dir = mkdtempSync(join(tmpdir(), 'skua-seqp-'));
  });
  after(() => {
    if (nsFd >= 0) closeSync(nsFd);
    try { run('ip', 'netns', 'del', NS); } catch { /* already gone */ }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('a TCP listener inside the namespace: reachable from inside, not from the host', async () => {
    const server = await listenInNetns(nsFd, '127.0.0.1', 15999);
    server.on('connection', (s) => s.end('hello from the pod'));
    try {
      const inside = socketInNetns(nsFd, 4);
      inside.connect(15999, '127.0.0.1');
      const chunks: Buffer[] = [];
      inside.on('data', (c: Buffer) => chunks.push(c));
      await once(inside, 'end');
      assert.equal(Buffer.concat(chunks).toString(), 'hello from the pod');
      inside.destroy();
      const outside = net.connect(15999, '127.0.0.1');
      const [err] = await once(outside, 'error') as [NodeJS.ErrnoException];
      assert.equal(err.code, 'ECONNREFUSED');
    } finally {
      server.close();
    }
  });

  test('UDP inside the namespace', async () => {
    const sock = await udpInNetns(nsFd, '127.0.0.1', 15998);
    sock.on('message', (m, rinfo) => sock.send(Buffer.concat([Buffer.from('echo:'), m]), rinfo.port, rinfo.address));
    try {
      // The client runs in the namespace; async, so this loop can answer it.
      const { stdout } = await execFileAsync('ip', ['netns', 'exec', NS, 'python3', '-c',
        'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3);s.sendto(b"ping",("127.0.0.1",15998));print(s.recv(100).decode())']);
      assert.equal(stdout.trim(), 'echo:ping');
    } finally {
      sock.close();
    }
  });

  test('SO_MARK is on the packets of a socket made in the namespace', async () => {
    run('ip', 'netns', 'exec', NS, 'iptables', '-t', 'mangle', '-A', 'OUTPUT', '-p', 'tcp', '--dport', '15997', '-m', 'mark', '--mark', '0x539', '-j', 'ACCEPT');
    const server = await listenInNetns(nsFd, '127.0.0.1', 15997);
    server.on('connection', (s) => s.end());
    try {
      for (const mark of [0x539, 0]) {
        const s = socketInNetns(nsFd, 4, { mark });
        s.connect(15997, '127.0.0.1');
        s.resume();
        await once(s, 'end');
        s.destroy();
      }
      const counters = run('ip', 'netns', 'exec', NS, 'iptables', '-t', 'mangle', '-L', 'OUTPUT', '-v', '-x', '-n');
      const packets = Number(/^\s*(\d+)\s+\d+\s+ACCEPT/m.exec(counters)?.[1]);
      // The marked connection's packets (SYN, ACK, FIN...) matched; the unmarked one's did not add a SYN.
      assert.ok(packets >= 3 && packets < 8, counters);
    } finally {
      server.close();
    }
  });

  test('a namespace fd over SEQPACKET arrives as the same namespace; boundaries and end of stream', async () => {
    const path = join(dir, 'zds.sock');
    const server = new SeqpacketServer(path);
    const accepted = server.accept();
    const client = SeqpacketSocket.connect(path);
    const peer = (await accepted)!;
    try {
      peer.send(Buffer.from('first'), [nsFd]);
      peer.send(Buffer.from('second'));
      const m1 = (await client.receive())!;
      const m2 = (await client.receive())!;
      assert.equal(m1.data.toString(), 'first');
      assert.equal(m1.fds.length, 1);
      assert.notEqual(m1.fds[0], nsFd);
      assert.equal(fstatSync(m1.fds[0]).ino, statSync(`/var/run/netns/${NS}`).ino);
      closeSync(m1.fds[0]);
      assert.deepEqual([m2.data.toString(), m2.fds.length], ['second', 0]);
      client.send(Buffer.from('ack'));
      assert.equal((await peer.receive())?.data.toString(), 'ack');
      peer.close();
      assert.equal(await client.receive(), undefined);
    } finally {
      client.close();
      server.close();
    }
  });
});
