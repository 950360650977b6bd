// The sidecar's DNS proxy with real peers: dig as the app's resolver, dnsmasq as the pod's
// upstream resolver. Mesh names from an NDS table are answered locally (short names, search-
// domain CNAMEs, wildcards, NOERROR-without-records), everything else is forwarded and cached
// (bounded, TTL-aged), over UDP and TCP; hostile input gets FORMERR or is dropped, the proxy
// stays up. Then the whole chain: skua-controlplane --mesh serves NDS over xDS to
// `skua-proxy proxy sidecar` with ISTIO_META_DNS_CAPTURE=true, and dig gets the service VIPs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DnsProxy } from '../packages/proxy/src/dns/server.ts';
import { Forwarder } from '../packages/proxy/src/dns/forward.ts';
import { NameTable, type NameInfo } from '../packages/proxy/src/dns/table.ts';
import { nameInfos } from '../packages/proxy/src/dns/agent-dns.ts';
import { cleanup, freePort, proxyMain } from './lib/proxy.ts';
import { startControlPlane, type RunningControlPlane } from './lib/controlplane.ts';

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const skip = !has('dig') ? 'dig is not installed (bind9-dnsutils)' : !has('dnsmasq') ? 'dnsmasq is not installed (dnsmasq-base)' : false;

interface Dig { status: string; flags: string; answers: string[]; raw: string }

/** One dig query (async: the proxy under test may share this event loop); answers as "name ttl type data" lines. */
async function dig(port: number, name: string, type = 'A', extra: string[] = []): Promise<Dig> {
  const raw = await new Promise<string>((resolve) => {
    execFile('dig', ['@127.0.0.1', '-p', String(port), name, type, '+tries=1', '+time=3', '+noedns', ...extra], { encoding: 'utf8', timeout: 10_000 }, (_e, stdout) => resolve(stdout ?? ''));
  });
  const status = /status: (\w+)/.exec(raw)?.[1] ?? `no reply (${raw.trim().split('\n').pop()})`;
  const flags = /;; flags: ([^;]*);/.exec(raw)?.[1].trim() ?? '';
  const section = /;; ANSWER SECTION:\n([\s\S]*?)\n\n/.exec(raw)?.[1] ?? '';
  const answers = section.split('\n').filter(Boolean).map((l) => l.split(/\s+/).filter((f) => f !== 'IN').join(' '));
  return { status, flags, answers, raw };
}

interface Dnsmasq { port: number; queries(): number; stop(): Promise<void> }

/** dnsmasq as the pod's resolver: authoritative for .test, external.test → 10.1.2.3, big.test → 100 addresses. */
async function startDnsmasq(): Promise<Dnsmasq> {
  const port = await freePort();
  const big = Array.from({ length: 100 }, (_, i) => `--host-record=big.test,10.2.${Math.floor(i / 250)}.${(i % 250) + 1}`);
  const child: ChildProcess = spawn('dnsmasq', ['-k', '--conf-file=/dev/null', '--no-resolv', '--no-hosts', `--port=${port}`, '--listen-address=127.0.0.1',
    '--bind-interfaces', '--address=/external.test/10.1.2.3', '--local=/test/', '--local-ttl=300', '--log-queries', '--log-facility=-', '--user=root', '--pid-file=', ...big],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { log += d; });
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { log += d; });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  for (let i = 0; i < 100 && !/started, version/.test(log); i++) await new Promise((r) => setTimeout(r, 50));
  if (!/started, version/.test(log)) throw new Error(`dnsmasq did not start: ${log}`);
  return {
    port,
    queries: () => (log.match(/query\[/g) ?? []).length,
    async stop() { if (child.exitCode === null) { child.kill('SIGKILL'); await exited; } },
  };
}

const k8s = (ips: string[], shortname: string, namespace: string): NameInfo => ({ ips, registry: 'Kubernetes', shortname, namespace, altHosts: [] });
const TABLE = new Map<string, NameInfo>([
  ['reviews.default.svc.cluster.local', k8s(['10.96.0.21'], 'reviews', 'default')],
  ['ratings.prod.svc.cluster.local', k8s(['10.96.0.31', 'fd00::31'], 'ratings', 'prod')],
  ['*.wiki.example', { ips: ['240.240.0.7'], registry: 'External', shortname: '', namespace: '', altHosts: [] }],
  ['api.partner.example', { ips: ['240.240.0.8'], registry: 'External', shortname: '', namespace: '', altHosts: [] }],
]);
const CTX = { proxyNamespace: 'default', proxyDomain: 'default.svc.cluster.local', searchDomains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'] };

describe('DNS proxy (in process) with dig and dnsmasq', { skip }, () => {
  let upstream: Dnsmasq;
  let proxy: DnsProxy;
  let forwarder: Forwarder;
  let port = 0;

  before(async () => {
    upstream = await startDnsmasq();
    forwarder = new Forwarder({ servers: [{ host: '127.0.0.1', port: upstream.port }], timeoutMs: 1000, cacheEntries: 64 });
    proxy = new DnsProxy({ port: 0, forwarder });
    await proxy.start();
    port = proxy.port;
  });
  after(() => cleanup(() => proxy?.close(), () => upstream?.stop()));

  test('before the first NDS table every query gets SERVFAIL (no name is "unknown" yet)', async () => {
    assert.equal((await dig(port, 'reviews.default.svc.cluster.local')).status, 'SERVFAIL');
    assert.equal((await dig(port, 'external.test')).status, 'SERVFAIL');
  });

  test('mesh names: FQDN, name.ns, name.ns.svc and the short name in the proxy\'s namespace, authoritative, TTL 30', async () => {
    proxy.setTable(new NameTable(TABLE, CTX));
    for (const name of ['reviews.default.svc.cluster.local', 'reviews.default', 'reviews.default.svc', 'reviews', 'REVIEWS.Default.svc.cluster.local']) {
      const r = await dig(port, name);
      assert.equal(r.status, 'NOERROR', name);
      assert.match(r.flags, /\baa\b/, `${name}: authoritative`);
      assert.deepEqual(r.answers, [`${name.toLowerCase()}. 30 A 10.96.0.21`], name);
    }
    // Another namespace's service: no bare short name (that is forwarded, and dnsmasq knows nothing of it).
    assert.deepEqual((await dig(port, 'ratings.prod')).answers, ['ratings.prod. 30 A 10.96.0.31']);
    assert.deepEqual((await dig(port, 'ratings.prod.svc.cluster.local', 'AAAA')).answers, ['ratings.prod.svc.cluster.local. 30 AAAA fd00::31']);
    assert.notEqual((await dig(port, 'ratings')).status, 'NOERROR');
  });

  test('search-domain expansion gets a CNAME chain; a known name without that record type is NOERROR with no answers', async () => {
    // ndots:5 makes a resolver try `reviews.default` + the first search domain before `reviews.default.` itself.
    const r = await dig(port, 'reviews.default.default.svc.cluster.local');
    assert.deepEqual(r.answers, [
      'reviews.default.default.svc.cluster.local. 30 CNAME reviews.default.',
      'reviews.default. 30 A 10.96.0.21',
    ]);
    const aaaa = await dig(port, 'reviews.default.svc.cluster.local', 'AAAA');
    assert.equal(aaaa.status, 'NOERROR');
    assert.deepEqual(aaaa.answers, []);
  });

  test('ServiceEntry-style hosts: exact and wildcard names answer with the asked name', async () => {
    assert.deepEqual((await dig(port, 'api.partner.example')).answers, ['api.partner.example. 30 A 240.240.0.8']);
    assert.deepEqual((await dig(port, 'en.wiki.example')).answers, ['en.wiki.example. 30 A 240.240.0.7']);
    assert.deepEqual((await dig(port, 'a.b.wiki.example')).answers, ['a.b.wiki.example. 30 A 240.240.0.7']);
  });

  test('other names go to the pod resolver, over UDP and TCP; answers are cached and their TTL ages', async () => {
    const before = upstream.queries();
    const first = await dig(port, 'external.test');
    assert.equal(first.status, 'NOERROR');
    assert.deepEqual(first.answers, ['external.test. 300 A 10.1.2.3']);
    assert.equal(upstream.queries(), before + 1);
    await new Promise((r) => setTimeout(r, 1100));
    const second = await dig(port, 'external.test');
    assert.equal(upstream.queries(), before + 1, 'the second query is answered from the cache');
    assert.equal(second.answers.length, 1);
    const ttl = Number(second.answers[0].split(' ')[1]);
    assert.ok(ttl < 300 && ttl >= 50, `cached TTL aged and capped at 60 s: ${ttl}`);
    assert.ok(forwarder.cacheHits >= 1);
    // NXDOMAIN from the resolver is passed on (and cached negatively).
    assert.equal((await dig(port, 'nosuch.test')).status, 'NXDOMAIN');
    // TCP: local and forwarded.
    assert.deepEqual((await dig(port, 'reviews', 'A', ['+tcp'])).answers, ['reviews. 30 A 10.96.0.21']);
    assert.deepEqual((await dig(port, 'external.test', 'A', ['+tcp'])).answers.map((a) => a.split(' ')[3]), ['10.1.2.3']);
  });

  test('a UDP answer too big for 512 bytes is truncated (TC); over TCP all 100 records arrive', async () => {
    const udp = await dig(port, 'big.test', 'A', ['+ignore']);
    assert.match(udp.flags, /\btc\b/);
    const tcp = await dig(port, 'big.test', 'A', ['+tcp']);
    assert.equal(tcp.answers.length, 100);
  });

  test('the answer cache is bounded', async () => {
    for (let i = 0; i < 80; i++) await dig(port, `n${i}.external.test`);
    assert.ok(forwarder.cacheSize <= 64, `cache holds ${forwarder.cacheSize} entries`);
  });

  test('hostile input: garbage is dropped, a malformed query gets FORMERR, the proxy keeps answering', async () => {
    const sock = createSocket('udp4');
    const replies: Buffer[] = [];
    sock.on('message', (m) => replies.push(m));
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    const send = (b: Buffer): Promise<void> => new Promise((r) => sock.send(b, port, '127.0.0.1', () => r()));
    await send(Buffer.from([1, 2, 3]));
    // A header claiming one question whose label runs past the end.
    await send(Buffer.from([0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 60, 0x61]));
    // A compression-pointer loop.
    await send(Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1]));
    await new Promise((r) => setTimeout(r, 300));
    sock.close();
    assert.equal(replies.length, 2, 'the 3-byte datagram got no reply; the two malformed queries did');
    for (const r of replies) assert.equal(r[3] & 0xf, 1, 'FORMERR');
    assert.deepEqual(replies.map((r) => r.readUInt16BE(0)).sort((a, b) => a - b), [0x1234, 0xabcd]);
    assert.deepEqual((await dig(port, 'reviews')).answers, ['reviews. 30 A 10.96.0.21']);
  });

  test('hostile TCP: a half-sent message holds nothing up, a malformed one gets FORMERR on the same connection', async () => {
    const { connect } = await import('node:net');
    const stuck = connect(port, '127.0.0.1');
    await new Promise<void>((r) => stuck.once('connect', () => r()));
    stuck.write(Buffer.from([0xff, 0xff, 1, 2, 3]));
    const s = connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    s.on('data', (c: Buffer) => got.push(c));
    await new Promise<void>((r) => s.once('connect', () => r()));
    const bad = Buffer.from([0x77, 0x77, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 60, 0x61]);
    s.write(Buffer.concat([Buffer.from([0, bad.length]), bad]));
    for (let i = 0; i < 50 && Buffer.concat(got).length < 14; i++) await new Promise((r) => setTimeout(r, 20));
    const reply = Buffer.concat(got);
    assert.equal(reply.readUInt16BE(0), reply.length - 2, 'a length-prefixed reply');
    assert.equal(reply.readUInt16BE(2), 0x7777);
    assert.equal(reply[5] & 0xf, 1, 'FORMERR');
    assert.deepEqual((await dig(port, 'reviews', 'A', ['+tcp'])).answers, ['reviews. 30 A 10.96.0.21']);
    stuck.destroy();
    s.destroy();
  });

  test('every resolver down: SERVFAIL after the timeout, not a hang', async () => {
    const dead = new DnsProxy({ port: 0, forwarder: new Forwarder({ servers: [{ host: '127.0.0.1', port: await freePort() }], timeoutMs: 500 }) });
    await dead.start();
    try {
      dead.setTable(new NameTable(TABLE, CTX));
      assert.equal((await dig(dead.port, 'external.test')).status, 'SERVFAIL');
      assert.deepEqual((await dig(dead.port, 'reviews')).answers, ['reviews. 30 A 10.96.0.21'], 'mesh names still answer');
    } finally { await dead.close(); }
  });
});

describe('NDS over xDS: skua-controlplane --mesh → skua-proxy proxy sidecar (DNS capture on)', { skip }, () => {
  let cp: RunningControlPlane;
  let agent: ChildProcess | undefined;
  let dir = '';
  let dnsPort = 0;
  let statusPort = 0;
  let err = '';

  before(async () => {
    cp = await startControlPlane({}, {
      mesh: {
        mesh: { mtls: 'DISABLE', capture: 'none' },
        services: [
          { name: 'reviews', namespace: 'default', vip: '10.96.0.21', ports: [{ port: 9080, protocol: 'http' }] },
          { name: 'ratings', namespace: 'prod', vip: '10.96.0.31', ports: [{ port: 9080, protocol: 'http' }] },
        ],
        workloads: [{ name: 'sleep-1', namespace: 'default', ip: '127.0.0.41', outbound_ip: '127.0.1.41', labels: { app: 'sleep' } }],
      },
    });
    dir = mkdtempSync(path.join(tmpdir(), 'skua-pod-dns-'));
    dnsPort = await freePort();
    const ports = { admin: await freePort(), status: await freePort(), es: await freePort(), ep: await freePort() };
    statusPort = ports.status;
    agent = spawn(process.execPath, [proxyMain, 'proxy', 'sidecar', '--concurrency', '1'], {
      cwd: dir, stdio: ['ignore', 'ignore', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '', POD_NAME: 'sleep-1', POD_NAMESPACE: 'default', INSTANCE_IP: '127.0.0.41', SERVICE_ACCOUNT: 'sleep',
        ISTIO_META_DNS_CAPTURE: 'true', DNS_PROXY_ADDR: `127.0.0.1:${dnsPort}`, JWT_POLICY: 'none',
        ENVOY_STATUS_PORT: String(ports.es), ENVOY_PROMETHEUS_PORT: String(ports.ep),
        PROXY_CONFIG: JSON.stringify({ discoveryAddress: `127.0.0.1:${cp.port}`, controlPlaneAuthPolicy: 'NONE', proxyAdminPort: ports.admin, statusPort: ports.status }),
      },
    });
    agent.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  });
  after(() => cleanup(async () => {
    if (agent && agent.exitCode === null) { const done = new Promise((r) => agent!.once('exit', r)); agent.kill('SIGKILL'); await done; }
  }, () => cp?.stop(), () => rmSync(dir, { recursive: true, force: true })));

  test('the mesh services resolve through the agent\'s DNS proxy with names derived for its namespace', async () => {
    let r: Dig | undefined;
    for (let i = 0; i < 300; i++) {
      r = await dig(dnsPort, 'reviews');
      if (r.status === 'NOERROR') break;
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(r?.status, 'NOERROR', `no NDS answer: ${r?.raw}\nagent: ${err}`);
    assert.deepEqual(r!.answers, ['reviews. 30 A 10.96.0.21']);
    assert.deepEqual((await dig(dnsPort, 'ratings.prod.svc.cluster.local')).answers, ['ratings.prod.svc.cluster.local. 30 A 10.96.0.31']);
    assert.deepEqual((await dig(dnsPort, 'ratings.prod')).answers, ['ratings.prod. 30 A 10.96.0.31']);
    // pilot-agent's /debug/ndsz: the table as received.
    const ndsz = await (await fetch(`http://127.0.0.1:${statusPort}/debug/ndsz`)).json() as { table: Record<string, { ips: string[] }> };
    assert.deepEqual(ndsz.table['reviews.default.svc.cluster.local'].ips, ['10.96.0.21']);
    // A changed mesh file is pushed as a new table.
    cp.writeMesh({
      mesh: { mtls: 'DISABLE', capture: 'none' },
      services: [{ name: 'reviews', namespace: 'default', vip: '10.96.0.99', ports: [{ port: 9080, protocol: 'http' }] }],
      workloads: [{ name: 'sleep-1', namespace: 'default', ip: '127.0.0.41', outbound_ip: '127.0.1.41', labels: { app: 'sleep' } }],
    });
    for (let i = 0; i < 300 && (await dig(dnsPort, 'reviews')).answers[0] !== 'reviews. 30 A 10.96.0.99'; i++) await new Promise((res) => setTimeout(res, 100));
    assert.deepEqual((await dig(dnsPort, 'reviews')).answers, ['reviews. 30 A 10.96.0.99']);
    const gone = await dig(dnsPort, 'ratings.prod.svc.cluster.local');
    assert.ok(!gone.answers.some((a) => a.includes('10.96.0.31')), `a service removed from the mesh is no longer answered locally: ${gone.raw}`);
  });
});

test('nameInfos reads the proto-JSON NameTable (alt_hosts too)', () => {
  const m = nameInfos({ table: { 'a.b.svc.cluster.local': { ips: ['10.0.0.1'], registry: 'Kubernetes', shortname: 'a', namespace: 'b', alt_hosts: ['x'] } } });
  assert.deepEqual(m.get('a.b.svc.cluster.local'), { ips: ['10.0.0.1'], registry: 'Kubernetes', shortname: 'a', namespace: 'b', altHosts: ['x'] });
});
