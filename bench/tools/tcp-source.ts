/**
 * L4 source: `node bench/tools/tcp-source.ts <port> <bytes> <runs>`. Each run
 * opens a new connection, sends an 8-byte length then `bytes` of payload in
 * 1 MiB writes (honouring backpressure) and waits for the sink's one-byte ack.
 * Prints one JSON line per run: {"run":i,"bytes":n,"seconds":s}.
 */
import net from 'node:net';

const CHUNK = Buffer.alloc(1024 * 1024, 0x61);
const RUN_TIMEOUT_MS = 60_000;

function pump(sock: net.Socket, state: { sent: number; total: number }): void {
  while (state.sent < state.total) {
    const n = Math.min(CHUNK.length, state.total - state.sent);
    state.sent += n;
    if (!sock.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
      sock.once('drain', () => pump(sock, state));
      return;
    }
  }
}

function oneRun(port: number, total: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const sock = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => sock.destroy(new Error(`no ack within ${RUN_TIMEOUT_MS} ms`)), RUN_TIMEOUT_MS);
    sock.once('connect', () => {
      const header = Buffer.alloc(8);
      header.writeBigUInt64BE(BigInt(total));
      sock.write(header);
      pump(sock, { sent: 0, total });
    });
    sock.once('data', () => {
      const seconds = (performance.now() - t0) / 1000;
      clearTimeout(timer);
      sock.destroy();
      resolve(seconds);
    });
    sock.once('error', (err) => { clearTimeout(timer); reject(err); });
    sock.once('close', () => { clearTimeout(timer); reject(new Error('connection closed before the ack')); });
  });
}

async function main(): Promise<void> {
  const [port, bytes, runs] = process.argv.slice(2, 5).map(Number);
  if (!(port > 0 && bytes > 0 && runs > 0)) {
    process.stderr.write('usage: tcp-source.ts <port> <bytes> <runs>\n');
    process.exit(2);
  }
  for (let run = 0; run < runs; run++) {
    const seconds = await oneRun(port, bytes);
    process.stdout.write(`${JSON.stringify({ run, bytes, seconds })}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`tcp-source: ${(err as Error).message}\n`);
  process.exit(1);
});
