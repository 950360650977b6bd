// Socket options from the native addon. The namespace part needs root, ip and iptables: it runs this
// same file inside a fresh network namespace (argv[2] === 'netns-child'), where iptables REDIRECTs
// port 7777 to a listener, and checks what the child reports.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  available,
  createSocket,
  getOriginalDst,
  originalDestination,
  setMark,
  setTransparent,
  trimNativeHeap,
  type OriginalDst,
} from '../src/sys/sockopt.ts';

const LISTENER_PORT = 15001;
const CAPTURED_PORT = 7777;
const MARK_PORT = 7778;
const MARK = 0x539;

async function listen(server: net.Server, port: number, host?: string): Promise<net.Server> {
  server.listen(port, host);
  await once(server, 'listening');
  return server;
}

/** Connects `client` (already connecting) and returns the socket `server` accepted for it. */
async function accepted(server: net.Server, client: net.Socket): Promise<net.Socket> {
  const [[conn]] = await Promise.all([once(server, 'connection'), once(client, 'connect')]);
  return conn as net.Socket;
}

// ---- child: runs inside the namespace, prints one JSON report ----

interface ChildReport {
  captured: Record<string, { nat: OriginalDst | null; dst: OriginalDst; local: string }>;
  markedFwmark: string;
  transparentBind: { error: string | null; ss: string };
  plainBind: { error: string | null };
}

async function netnsChild(): Promise<ChildReport> {
  const server = await listen(net.createServer(), LISTENER_PORT); // '::', dual-stack
  const captured: ChildReport['captured'] = {};
  const targets: Array<[string, string, number]> = [
    ['ipv4', '127.0.0.1', CAPTURED_PORT],
    ['ipv4-alias', '127.0.0.5', CAPTURED_PORT],
    ['ipv6', '::1', CAPTURED_PORT],
    ['direct', '127.0.0.1', LISTENER_PORT],
  ];
  for (const [name, host, port] of targets) {
    const client = net.connect(port, host);
    const conn = await accepted(server, client);
    captured[name] = {
      nat: getOriginalDst(conn),
      dst: originalDestination(conn),
      local: `${conn.localAddress}:${conn.localPort}`,
    };
    client.destroy();
    conn.destroy();
  }

  // SO_MARK before connect: the parent reads the iptables `-m mark` counter; ss shows the fwmark.
  const sink = await listen(net.createServer(), MARK_PORT, '127.0.0.1');
  const marked = createSocket(4, { mark: MARK }).connect(MARK_PORT, '127.0.0.1');
  const markedConn = await accepted(sink, marked);
  marked.write('x');
  await once(markedConn, 'data');
  setMark(markedConn, 0x22); // works on connected sockets too
  const ss = execFileSync('ss', ['-tnHe', 'state', 'established', 'dport', `= :${MARK_PORT}`], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'], // ss -e complains about cgroup2 mounts on stderr
  });
  const markedFwmark = /fwmark:(0x[0-9a-f]+)/.exec(ss)?.[1] ?? '';
  marked.destroy();
  markedConn.destroy();

  // IP_TRANSPARENT: on a listener, and before connect() so the socket may bind a non-local address.
  setTransparent(server, true);
  const bindFrom = async (transparent: boolean): Promise<string | null> => {
    const s = createSocket(4, { transparent });
    let error: string | null = null;
    s.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    s.connect({ host: '127.0.0.1', port: LISTENER_PORT, localAddress: '10.9.9.9' });
    await sleep(100); // the bind happens on the next tick; its error follows at once
    return error;
  };
  const transparentError = await bindFrom(true);
  const transparentBind = {
    error: transparentError,
    ss: execFileSync('ss', ['-tnH', 'src', '10.9.9.9'], { encoding: 'utf8' }),
  };
  const plainBind = { error: await bindFrom(false) };
  return { captured, markedFwmark, transparentBind, plainBind };
}

/** 250 MB of 16 KiB native buffers freed under a live one (so the heap's top cannot shrink): RSS in MB at each step. */
async function trimChild(): Promise<{ peak: number; afterFree: number; released: boolean; afterTrim: number }> {
  const rss = (): number => Math.round(process.memoryUsage().rss / 1048576);
  let burst: Buffer[] | undefined = [];
  for (let i = 0; i < 16_000; i++) burst.push(Buffer.allocUnsafeSlow(16 * 1024).fill(1));
  const pinned = Buffer.allocUnsafeSlow(16 * 1024).fill(2);
  const peak = rss();
  burst = undefined;
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  await sleep(100);
  const afterFree = rss();
  const released = trimNativeHeap();
  const afterTrim = rss();
  assert.equal(pinned[0], 2);
  return { peak, afterFree, released, afterTrim };
}

if (process.argv[2] === 'trim-child') {
  console.log(JSON.stringify(await trimChild()));
  process.exit(0);
}

if (process.argv[2] === 'netns-child') {
  const timer = setTimeout(() => {
    console.error('netns child: timed out');
    process.exit(2);
  }, 10_000);
  console.log(JSON.stringify(await netnsChild()));
  clearTimeout(timer);
  process.exit(0);
}

// ---- tests ----

describe('sockopt on plain loopback', { skip: available ? false : 'addon not built (scripts/build-native.sh)' }, () => {
  test('no NAT entry: getOriginalDst is null, originalDestination is the local address', async () => {
    for (const host of ['127.0.0.1', '::']) {
      const server = await listen(net.createServer(), 0, host);
      const { port } = server.address() as net.AddressInfo;
      const client = net.connect(port, host === '::' ? '127.0.0.1' : host);
      const conn = await accepted(server, client);
      // Without conntrack there is no entry (null); with conntrack loaded (iptables nat anywhere in
      // this namespace) the kernel reports the un-NAT'd tuple, i.e. the local address.
      const nat = getOriginalDst(conn);
      assert.ok(nat === null || (nat.address === '127.0.0.1' && nat.port === port), JSON.stringify(nat));
      assert.deepEqual(originalDestination(conn), { address: '127.0.0.1', port, family: 'IPv4' });
      client.destroy();
      conn.destroy();
      server.close();
    }
  });

  test('a socket without an fd throws EBADF', () => {
    assert.throws(() => getOriginalDst(new net.Socket()), { code: 'EBADF' });
  });

  test('trimNativeHeap gives a burst freed mid-heap back to the kernel (RSS falls by most of it)', { skip: process.platform === 'linux' ? false : 'glibc only' }, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), 'trim-child'], { timeout: 30_000 });
    const r = JSON.parse(stdout.trim().split('\n').pop() as string) as Awaited<ReturnType<typeof trimChild>>;
    assert.ok(r.peak - r.afterFree < 100, `free() alone keeps the pages: ${JSON.stringify(r)}`);
    assert.equal(r.released, true, JSON.stringify(r));
    assert.ok(r.afterFree - r.afterTrim > 150, `trim returns > 150 of the 250 MB: ${JSON.stringify(r)}`);
  });
});

function rootSkipReason(): string | false {
  if (!available) return 'addon not built (scripts/build-native.sh)';
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, iptables)';
  for (const tool of ['ip', 'iptables', 'ip6tables', 'ss']) {
    try {
      execFileSync(tool, ['-V'], { stdio: 'ignore' });
    } catch {
      return `${tool} is not installed`;
    }
  }
  return false;
}

const skipReason = rootSkipReason();
if (skipReason) console.log(`# sockopt netns tests skipped: ${skipReason}`);

describe('sockopt in a network namespace (root)', { skip: skipReason }, () => {
  const ns = `skua-sockopt-${process.pid}`;
  const inNs = (...args: string[]): string => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8' });
  let report: ChildReport;

  before(async () => {
    execFileSync('ip', ['netns', 'add', ns]);
    inNs('ip', 'link', 'set', 'lo', 'up');
    for (const ipt of ['iptables', 'ip6tables']) {
      inNs(ipt, '-w', '-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '--dport', String(CAPTURED_PORT),
        '-j', 'REDIRECT', '--to-ports', String(LISTENER_PORT));
    }
    inNs('iptables', '-w', '-A', 'OUTPUT', '-p', 'tcp', '--dport', String(MARK_PORT), '-m', 'mark', '--mark', String(MARK));
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const { stdout } = await promisify(execFile)(
      'ip', ['netns', 'exec', ns, process.execPath, fileURLToPath(import.meta.url), 'netns-child'],
      { env, timeout: 30_000 },
    );
    report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as ChildReport;
  });

  after(() => {
    try {
      execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    } catch {}
  });

  test('REDIRECT to the listener: getOriginalDst reports the captured IPv4 destination', () => {
    const r = report.captured['ipv4'];
    assert.deepEqual(r.nat, { address: '127.0.0.1', port: CAPTURED_PORT, family: 'IPv4' });
    assert.deepEqual(r.dst, r.nat);
    assert.equal(r.local, `::ffff:127.0.0.1:${LISTENER_PORT}`); // accepted on the dual-stack listener
  });

  test('REDIRECT keeps the original 127.0.0.x address', () => {
    assert.deepEqual(report.captured['ipv4-alias'].nat, { address: '127.0.0.5', port: CAPTURED_PORT, family: 'IPv4' });
  });

  test('IPv6 REDIRECT: IP6T_SO_ORIGINAL_DST', () => {
    assert.deepEqual(report.captured['ipv6'].nat, { address: '::1', port: CAPTURED_PORT, family: 'IPv6' });
  });

  test('a direct (not NAT-ed) connection reports its own local address', () => {
    const r = report.captured['direct'];
    assert.deepEqual(r.dst, { address: '127.0.0.1', port: LISTENER_PORT, family: 'IPv4' });
    if (r.nat !== null) assert.deepEqual(r.nat, r.dst);
  });

  test('setMark before connect: iptables -m mark matches and ss shows the fwmark', () => {
    assert.equal(report.markedFwmark, `0x${MARK.toString(16)}`);
    const rule = inNs('iptables', '-w', '-L', 'OUTPUT', '1', '-n', '-v', '-x');
    const packets = Number(rule.trim().split(/\s+/)[0]);
    assert.ok(packets > 0, `mark rule counted no packets: ${rule}`);
  });

  test('setTransparent: a transparent socket binds a non-local address, a plain one cannot', () => {
    assert.equal(report.transparentBind.error, null);
    assert.match(report.transparentBind.ss, /10\.9\.9\.9/);
    assert.equal(report.plainBind.error, 'EADDRNOTAVAIL');
  });
});
