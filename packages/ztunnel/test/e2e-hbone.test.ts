// skua-ztunnel end to end on two nodes in network namespaces (needs root): the real
// skua-controlplane serves WDS and the CA (ztunnel's token, ImpersonatedIdentity), a CNI stand-in
// per node speaks ZDS. client app → its ztunnel → HBONE (mTLS, ALPN h2, CONNECT) → the other
// ztunnel → server app: bytes intact both ways, the app sees the client's own address, the wire
// between the nodes carries only TLS to 15008 (tcpdump), the logs carry both identities, the dump
// lists the certificates; an ALLOW policy changed live closes the open tunnel within a second and
// refuses new ones (401); independent python3-h2 HBONE peers: a client gets 200/400/401/503 from the
// server ztunnel, a server sees what the client ztunnel sends (TLS 1.3, h2, no SNI, SPIFFE id,
// CONNECT ip:port, baggage/forwarded/traceparent) and one with the wrong identity is refused; a
// workload with a PROXY application tunnel gets the v2 header with the peer identity TLV; a DENY
// by principal pushed live closes the open tunnel within a second and refuses new ones; ALLOW by
// namespace admits a client of that namespace and refuses one of another (same service account
// name); a tunnel held open across a control-plane restart keeps moving bytes both ways (counted
// by the app and in both ztunnels' access logs) while cached state and certificates serve new
// tunnels, and new config arrives after the reconnect; with the CA down alone (it runs as its own
// skua-controlplane process) cached certificates serve new TLS connections both ways and WDS still
// delivers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { netnsAvailable, TYPE_URL } from '../src/core.ts';
import { ECHO_SERVER, PROXY_V2_ECHO_SERVER, SEND_CLIENT, type Topology } from './lib/topology.ts';
import { ip4, ZtunnelCluster, type ClusterPod, type PodDef } from './lib/cluster.ts';
import { PYTHON_HBONE_CLIENT, PYTHON_HBONE_SERVER } from './lib/python-hbone.ts';
import { waitFor } from './lib/wait.ts';
import { makeCsr, newKeyPair, privateKeyPem } from '@skua/proxy/identity';

const execFileAsync = promisify(execFile);
const skip = process.getuid?.() !== 0 || !netnsAvailable ? 'needs root and the netns addon' : false;
const SLEEP = 'spiffe://cluster.local/ns/default/sa/sleep';
const HTTPBIN = 'spiffe://cluster.local/ns/default/sa/httpbin';
type Json = Record<string, unknown>;

describe('skua-ztunnel end to end (two nodes, HBONE)', { skip, timeout: 180_000 }, () => {
  let cluster: ZtunnelCluster, topo: Topology, dir: string, client: ClusterPod, server: ClusterPod, pyServer: ClusterPod, proxied: ClusterPod, outsider: ClusterPod;
  /** A second address of the python server's pod, published as a workload with another identity. */
  const IMPOSTOR_IP = (): string => pyServer.ip.replace(/\.\d+$/, '.4');
  let logs: string[][];
  const workload = (name: string, ip: string, node: string, extra: Json = {}): Json => ({
    '@type': TYPE_URL.address,
    workload: { uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', service_account: name === 'client' ? 'sleep' : 'httpbin',
      addresses: [ip4(ip)], node, tunnel_protocol: 'HBONE', workload_name: name, canonical_name: name, canonical_revision: 'v1', ...extra },
  });
  const allow = (principal: string): Json => ({ '@type': TYPE_URL.authorization, name: 'allow-one', namespace: 'default', scope: 'NAMESPACE', action: 'ALLOW',
    rules: [{ clauses: [{ matches: [{ principals: [{ exact: principal.slice('spiffe://'.length) }] }] }] }] });
  const denyPrincipal = (principal: string): Json => ({ '@type': TYPE_URL.authorization, name: 'deny-one', namespace: 'default', scope: 'NAMESPACE', action: 'DENY',
    rules: [{ clauses: [{ matches: [{ principals: [{ exact: principal.slice('spiffe://'.length) }] }] }] }] });
  const allowNamespace = (ns: string): Json => ({ '@type': TYPE_URL.authorization, name: 'allow-one', namespace: 'default', scope: 'NAMESPACE', action: 'ALLOW',
    rules: [{ clauses: [{ matches: [{ namespaces: [{ exact: ns }] }] }] }] });
  /** A new service `name` at `vip`:`port` → the server workload's 8080 (the service, then the workload naming it). */
  const publishService = (name: string, vip: string, port: number): void => {
    const host = `${name}.default.svc.cluster.local`;
    const ports = [{ service_port: port, target_port: 8080 }];
    publish([...cluster.wds, { '@type': TYPE_URL.address, service: { name, namespace: 'default', hostname: host, addresses: [{ address: ip4(vip) }], ports } }]);
    publish(cluster.wds.map((r) => {
      const w = r.workload as Json | undefined;
      return w?.name === 'server' ? { ...r, workload: { ...w, services: { ...(w.services as Json), [`default/${host}`]: { ports } } } } : r;
    }));
  };
  /** Replaces the policy named `name` (or adds it). */
  const withPolicy = (name: string, policy: Json | undefined): Json[] => [...cluster.wds.filter((r) => r.name !== name), ...(policy ? [policy] : [])];
  const publish = (resources: Json[]): void => cluster.publish(resources);
  const inNode = (i: number, ...args: string[]): Promise<string> => cluster.inNode(i, ...args);

  before(async () => {
    cluster = new ZtunnelCluster(2, 4, 'apart');
    topo = cluster.topo;
    dir = cluster.dir;
    logs = cluster.logs;
    const pods: PodDef[] = [
      { node: 1, short: 'hc', host: 2, info: { name: 'client', namespace: 'default', serviceAccount: 'sleep' } },
      { node: 2, short: 'hs', host: 2, info: { name: 'server', namespace: 'default', serviceAccount: 'httpbin' } },
      { node: 2, short: 'hx', host: 5, info: { name: 'proxied', namespace: 'default', serviceAccount: 'proxied' } },
      { node: 1, short: 'ho', host: 3, info: { name: 'outsider', namespace: 'other', serviceAccount: 'sleep' } },
    ];
    cluster.addPods([...pods, { node: 2, short: 'hp', host: 3 }]);
    client = cluster.pod('hc');
    server = cluster.pod('hs');
    pyServer = cluster.pod('hp');
    proxied = cluster.pod('hx');
    outsider = cluster.pod('ho');
    await execFileAsync('ip', ['-n', pyServer.netns, 'addr', 'add', `${IMPOSTOR_IP()}/24`, 'dev', 'eth0']);
    publish([
      workload('client', client.ip, 'node1'),
      workload('server', server.ip, 'node2', { services: { 'default/echo.default.svc.cluster.local': { ports: [{ service_port: 80, target_port: 8080 }] } } }),
      { '@type': TYPE_URL.address, service: { name: 'echo', namespace: 'default', hostname: 'echo.default.svc.cluster.local', addresses: [{ address: ip4('10.96.0.10') }], ports: [{ service_port: 80, target_port: 8080 }] } },
      workload('pyhbone', pyServer.ip, 'node2', { service_account: 'pyhbone' }),
      workload('impostor', IMPOSTOR_IP(), 'node2', { service_account: 'impostor' }),
      workload('proxied', proxied.ip, 'node2', { service_account: 'proxied', application_tunnel: { protocol: 'PROXY', port: 8090 } }),
      workload('outsider', outsider.ip, 'node1', { uid: 'Kubernetes//Pod/other/outsider', namespace: 'other', service_account: 'sleep' }),
      allow(SLEEP),
    ]);
    topo.spawnIn(server.netns, 'python3', ['-c', ECHO_SERVER, '8080']);
    topo.spawnIn(proxied.netns, 'python3', ['-c', PROXY_V2_ECHO_SERVER, '8090']);
    // Idle HBONE connections go after 1 s, so a test can know the next tunnel needs a new TLS handshake.
    await cluster.start(pods, { POOL_UNUSED_RELEASE_TIMEOUT: '1s' });
    // The python HBONE server (no ztunnel in front) holds the certificate of the pyhbone workload.
    const py = await issueFiles('spiffe://cluster.local/ns/default/sa/pyhbone', 'pyhbone');
    topo.spawnIn(pyServer.netns, '/usr/bin/python3', ['-c', PYTHON_HBONE_SERVER, py.cert, py.key, join(dir, 'root-cert.pem')]);
  });
  after(async () => {
    await cluster?.destroy();
  });

  const send = (host: string, port: number, bytes: number): Promise<string> => cluster.send(client, host, port, bytes);

  test('client → VIP → HBONE → server: bytes intact, original source, only TLS to 15008 on the wire', async () => {
    const pcap = join(dir, 'wire.pcap');
    const dump = topo.spawnIn(topo.nodes[1].netns, 'tcpdump', ['-i', 'under0', '-U', '-w', pcap, 'tcp and net 10.77.0.0/16']);
    await new Promise((r) => setTimeout(r, 500));
    const marker = 'SKUA-PLAINTEXT-MARKER-'.repeat(4);
    const out = (await execFileAsync('ip', ['netns', 'exec', client.netns, 'python3', '-c',
      `import socket;c=socket.create_connection(("10.96.0.10",80),5);c.sendall(b"${marker}");c.shutdown(socket.SHUT_WR);d=b""\nwhile True:\n  x=c.recv(65536)\n  if not x: break\n  d+=x\nprint(d.decode())`])).stdout;
    assert.equal(out.trim(), `peer=${client.ip}\n${marker}`);
    assert.equal(await send('10.96.0.10', 80, 4 << 20), `peer=${client.ip} 4194304 True`);
    await new Promise((r) => setTimeout(r, 300));
    await topo.stop(dump, 'SIGINT');
    const ports = (await execFileAsync('tcpdump', ['-nn', '-r', pcap])).stdout.split('\n').filter(Boolean)
      .map((l) => /IP [\d.]+\.(\d+) > [\d.]+\.(\d+):/.exec(l)).filter((m): m is RegExpExecArray => m !== null).map((m) => Math.min(Number(m[1]), Number(m[2])));
    assert.ok(ports.length > 50, `captured ${ports.length} packets`);
    assert.deepEqual([...new Set(ports)], [15008], 'between the pods of the two nodes only 15008');
    assert.ok(!readFileSync(pcap).includes(Buffer.from('SKUA-PLAINTEXT-MARKER')), 'no plaintext on the wire');
  });

  test('access logs carry both identities; the dump lists the certificates', async () => {
    await waitFor(() => logs[0].some((l) => l.includes('direction="outbound"')) && logs[1].some((l) => l.includes('direction="inbound"')), 'the access logs');
    const out = logs[0].find((l) => l.includes('direction="outbound"') && l.includes('bytes_sent=4194304'))!;
    assert.match(out, new RegExp(`src\\.identity="${SLEEP}" dst\\.addr=${server.ip}:15008 dst\\.hbone_addr=${server.ip}:8080 dst\\.service="echo\\.default\\.svc\\.cluster\\.local" dst\\.workload="server" dst\\.namespace="default" dst\\.identity="${HTTPBIN}" direction="outbound" bytes_sent=4194304`));
    assert.ok(logs[1].some((l) => new RegExp(`src\\.identity="${SLEEP}".*dst\\.identity="${HTTPBIN}" direction="inbound" bytes_sent=\\d+ bytes_recv=4194304`).test(l)));
    const dump = JSON.parse(await inNode(0, 'curl', '-s', 'http://127.0.0.1:15000/config_dump')) as { certificates: Array<{ identity: string; state: string; certChain: unknown[] }> };
    // Node 1's two local workloads: default/sleep and other/sleep, each fetched ahead of its first connection.
    assert.deepEqual(dump.certificates.map((c) => [c.identity, c.state, c.certChain.length]),
      [[SLEEP, 'Available', 2], ['spiffe://cluster.local/ns/other/sa/sleep', 'Available', 2]]);
  });

  /** A certificate for `identity` from the cluster's CA, as PEM files for the python peers. */
  async function issueFiles(identity: string, name: string): Promise<{ cert: string; key: string }> {
    const keys = await newKeyPair();
    const chain = await cluster.ca!.issue(await makeCsr(keys, identity), identity, 3600);
    const files = { cert: join(dir, `${name}-cert.pem`), key: join(dir, `${name}-key.pem`) };
    writeFileSync(files.cert, chain.slice(0, -1).join(''));
    writeFileSync(files.key, await privateKeyPem(keys.privateKey));
    return files;
  }
  const pythonConnect = async (files: { cert: string; key: string }, authority: string, bytes: number): Promise<string> =>
    (await execFileAsync('ip', ['netns', 'exec', topo.core, '/usr/bin/python3', '-c', PYTHON_HBONE_CLIENT, server.ip, '15008', authority,
      files.cert, files.key, join(dir, 'root-cert.pem'), String(bytes)])).stdout.trim();

  test('an independent HBONE client (python3-h2) gets through the server ztunnel', async () => {
    const files = await issueFiles(SLEEP, 'py');
    assert.equal(await pythonConnect(files, `${server.ip}:8080`, 1 << 20), `200 peer=${topo.coreIp} 1048576 True`);
  });

  test("the server ztunnel answers CONNECT like ztunnel: 400 bad authority, 401 denied, 503 nothing listening", async () => {
    const allowed = await issueFiles(SLEEP, 'py');
    const other = await issueFiles('spiffe://cluster.local/ns/default/sa/other', 'py-other');
    assert.match(await pythonConnect(allowed, 'not-an-address', 10), /^400 /);
    assert.match(await pythonConnect(other, `${server.ip}:8080`, 10), /^401 /);
    assert.match(await pythonConnect(allowed, `${server.ip}:8079`, 10), /^503 /);
    assert.match(await pythonConnect(allowed, `${server.ip}:8080`, 10), /^200 peer=/);
  });

  test('the client ztunnel as seen by an independent HBONE server: TLS 1.3, h2, no SNI, its SPIFFE id, CONNECT ip:port, baggage/forwarded/traceparent', async () => {
    const { stdout } = await execFileAsync('ip', ['netns', 'exec', client.netns, 'python3', '-c', SEND_CLIENT, pyServer.ip, '8080', '65536']);
    const words = stdout.trim().split(' ');
    const [count, intact] = words.splice(-2);
    const head = words.join(' ');
    assert.deepEqual([count, intact], ['65536', 'True'], stdout);
    const seen = JSON.parse(head.slice('seen='.length)) as { tls: string; alpn: string; sni: string | null; sans: string[]; headers: Record<string, string> };
    assert.deepEqual([seen.tls, seen.alpn, seen.sni, seen.sans], ['TLSv1.3', 'h2', null, [SLEEP]]);
    const { baggage, forwarded, traceparent, ...rest } = seen.headers;
    assert.deepEqual(rest, { ':method': 'CONNECT', ':authority': `${pyServer.ip}:8080` });
    assert.match(forwarded, new RegExp(`^for="${client.ip.replace(/\./g, '\\.')}:\\d+"$`));
    assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    assert.equal(baggage, 'k8s.cluster.name=Kubernetes,k8s.namespace.name=default,k8s.deployment.name=client,service.name=client,service.version=v1');
  });

  test('an HBONE peer presenting another identity than the destination\'s is refused by the client ztunnel', async () => {
    const { stdout } = await execFileAsync('ip', ['netns', 'exec', client.netns, 'python3', '-c', SEND_CLIENT, IMPOSTOR_IP(), '8080', '10']);
    assert.equal(stdout.trim(), '0 False', 'the app gets nothing through');
    await waitFor(() => logs[0].some((l) => l.includes(`dst.addr=${IMPOSTOR_IP()}:15008`) && /error=".*is not spiffe:\/\/cluster\.local\/ns\/default\/sa\/impostor"/.test(l)),
      'the identity error in the access log');
  });

  test("a workload whose application tunnel asks for PROXY gets a v2 header with the client's address and SPIFFE id (TLV 0xD0)", async () => {
    const out = await send(proxied.ip, 8080, 100_000);
    assert.match(out, new RegExp(`^proxy=${client.ip.replace(/\./g, '\\.')}:\\d+ ${proxied.ip.replace(/\./g, '\\.')}:8080 tlvs=d0:${SLEEP} 100000 True$`));
  });

  test('a policy change denies the open tunnel within a second; new ones get 401', async () => {
    const { conn } = await cluster.openFrom(client, '10.96.0.10', 80);
    const pushed = performance.now();
    publish([...cluster.wds.filter((r) => r.name !== 'allow-one'), allow('spiffe://cluster.local/ns/default/sa/other')]);
    try {
      await once(conn, 'end');
      conn.destroy();
      assert.ok(performance.now() - pushed < 1300, `closed after ${Math.round(performance.now() - pushed)} ms`);
      assert.equal(await send('10.96.0.10', 80, 10), '0 False');
      await waitFor(() => logs[0].some((l) => /direction="outbound".*error="http status: 401 Unauthorized"/.test(l))
        && logs[1].some((l) => /direction="inbound".*error="connection closed due to policy rejection: allow policies exist, but none allowed"/.test(l)), 'the 401 in the logs');
      assert.ok(logs[1].some((l) => /direction="inbound".*error="connection closed due to policy change"/.test(l)));
    } finally {
      publish([...cluster.wds.filter((r) => r.name !== 'allow-one'), allow(SLEEP)]);
    }
  });

  /** Sends until `from` gets `want` through the VIP (a policy push is on its way), for up to 5 s. */
  async function until(from: ClusterPod, want: (out: string) => boolean, what: string): Promise<void> {
    let out = '';
    for (let k = 0; k < 50; k++) {
      out = await cluster.send(from, '10.96.0.10', 80, 10).catch((e: Error) => e.message);
      if (want(out)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`${what}: last answer ${JSON.stringify(out)}`);
  }
  const through = (from: ClusterPod) => (out: string): boolean => out === `peer=${from.ip} 10 True`;
  const refused = (out: string): boolean => out === '0 False';

  test('a DENY by principal pushed live closes the open tunnel within a second and refuses new ones (401)', async (t) => {
    await until(client, through(client), 'the allow policy restored');
    const { conn, data } = await cluster.openFrom(client, '10.96.0.10', 80);
    conn.write('before the deny\n');
    await waitFor(() => Buffer.concat(data).toString().endsWith('before the deny\n'), 'the echo');
    const pushed = performance.now();
    publish(withPolicy('deny-one', denyPrincipal(SLEEP)));
    try {
      await once(conn, 'end');
      const ms = performance.now() - pushed;
      conn.destroy();
      assert.ok(ms < 1000, `closed ${Math.round(ms)} ms after the push (file watch + WDS included)`);
      t.diagnostic(`the open tunnel closed ${Math.round(ms)} ms after the DENY was written`);
      assert.equal(await send('10.96.0.10', 80, 10), '0 False');
      await waitFor(() => logs[1].some((l) => /direction="inbound".*error="connection closed due to policy change"/.test(l))
        && logs[1].some((l) => /direction="inbound".*error="connection closed due to policy rejection: explicitly denied by: default\/deny-one"/.test(l))
        && logs[0].some((l) => /direction="outbound".*error="http status: 401 Unauthorized"/.test(l)), 'the close and the 401 in the logs');
    } finally {
      publish(withPolicy('deny-one', undefined));
    }
    await until(client, through(client), 'the deny removed');
  });

  test('ALLOW by namespace: a client of the allowed namespace gets through, one of another namespace (same service account name) is refused', async () => {
    const outsiderRefusals = (): number => logs[1].filter((l) => l.includes('src.identity="spiffe://cluster.local/ns/other/sa/sleep"')
      && l.includes('error="connection closed due to policy rejection: allow policies exist, but none allowed"')).length;
    try {
      // Each phase waits for the side the previous policy decided the other way: then the push has landed.
      publish(withPolicy('allow-one', allowNamespace('other')));
      await until(outsider, through(outsider), 'other/sleep admitted under allow namespaces=[other]');
      await until(client, refused, 'default/sleep refused under allow namespaces=[other]');
      const before = outsiderRefusals();
      publish(withPolicy('allow-one', allowNamespace('default')));
      await until(client, through(client), 'default/sleep admitted under allow namespaces=[default]');
      await until(outsider, refused, 'other/sleep refused under allow namespaces=[default]');
      assert.equal(await cluster.send(client, '10.96.0.10', 80, 1 << 20), `peer=${client.ip} 1048576 True`);
      await waitFor(() => outsiderRefusals() > before, "the outsider's refusal in the server ztunnel's log");
    } finally {
      publish(withPolicy('allow-one', allow(SLEEP)));
    }
    await until(client, through(client), 'the principal allow restored');
  });

  test('control plane restarted: a tunnel held open keeps moving bytes both ways; cached state serves new tunnels; new config arrives after the reconnect', async () => {
    await until(client, through(client), 'the allow policy');
    const { conn, data } = await cluster.openFrom(client, '10.96.0.10', 80);
    const greeting = Buffer.concat(data).length;
    const sent: Buffer[] = [];
    /** Writes `n` patterned bytes and waits for all of them to come back. */
    const exchange = async (n: number, what: string): Promise<void> => {
      const chunk = Buffer.alloc(n, sent.length + 1);
      sent.push(chunk);
      conn.write(chunk);
      const total = greeting + Buffer.concat(sent).length;
      await waitFor(() => Buffer.concat(data).length >= total, `the echo ${what}`, 10_000);
    };
    await exchange(65_536, 'before the restart');
    assert.deepEqual(await cluster.stopControlPlane(), [0, 0], 'WDS and the CA both stopped');
    await exchange(65_536, 'while the control plane is down');
    assert.equal(await send('10.96.0.10', 80, 100_000), `peer=${client.ip} 100000 True`, 'a new tunnel from cached state and certificates');
    publishService('echo2', '10.96.0.11', 81);
    cluster.startControlPlane();
    let out = '';
    for (let k = 0; k < 100 && !out.endsWith('10 True'); k++) {
      out = await send('10.96.0.11', 81, 10).catch(() => '');
      if (!out.endsWith('10 True')) await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(out, `peer=${client.ip} 10 True`, 'the new service arrived after the reconnect');
    await exchange(65_536, 'after the reconnect');
    const port = conn.localPort;
    conn.end();
    await once(conn, 'end');
    conn.destroy();
    const up = Buffer.concat(sent);
    const down = Buffer.concat(data);
    assert.equal(up.length, 196_608);
    assert.equal(down.length, greeting + up.length, 'every byte came back');
    assert.ok(down.subarray(greeting).equals(up), 'intact, in order');
    await waitFor(() => logs[0].some((l) => l.includes(`src.addr=${client.ip}:${port} `)) && logs[1].some((l) => l.includes(`bytes_recv=${up.length} `)), 'both access log lines');
    const outLine = logs[0].find((l) => l.includes(`src.addr=${client.ip}:${port} `))!;
    assert.match(outLine, new RegExp(`direction="outbound" bytes_sent=${up.length} bytes_recv=${down.length} duration="\\d+ms"$`), 'the client ztunnel counted both ways');
    assert.ok(logs[1].some((l) => new RegExp(`direction="inbound" bytes_sent=${down.length} bytes_recv=${up.length} duration="\\d+ms"$`).test(l)), 'the server ztunnel counted both ways');
  });

  test('CA down alone (WDS up): cached certificates serve new TLS connections both ways; WDS still delivers', async () => {
    assert.equal(await cluster.stopCa(), 0);
    try {
      // Idle pooled connections are released after 1 s: wait until the client pod holds none, so the
      // next tunnels need new TLS handshakes with the cached certificates.
      let held = '';
      for (let k = 0; k < 50; k++) {
        held = (await execFileAsync('ip', ['netns', 'exec', client.netns, 'ss', '-Htn', 'state', 'established', '( dport = :15008 )'])).stdout.trim();
        if (held === '') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(held, '', 'no pooled HBONE connection left in the client pod');
      assert.equal(await send('10.96.0.10', 80, 100_000), `peer=${client.ip} 100000 True`, 'client ztunnel → server ztunnel');
      assert.match(await send(proxied.ip, 8080, 10_000), / 10000 True$/, 'to another identity');
      const files = await issueFiles(SLEEP, 'py-ca-down');
      assert.equal(await pythonConnect(files, `${server.ip}:8080`, 10_000), `200 peer=${topo.coreIp} 10000 True`, 'a new client into the server ztunnel');
      publishService('echo3', '10.96.0.12', 82);
      let out = '';
      for (let k = 0; k < 50 && !out.endsWith('10 True'); k++) {
        out = await send('10.96.0.12', 82, 10).catch(() => '');
        if (!out.endsWith('10 True')) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(out, `peer=${client.ip} 10 True`, 'WDS delivered a new service while the CA is down');
      const dump = JSON.parse(await inNode(0, 'curl', '-s', 'http://127.0.0.1:15000/config_dump')) as { certificates: Array<{ identity: string; state: string }> };
      assert.deepEqual(dump.certificates.find((c) => c.identity === SLEEP)?.state, 'Available');
    } finally {
      cluster.startCa();
    }
  });
});
