/**
 * Load parts for the ztunnel pair bench, run inside pod namespaces:
 *   sink PORT                        TCP server: reads to EOF, answers the byte count (8 bytes), closes
 *   throughput HOST PORT MB STREAMS  sends MB in total over STREAMS connections; prints JSON {bytes, seconds, gbps}
 *   connrate HOST PORT SECONDS N     N loops of connect → 1 byte → answer → close; prints JSON {connections, perSecond}
 *   hold HOST PORT N                 opens N connections (each answered once) and keeps them until stdin closes
 */
import net from 'node:net';

const [mode, ...args] = process.argv.slice(2);

function sink(port: number): void {
  net.createServer({ allowHalfOpen: true }, (s) => {
    let n = 0;
    s.on('data', (c: Buffer) => { n += c.length; });
    s.on('end', () => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); s.end(b); });
    s.on('error', () => s.destroy());
  }).listen(port, '0.0.0.0', () => process.stdout.write('listening\n'));
}

function send(host: string, port: number, bytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port, allowHalfOpen: true });
    const chunk = Buffer.alloc(64 * 1024, 7);
    let left = bytes;
    const pump = (): void => {
      while (left > 0) {
        const c = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= c.length;
        if (!s.write(c)) { s.once('drain', pump); return; }
      }
      s.end();
    };
    s.once('connect', pump);
    const got: Buffer[] = [];
    s.on('data', (c: Buffer) => got.push(c));
    s.on('end', () => { s.destroy(); const b = Buffer.concat(got); resolve(b.length === 8 ? Number(b.readBigUInt64BE()) : -1); });
    s.on('error', reject);
  });
}

async function throughput(host: string, port: number, mb: number, streams: number): Promise<void> {
  const per = Math.floor((mb * 1024 * 1024) / streams);
  const t0 = performance.now();
  const counts = await Promise.all(Array.from({ length: streams }, () => send(host, port, per)));
  const seconds = (performance.now() - t0) / 1000;
  const bytes = counts.reduce((a, b) => a + b, 0);
  if (counts.some((c) => c !== per)) throw new Error(`bytes lost: sent ${per} per stream, counted ${counts.join(',')}`);
  process.stdout.write(`${JSON.stringify({ bytes, seconds, gbps: (bytes * 8) / seconds / 1e9 })}\n`);
}

async function connrate(host: string, port: number, seconds: number, n: number): Promise<void> {
  const end = performance.now() + seconds * 1000;
  let done = 0, failed = 0;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      try { if ((await send(host, port, 1)) === 1) done++; else failed++; } catch { failed++; }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, loop));
  process.stdout.write(`${JSON.stringify({ connections: done, failed, perSecond: done / ((performance.now() - t0) / 1000) })}\n`);
}

async function hold(host: string, port: number, n: number): Promise<void> {
  const socks: net.Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect({ host, port, allowHalfOpen: true });
    s.on('error', () => {});
    await new Promise<void>((resolve) => { s.once('connect', () => resolve()); s.once('error', () => resolve()); });
    socks.push(s);
  }
  process.stdout.write(`${JSON.stringify({ open: socks.filter((s) => !s.destroyed).length })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => { for (const s of socks) s.destroy(); process.exit(0); });
}

const num = (i: number): number => Number(args[i]);
if (mode === 'sink') sink(num(0));
else if (mode === 'throughput') await throughput(args[0], num(1), num(2), num(3));
else if (mode === 'connrate') await connrate(args[0], num(1), num(2), num(3));
else if (mode === 'hold') await hold(args[0], num(1), num(2));
else { process.stderr.write('usage: load.ts sink|throughput|connrate|hold ...\n'); process.exit(2); }
