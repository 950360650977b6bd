/**
 * One stream (or several) through an HBONE pair on loopback, all user-space parts of the two
 * ztunnels in one child process (bench/tools/ztunnel/hbone-loop-child.ts: client pool, mutual
 * TLS 1.3, HTTP/2 CONNECT, server, both relays) — no namespaces, iptables or veth, so what is
 * measured is the relay's own cost: the child's CPU ms per GiB, its GC, throughput. Builds are run
 * alternately, round after round, and the best round of each is reported (the machine is shared).
 *   node bench/tools/hbone-loop.ts [--mb 500] [--streams 1] [--rounds 5] [--ref main,WORKTREE] [--node-options=...]
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { describeRef, ztunnelBinForRef } from './ztunnel/builds.ts';

const { values } = parseArgs({ options: {
  mb: { type: 'string', default: '500' }, streams: { type: 'string', default: '1' }, rounds: { type: 'string', default: '5' },
  ref: { type: 'string', default: 'WORKTREE' }, 'node-options': { type: 'string', default: '' },
} });
const CHILD = new URL('ztunnel/hbone-loop-child.ts', import.meta.url).pathname;
type Json = Record<string, number>;

function makeCerts(dir: string): void {
  const ossl = (...a: string[]): void => { execFileSync('openssl', a, { stdio: 'ignore' }); };
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/O=cluster.local', '-keyout', `${dir}/root.key`, '-out', `${dir}/root.crt`);
  for (const [name, sa] of [['client', 'sleep'], ['server', 'httpbin']]) {
    ossl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/', '-keyout', `${dir}/${name}.key`, '-out', `${dir}/${name}.csr`);
    writeFileSync(`${dir}/${name}.ext`, `subjectAltName=critical,URI:spiffe://cluster.local/ns/default/sa/${sa}\nextendedKeyUsage=serverAuth,clientAuth\n`);
    ossl('x509', '-req', '-in', `${dir}/${name}.csr`, '-CA', `${dir}/root.crt`, '-CAkey', `${dir}/root.key`, '-days', '1', '-extfile', `${dir}/${name}.ext`, '-out', `${dir}/${name}.crt`);
  }
}

/** The sink: counts each connection's bytes and answers the count (8 bytes) at its end. */
async function sink(): Promise<number> {
  const s = createServer({ allowHalfOpen: true }, (c) => {
    let n = 0;
    c.on('data', (b: Buffer) => { n += b.length; });
    c.on('end', () => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); c.end(b); });
    c.on('error', () => c.destroy());
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  s.unref();
  return (s.address() as { port: number }).port;
}

function send(port: number, bytes: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
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
    s.on('data', (b: Buffer) => got.push(b));
    s.on('end', () => { s.destroy(); const b = Buffer.concat(got); if (b.length === 8 && Number(b.readBigUInt64BE()) === bytes) resolve(); else reject(new Error(`sink counted ${b.length === 8 ? b.readBigUInt64BE() : '?'} of ${bytes}`)); });
    s.on('error', reject);
  });
}

function ask(child: ChildProcess, msg: string): Promise<Json> {
  return new Promise((resolve) => { child.once('message', (m) => resolve(m as Json)); child.send(msg); });
}

async function round(root: string, certDir: string, sinkPort: number): Promise<Json> {
  const child = fork(CHILD, [root, certDir, String(sinkPort)], { execArgv: values['node-options'] ? values['node-options'].split(' ') : [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  try {
    const { port } = await new Promise<Json>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Json));
      child.once('exit', (code) => reject(new Error(`hbone-loop-child exited (${code})`)));
    });
    const streams = Number(values.streams), per = Math.floor((Number(values.mb) * 2 ** 20) / streams);
    await send(port, 16 * 2 ** 20); // warm-up: the connection, the handshake, JIT
    await ask(child, 'start');
    const t0 = performance.now();
    await Promise.all(Array.from({ length: streams }, () => send(port, per)));
    const secs = (performance.now() - t0) / 1000;
    const r = await ask(child, 'stop');
    const gib = (per * streams) / 2 ** 30;
    return { gbps: (per * streams * 8) / secs / 1e9, cpuMsPerGiB: (r.userMs + r.sysMs) / gib, userMsPerGiB: r.userMs / gib, sysMsPerGiB: r.sysMs / gib,
      gcMsPerGiB: r.gcMs / gib, gcPerGiB: r.gcCount / gib, majorGcPerGiB: r.majorCount / gib, rssMb: r.rssMb, heapUsedMb: r.heapUsedMb };
  } finally {
    child.kill();
  }
}

const tmp = mkdtempSync(join(tmpdir(), 'skua-hbone-loop-'));
try {
  makeCerts(tmp);
  const sinkPort = await sink();
  const refs = values.ref.split(',');
  // <root>/packages/ztunnel/bin/skua-ztunnel.js → <root>
  const roots = refs.map((r) => dirname(dirname(dirname(dirname(ztunnelBinForRef(r, tmp))))));
  const results = refs.map(() => [] as Json[]);
  const load0 = loadavg();
  for (let i = 0; i < Number(values.rounds); i++) {
    for (const [k, root] of roots.entries()) results[k].push(await round(root, tmp, sinkPort));
  }
  const best = (rs: Json[]): Json => rs.reduce((a, b) => (b.cpuMsPerGiB < a.cpuMsPerGiB ? b : a));
  const f = (n: number): string => n.toFixed(n < 10 ? 2 : 0);
  process.stdout.write(`${values.mb} MB over ${values.streams} stream(s), best of ${values.rounds} rounds by CPU; load average ${load0.map((x) => x.toFixed(2)).join(' ')} → ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  process.stdout.write('| build | Gb/s | CPU ms/GiB (user+sys) | GC ms/GiB | GCs/GiB (major) | RSS MB | all rounds CPU ms/GiB |\n|---|---|---|---|---|---|---|\n');
  for (const [k, ref] of refs.entries()) {
    const b = best(results[k]);
    process.stdout.write(`| ${ref} (${describeRef(ref)}) | ${f(b.gbps)} | ${f(b.cpuMsPerGiB)} (${f(b.userMsPerGiB)}+${f(b.sysMsPerGiB)}) | ${f(b.gcMsPerGiB)} | ${f(b.gcPerGiB)} (${f(b.majorGcPerGiB)}) | ${f(b.rssMb)} | ${results[k].map((r) => f(r.cpuMsPerGiB)).join(' ')} |\n`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
