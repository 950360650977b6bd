// skua-ztunnel end to end on one node in network namespaces (needs root), with the real
// skua-controlplane serving WDS and the CNI stand-in speaking ZDS: an app's connection to a service
// VIP leaves its pod through ztunnel (plain TCP to a TCP workload), enters the server pod through
// ztunnel's plaintext inbound and reaches the app from the client's own address, all bytes intact
// both ways; a destination unknown to the mesh passes through; DNS answers the service; metrics,
// access log and the connections dump show it; a STRICT policy pushed live closes the open
// connection within a second and refuses new plaintext ones; SIGTERM with a connection open: it
// keeps working through the drain, new ones are refused, it is closed at the termination deadline
// and the process exits 0.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { netnsAvailable, TYPE_URL } from '../src/core.ts';
import { ECHO_SERVER } from './lib/topology.ts';
import { ip4, ZtunnelCluster, type ClusterPod, type PodDef } from './lib/cluster.ts';
import { waitFor } from './lib/wait.ts';

const execFileAsync = promisify(execFile);
const skip = process.getuid?.() !== 0 || !netnsAvailable ? 'needs root and the netns addon' : false;
type Json = Record<string, unknown>;

describe('skua-ztunnel end to end (one node, TCP workloads)', { skip, timeout: 120_000 }, () => {
  let cluster: ZtunnelCluster, client: ClusterPod, server: ClusterPod, logs: string[];

  const workload = (name: string, ip: string, extra: Json = {}): Json => ({
    '@type': TYPE_URL.address,
    workload: { uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', service_account: name, addresses: [ip4(ip)], node: 'node1',
      workload_name: name, canonical_name: name, canonical_revision: 'v1', ...extra },
  });
  const STRICT = { '@type': TYPE_URL.authorization, name: 'istio_converted_static_strict', namespace: 'istio-system', scope: 'GLOBAL', action: 'DENY',
    rules: [{ clauses: [{ matches: [{ not_principals: [{ presence: {} }] }] }] }] };
  const publish = (resources: Json[]): void => cluster.publish(resources);
  const inNode = (...args: string[]): Promise<string> => cluster.inNode(0, ...args);
  const send = (host: string, port: number, bytes: number): Promise<string> => cluster.send(client, host, port, bytes);

  before(async () => {
    cluster = new ZtunnelCluster(1, 3, 'none');
    const pods: PodDef[] = [
      { node: 1, short: 'cl', host: 2, info: { name: 'client', namespace: 'default', serviceAccount: 'client' } },
      { node: 1, short: 'sv', host: 3, info: { name: 'server', namespace: 'default', serviceAccount: 'server' } },
    ];
    cluster.addPods(pods);
    client = cluster.pod('cl');
    server = cluster.pod('sv');
    publish([
      workload('client', client.ip),
      workload('server', server.ip, { services: { 'default/echo.default.svc.cluster.local': { ports: [{ service_port: 80, target_port: 8080 }] } } }),
      { '@type': TYPE_URL.address, service: { name: 'echo', namespace: 'default', hostname: 'echo.default.svc.cluster.local', addresses: [{ address: ip4('10.96.0.10') }], ports: [{ service_port: 80, target_port: 8080 }] } },
    ]);
    cluster.topo.spawnIn(cluster.topo.core, 'python3', ['-c', ECHO_SERVER, '9999']);
    cluster.topo.spawnIn(server.netns, 'python3', ['-c', ECHO_SERVER, '8080']);
    await cluster.start(pods, { CLUSTER_ID: 'Kubernetes' });
    logs = cluster.logs[0];
  });
  after(async () => {
    await cluster?.destroy();
  });

  test('ready once WDS and the ZDS snapshot arrived', async () => {
    assert.equal(await inNode('curl', '-s', 'http://127.0.0.1:15021/healthz/ready'), 'ready\n');
  });

  test('client → service VIP → server app, from the client address, 1 MiB each way intact', async () => {
    assert.equal(await send('10.96.0.10', 80, 1 << 20), `peer=${client.ip} 1048576 True`);
    await waitFor(() => logs.filter((l) => l.includes('connection complete')).length >= 2, 'both access log lines');
    const out = logs.find((l) => l.includes('direction="outbound"'))!;
    const inb = logs.find((l) => l.includes('direction="inbound"'))!;
    assert.match(out, new RegExp(`\\tinfo\\taccess\\tconnection complete\\tsrc\\.addr=${client.ip}:\\d+ src\\.workload="client" src\\.namespace="default" dst\\.addr=${server.ip}:8080 dst\\.service="echo\\.default\\.svc\\.cluster\\.local" dst\\.workload="server" dst\\.namespace="default" direction="outbound" bytes_sent=1048576 bytes_recv=${1048576 + `peer=${client.ip}\n`.length} duration="\\d+ms"$`));
    assert.match(inb, /direction="inbound" bytes_sent=\d+ bytes_recv=1048576/);
  });

  test('a destination unknown to the mesh passes through as plain TCP', async () => {
    assert.equal(await send(cluster.topo.coreIp, 9999, 65536), `peer=${client.ip} 65536 True`);
  });

  test('DNS in the pod answers the service from WDS', async () => {
    const { stdout } = await execFileAsync('ip', ['netns', 'exec', client.netns, 'dig', '+short', '+time=2', '+tries=1', '@1.1.1.1', 'echo.default.svc.cluster.local']);
    assert.equal(stdout.trim(), '10.96.0.10');
  });

  test('metrics and the connections dump', async () => {
    const metrics = await inNode('curl', '-s', 'http://127.0.0.1:15020/stats/prometheus');
    assert.match(metrics, /istio_tcp_connections_opened_total\{reporter="source",source_workload="client",[^}]*destination_service="echo\.default\.svc\.cluster\.local"[^}]*destination_workload="server"[^}]*\} 1/);
    assert.match(metrics, /istio_tcp_received_bytes_total\{reporter="destination",[^}]*\} 1048576/);
    const dump = JSON.parse(await inNode('curl', '-s', 'http://127.0.0.1:15000/config_dump')) as { workloadState: Record<string, Json>; workloads: Json };
    assert.deepEqual(Object.keys(dump.workloadState).sort(), ['uid-client', 'uid-server']);
    assert.equal((dump.workloadState['uid-client'].info as Json).name, 'client');
    assert.ok(`/${client.ip}` in dump.workloads);
  });

  test("a deleted workload's connections close", async () => {
    const { conn } = await cluster.openFrom(client, '10.96.0.10', 80);
    const before = cluster.wds;
    publish(cluster.wds.filter((r) => (r.workload as Json | undefined)?.name !== 'server'));
    await once(conn, 'end');
    conn.destroy();
    await waitFor(() => logs.some((l) => l.includes('connection closed due to workload removal')), 'the access log of the closed connection');
    publish(before);
    for (let i = 0; i < 50 && !(await send('10.96.0.10', 80, 4)).startsWith('peer='); i++) await new Promise((r) => setTimeout(r, 100));
  });

  test('STRICT pushed live: the open plaintext connection closes within a second, new ones are refused', async () => {
    const { conn, data } = await cluster.openFrom(client, '10.96.0.10', 80);
    conn.write('ping\n');
    await waitFor(() => Buffer.concat(data).toString().endsWith('ping\n'), 'the echo');
    const pushed = performance.now();
    publish([...cluster.wds, STRICT]);
    // The server side drops the connection; the client's ztunnel passes the end on (a FIN).
    await once(conn, 'end');
    conn.destroy();
    const ms = performance.now() - pushed;
    assert.ok(ms < 1000 + 300, `closed ${Math.round(ms)} ms after the push (file watch + WDS included)`);
    await waitFor(() => logs.some((l) => l.includes('connection closed due to policy change')), 'the access log of the closed connection');
    // The client's ztunnel accepts, the server's refuses: the app sees the connection end with nothing.
    assert.equal(await send('10.96.0.10', 80, 10), '0 False');
    await waitFor(() => logs.some((l) => /direction="inbound".*error="connection closed due to policy rejection: explicitly denied by: istio-system\/istio_converted_static_strict"/.test(l)), 'the refusal in the log');
  });

  test('SIGTERM with a connection open: it keeps working, is closed at CONNECTION_TERMINATION_DEADLINE (2 s), new ones are refused, exit 0', async (t) => {
    publish(cluster.wds.filter((r) => r.name !== STRICT.name));
    for (let i = 0; i < 50 && !(await send('10.96.0.10', 80, 4)).startsWith('peer='); i++) await new Promise((r) => setTimeout(r, 100));
    const { conn, data } = await cluster.openFrom(client, '10.96.0.10', 80);
    const port = conn.localPort;
    const ztunnel = cluster.ztunnels[0];
    const exited = once(ztunnel, 'exit') as Promise<[number | null]>;
    // The app's socket is half-open capable: ztunnel closing its side shows as 'end'.
    const closed = once(conn, 'end');
    const t0 = performance.now();
    process.kill(-(ztunnel.pid as number), 'SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    conn.write('still here\n');
    await waitFor(() => Buffer.concat(data).toString().endsWith('still here\n'), 'the echo during the drain', 1000);
    // The pod's capture still sends it to 15001, where nothing listens any more.
    const late = await send('10.96.0.10', 80, 10).catch((e: Error) => e.message);
    assert.match(late, /ConnectionRefusedError/, 'a new connection during the drain is refused');
    await closed;
    conn.destroy();
    const closedMs = performance.now() - t0;
    const [code] = await exited;
    const exitMs = performance.now() - t0;
    assert.equal(code, 0);
    assert.ok(closedMs > 1800 && closedMs < 3000, `the open connection was closed ${Math.round(closedMs)} ms after SIGTERM (deadline 2 s)`);
    assert.ok(exitMs < 4000, `exited ${Math.round(exitMs)} ms after SIGTERM`);
    t.diagnostic(`closed ${Math.round(closedMs)} ms, exited ${Math.round(exitMs)} ms after SIGTERM`);
    await waitFor(() => logs.some((l) => l.includes(`src.addr=${client.ip}:${port} `)), 'the drained connection in the access log');
    assert.match(logs.find((l) => l.includes(`src.addr=${client.ip}:${port} `))!, /direction="outbound".*error="connection closed due to connection drain"/);
  });
});
