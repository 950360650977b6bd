/**
 * The HBONE relay of a ztunnel pair in one process, for bench/tools/hbone-loop.ts: an "app" port
 * whose connections are each relayed into a CONNECT through the core's client pool (mutual TLS 1.3,
 * HTTP/2), the core's HBONE server relaying each stream to the sink port. Imports the core from
 * the build under test (argv[2], a checkout root). Told over IPC when to start and stop counting;
 * answers its CPU time, GC pauses and memory over the span.
 *   hbone-loop-child.ts ROOT CERT_DIR SINK_PORT   (IPC: 'start' | 'stop'; sends {port} once listening)
 */
import { readFileSync } from 'node:fs';
import { createServer, connect as netConnect } from 'node:net';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

const [root, certDir, sinkPort] = process.argv.slice(2);
type Hbone = typeof import('../../../packages/proxy/src/api/hbone.ts');
const hbone = await import(`${root}/packages/proxy/src/api/hbone.ts`) as Hbone;

const pem = (f: string): string => readFileSync(`${certDir}/${f}`, 'utf8');
const cert = (name: string, identity: string) => ({
  identity, chainPem: pem(`${name}.crt`), keyPem: pem(`${name}.key`), rootPem: pem('root.crt'), notBefore: 0, notAfter: Date.now() + 3600_000, serial: name,
});
const CLIENT = 'spiffe://cluster.local/ns/default/sa/sleep', SERVER = 'spiffe://cluster.local/ns/default/sa/httpbin';
const clientCert = cert('client', CLIENT), serverCert = cert('server', SERVER);

const server = new hbone.HboneServer({
  certificate: () => serverCert,
  onStream: (inb) => {
    const up = netConnect({ host: '127.0.0.1', port: Number(sinkPort), allowHalfOpen: true, noDelay: true });
    up.once('connect', () => hbone.relay(inb.accept(), up, () => {}));
    up.once('error', () => inb.refuse(503));
  },
});
const hbonePort = await server.listen(0, '127.0.0.1');
const pool = new hbone.HboneClientPool(hbone.mtlsDialer(async () => clientCert));
const app = createServer({ allowHalfOpen: true, noDelay: true }, (s) => {
  s.pause();
  pool.connect({ sourceIdentity: CLIENT, destinationIdentity: SERVER, destination: `127.0.0.1:${hbonePort}` }, `127.0.0.1:${sinkPort}`)
    .then((t) => hbone.relay(s, t.stream, () => {}), () => s.destroy());
});
await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));

let gcMs = 0, gcCount = 0, majorCount = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration; gcCount++;
    if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === 4) majorCount++; // NODE_PERFORMANCE_GC_MAJOR
  }
}).observe({ entryTypes: ['gc'] });
let cpu0 = process.cpuUsage();
process.on('message', (m: string) => {
  if (m === 'start') { cpu0 = process.cpuUsage(); gcMs = 0; gcCount = 0; majorCount = 0; process.send!({ started: true }); return; }
  const c = process.cpuUsage(cpu0);
  const mem = process.memoryUsage();
  process.send!({ userMs: c.user / 1000, sysMs: c.system / 1000, gcMs, gcCount, majorCount, rssMb: mem.rss / 2 ** 20, heapUsedMb: mem.heapUsed / 2 ** 20 });
});
process.send!({ port: (app.address() as { port: number }).port });
