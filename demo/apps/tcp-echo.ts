/** A TCP echo server: what it reads, it writes back (the target of the proxy's tcp_proxy listener). */
import { createServer } from 'node:net';
import { serve } from './common.ts';

const server = createServer((socket) => {
  socket.on('error', () => socket.destroy());
  socket.pipe(socket);
});
serve('tcp-echo', server);
