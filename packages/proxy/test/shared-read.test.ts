import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { readIntoShared, readIntoStream } from '../src/http/h1/shared-read.ts';

/** A connected pair: `accepted` as net.Server hands it over (paused), `client` the other end. */
async function pair(): Promise<{ accepted: Socket; client: Socket; close: () => void }> {
  const server = createServer({ pauseOnConnect: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const client = connect(port, '127.0.0.1');
  const [accepted] = await once(server, 'connection') as [Socket];
  return { accepted, client, close: () => { client.destroy(); accepted.destroy(); server.close(); } };
}

function until(cond: () => boolean): Promise<void> {
  return new Promise((resolve) => { const t = setInterval(() => { if (cond()) { clearInterval(t); resolve(); } }, 5); });
}

test('accepted sockets read into the shared buffer on this Node, after the bytes a peek put back', async () => {
  const { accepted, client, close } = await pair();
  try {
    accepted.unshift(Buffer.from('early '));
    const buffer = Buffer.alloc(1024);
    const got: string[] = [];
    const early = readIntoShared(accepted, buffer, (n) => got.push(buffer.toString('latin1', 0, n)));
    assert.ok(early, 'the shared-buffer read path is available (net.Socket internals changed?)');
    assert.equal(early.toString(), 'early ');
    accepted.resume();
    client.write('one');
    await until(() => got.join('') === 'one');
    // pause() stops the reads; resume() starts them again.
    accepted.pause();
    client.write('two');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(got.join(''), 'one');
    accepted.resume();
    await until(() => got.join('') === 'onetwo');
    // Back to a plain stream: 'data' events with bytes of their own.
    readIntoStream(accepted, buffer);
    const chunks: Buffer[] = [];
    accepted.on('data', (c: Buffer) => chunks.push(c));
    client.write('three');
    await until(() => Buffer.concat(chunks).toString() === 'three');
    buffer.fill(0);
    assert.equal(Buffer.concat(chunks).toString(), 'three');
    const ended = once(accepted, 'end');
    client.end();
    await ended;
  } finally {
    close();
  }
});
