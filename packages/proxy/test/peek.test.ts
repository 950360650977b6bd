// Listener-filter peeking: listener_filters_timeout 0s (istiod's value on every sidecar listener)
// means no timeout, so bytes that arrive late are still inspected.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { peek } from '../src/listener/peek.ts';

test('peek with timeout 0 waits for the bytes instead of timing out at once', async () => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
  const socket = await accepted;
  const result = new Promise<{ bytes: string; timedOut: boolean }>((resolve) => {
    peek(socket, (b) => b.includes('\r\n'), 0, (bytes, timedOut) => resolve({ bytes: bytes.toString(), timedOut }));
  });
  try {
    // Written after the peek started, on a later turn of the event loop.
    setTimeout(() => client.write('GET / HTTP/1.1\r\n'), 30);
    assert.deepEqual(await result, { bytes: 'GET / HTTP/1.1\r\n', timedOut: false });
  } finally {
    client.destroy();
    socket.destroy();
    server.close();
  }
});
