/**
 * L4 sink: `node bench/tools/tcp-sink.ts <port>`. Each connection starts with an
 * 8-byte big-endian payload length; the sink counts the payload and, once all
 * of it arrived, answers one byte ("k") so the source can stop its clock. No
 * half-close is needed, so every proxy is measured the same way.
 */
import net from 'node:net';

const HEADER = 8;

interface Conn {
  header: Buffer;
  headerFill: number;
  expected: number;
  received: number;
  done: boolean;
}

function onData(sock: net.Socket, c: Conn, chunk: Buffer): void {
  let off = 0;
  if (c.headerFill < HEADER) {
    const n = Math.min(HEADER - c.headerFill, chunk.length);
    chunk.copy(c.header, c.headerFill, 0, n);
    c.headerFill += n;
    off = n;
    if (c.headerFill < HEADER) return;
    c.expected = Number(c.header.readBigUInt64BE(0));
  }
  c.received += chunk.length - off;
  if (!c.done && c.received >= c.expected) {
    c.done = true;
    sock.end('k');
  }
}

function onConnection(sock: net.Socket): void {
  const c: Conn = { header: Buffer.alloc(HEADER), headerFill: 0, expected: 0, received: 0, done: false };
  sock.on('data', (chunk: Buffer) => onData(sock, c, chunk));
  sock.on('error', () => sock.destroy());
}

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  process.stderr.write('usage: tcp-sink.ts <port>\n');
  process.exit(2);
}
net.createServer(onConnection).listen(port, '127.0.0.1');
