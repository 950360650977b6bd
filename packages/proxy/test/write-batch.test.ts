/**
 * HTTP/1.1 write batching (http/h1/write-batch.ts) over real TCP sockets: quiet turns (one write
 * each) switch writes to going out at once, a busy turn found by a probe switches holding back
 * on, and in every mode each receiver gets every byte in the order written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { batchedWrite, writesGoDirect } from '../src/http/h1/write-batch.ts';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

interface Link { client: Socket; received: () => string; close: () => void }

async function link(): Promise<Link> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const accepted = once(server, 'connection');
  const client = connect({ port, host: '127.0.0.1', noDelay: true });
  await once(client, 'connect');
  const [peer] = (await accepted) as [Socket];
  let text = '';
  peer.setEncoding('latin1');
  peer.on('data', (d: string) => { text += d; });
  return { client, received: () => text, close: () => { client.destroy(); peer.destroy(); server.close(); } };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('quiet turns write at once, a busy turn holds writes again, and no byte is lost or reordered', async () => {
  const a = await link();
  const b = await link();
  try {
    const sent = { a: '', b: '' };
    const write = (name: 'a' | 'b', l: Link, s: string): void => { sent[name] += s; batchedWrite(l.client, Buffer.from(s, 'latin1')); };
    // A busy turn first: held to the turn's end, both sockets flushed together.
    for (let i = 0; i < 4; i++) { write('a', a, `a${i};`); write('b', b, `b${i};`); }
    await nextTurn();
    await nextTurn();
    assert.equal(writesGoDirect(), false, 'a busy turn keeps writes held');
    // Quiet turns: one write each.
    for (let i = 0; i < 20; i++) { write('a', a, `q${i};`); await nextTurn(); await nextTurn(); }
    assert.equal(writesGoDirect(), true, 'after quiet turns writes go out at once');
    // A direct write is on the wire before the turn ends (nothing waits for a flush).
    write('b', b, 'now;');
    assert.equal(b.client.writableLength, 0, 'written, not buffered');
    // A busy turn while direct: the probe (every 32nd write) holds the rest of the turn and switches back.
    for (let i = 0; i < 40; i++) write(i % 2 ? 'a' : 'b', i % 2 ? a : b, `x${i};`);
    await nextTurn();
    await nextTurn();
    assert.equal(writesGoDirect(), false, 'the probe saw a busy turn');
    await until(() => a.received() === sent.a && b.received() === sent.b, 'every byte at both receivers');
    assert.equal(a.received(), sent.a);
    assert.equal(b.received(), sent.b);
  } finally {
    a.close();
    b.close();
  }
});
