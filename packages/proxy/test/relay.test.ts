// The core byte relay over real sockets: every byte both ways with half-close when the writes are
// batched per turn, and its backpressure bound — a receiver that stops reading holds the relay to
// RELAY_BUFFER_BYTES unsent (plus the chunk that crossed it) while the sender is paused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { relay, RELAY_BUFFER_BYTES } from '../src/hbone/relay.ts';

async function listen(s: Server): Promise<number> {
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  return (s.address() as { port: number }).port;
}

/** client → [a | relay | b] → sink; resolves with the four sockets once the relay runs. */
async function chain(onSink: (s: Socket) => void): Promise<{ client: Socket; a: Socket; b: Socket; close: () => void; closed: Promise<[number, number]> }> {
  const sinkServer = createServer({ allowHalfOpen: true }, onSink);
  const sinkPort = await listen(sinkServer);
  let done!: (v: [number, number]) => void;
  const closed = new Promise<[number, number]>((r) => { done = r; });
  let a!: Socket, b!: Socket;
  const front = createServer({ allowHalfOpen: true }, (s) => {
    a = s;
    b = connect({ port: sinkPort, host: '127.0.0.1', allowHalfOpen: true });
    b.once('connect', () => relay(a, b, (up, down) => done([up, down])));
  });
  const port = await listen(front);
  const client = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  await once(client, 'connect');
  while (!b || b.connecting) await new Promise((r) => setTimeout(r, 5));
  return { client, a, b, closed, close: () => { front.close(); sinkServer.close(); } };
}

test('many small writes both ways: every byte in order, half-close passed on, counts reported once', { timeout: 30_000 }, async () => {
  const sha = (b: Buffer[]): string => createHash('sha256').update(Buffer.concat(b)).digest('hex');
  const toSink: Buffer[] = [], sinkGot: Buffer[] = [], back: Buffer[] = [], clientGot: Buffer[] = [];
  const c = await chain((s) => {
    s.on('data', (d: Buffer) => sinkGot.push(d));
    s.on('end', () => {
      for (let i = 0; i < 500; i++) { const d = Buffer.alloc(1 + (i % 700), i); back.push(d); s.write(d); }
      s.end();
    });
  });
  c.client.on('data', (d: Buffer) => clientGot.push(d));
  for (let i = 0; i < 2000; i++) { const d = Buffer.alloc(1 + ((i * 37) % 3000), i); toSink.push(d); c.client.write(d); }
  c.client.end();
  await once(c.client, 'end');
  const [up, down] = await (c.client.destroy(), c.closed);
  assert.equal(sha(sinkGot), sha(toSink), 'client → sink intact');
  assert.equal(sha(clientGot), sha(back), 'sink → client intact after the half-close');
  assert.equal(up, Buffer.concat(toSink).length);
  assert.equal(down, Buffer.concat(back).length);
  c.close();
});

test('a receiver that stops reading pauses the sender: the relay holds at most RELAY_BUFFER_BYTES more', { timeout: 30_000 }, async () => {
  let sink!: Socket;
  const c = await chain((s) => { sink = s; s.pause(); });
  const chunk = Buffer.alloc(64 * 1024, 1);
  const total = 64 * 2 ** 20;
  let written = 0;
  const pump = (): void => {
    while (written < total) { written += chunk.length; if (!c.client.write(chunk)) { c.client.once('drain', pump); return; } }
    c.client.end();
  };
  pump();
  // Kernel buffers on both hops fill, then the relay stops reading from `a`.
  let last = -1;
  for (let i = 0; i < 100 && c.b.bytesWritten + c.b.writableLength !== last; i++) {
    last = c.b.bytesWritten + c.b.writableLength;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(written < total, 'the sender was held back');
  assert.ok(c.a.isPaused(), 'the relay paused its source');
  assert.ok(c.b.writableLength <= RELAY_BUFFER_BYTES + chunk.length, `unsent in the relay: ${c.b.writableLength} B`);
  let got = 0;
  sink.on('data', (d: Buffer) => { got += d.length; });
  sink.resume();
  await once(sink, 'end');
  assert.equal(got, total, 'every byte once the receiver reads again');
  sink.end();
  c.client.resume();
  await c.closed;
  c.client.destroy();
  c.close();
});
