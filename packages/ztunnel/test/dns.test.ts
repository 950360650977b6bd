// The per-pod DNS proxy in a real pod namespace with the in-pod rules (needs root): dig inside the
// pod, at any server address, is redirected to ztunnel's 15053 (UDP and TCP); mesh hostnames come
// from WDS with the pod namespace's short names, headless services answer with endpoint IPs,
// NAMESPACE-visible services are hidden from other namespaces, other names are forwarded to the
// node's resolver (dnsmasq here), and a new service is answered as soon as it arrives.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { promisify } from 'node:util';
import { Forwarder, netnsAvailable } from '../src/core.ts';
import { createNode, createPod, deleteNode, deletePod, type NodeNetwork } from '../src/cni/pods.ts';
import { startPodDns, type PodDns } from '../src/dns/pod-dns.ts';
import { ProxyState } from '../src/state/store.ts';
import { loadLocalConfig } from '../src/state/updater.ts';

const execFileAsync = promisify(execFile);
const skip = process.getuid?.() !== 0 || !netnsAvailable ? 'needs root and the netns addon' : false;
const TAG = `${process.pid % 10000}`;
const NODE: NodeNetwork = { netns: `skdn${TAG}`, bridge: 'skdbr0', gateway: '10.77.8.1', prefixLength: 24 };
const POD = { name: `skdp${TAG}`, ip: '10.77.8.2' };
const UPSTREAM_PORT = 20000 + (process.pid % 10000);

const MESH = `
workloads:
- {uid: h1, name: db-0, namespace: default, workloadIps: [10.77.8.20], services: {"default/db.default.svc.cluster.local": {5432: 5432}}}
- {uid: h2, name: db-1, namespace: default, workloadIps: [10.77.8.21], services: {"default/db.default.svc.cluster.local": {5432: 5432}}}
services:
- {name: reviews, namespace: default, hostname: reviews.default.svc.cluster.local, vips: [/10.96.0.3], ports: {9080: 9080}}
- {name: ratings, namespace: other, hostname: ratings.other.svc.cluster.local, vips: [/10.96.0.4], ports: {9080: 9080}}
- {name: secret, namespace: other, hostname: secret.other.svc.cluster.local, vips: [/10.96.0.5], ports: {80: 80}, visibility: Namespace}
- {name: db, namespace: default, hostname: db.default.svc.cluster.local, vips: [], ports: {5432: 5432}}
- {name: api, namespace: default, hostname: api.example.com, vips: [/240.240.0.1], ports: {443: 443}}
`;

describe('per-pod DNS proxy', { skip }, () => {
  const state = new ProxyState();
  let dns: PodDns, dnsmasq: ChildProcess | undefined, fd = -1;

  before(async () => {
    createNode(NODE);
    createPod(NODE, POD);
    loadLocalConfig(state, MESH);
    dnsmasq = spawn('dnsmasq', ['--keep-in-foreground', '--no-resolv', '--no-hosts', '--listen-address=127.0.0.1', '--bind-interfaces',
      `--port=${UPSTREAM_PORT}`, '--address=/example.org/192.0.2.7', '--pid-file=', '--user=root'], { stdio: 'ignore' });
    fd = openSync(`/var/run/netns/${POD.name}`, 'r');
    dns = await startPodDns({
      netnsFd: fd, namespace: 'default', state, network: '', clusterDomain: 'cluster.local', port: 15053,
      forwarder: new Forwarder({ servers: [{ host: '127.0.0.1', port: UPSTREAM_PORT }], cacheEntries: 0 }),
    });
  });
  after(async () => {
    await dns?.close();
    if (fd >= 0) closeSync(fd);
    dnsmasq?.kill();
    deletePod(POD.name);
    deleteNode(NODE);
  });

  async function dig(name: string, ...opts: string[]): Promise<string> {
    // The server address does not matter: the pod's rules send every DNS query to 15053.
    const { stdout } = await execFileAsync('ip', ['netns', 'exec', POD.name, 'dig', '@10.77.8.1', '+time=2', '+tries=1', ...opts, name]);
    return stdout;
  }
  const answer = async (name: string, ...opts: string[]): Promise<string> => (await dig(name, '+short', ...opts)).trim().split('\n').sort().join(',');

  test('mesh names, with the short names of the pod namespace', async () => {
    assert.equal(await answer('reviews.default.svc.cluster.local'), '10.96.0.3');
    assert.equal(await answer('reviews.default'), '10.96.0.3');
    assert.equal(await answer('reviews'), '10.96.0.3');
    assert.equal(await answer('ratings.other'), '10.96.0.4');
    assert.equal(await answer('api.example.com'), '240.240.0.1');
    assert.match(await dig('ratings'), /status: (NXDOMAIN|REFUSED|SERVFAIL)/);
  });

  test('headless services answer with the endpoints; NAMESPACE-visible ones are hidden elsewhere', async () => {
    assert.equal(await answer('db.default.svc.cluster.local'), '10.77.8.20,10.77.8.21');
    assert.doesNotMatch(await dig('secret.other.svc.cluster.local'), /10\.96\.0\.5/);
  });

  test('other names go to the node resolver; TCP is captured too', async () => {
    assert.equal(await answer('www.example.org'), '192.0.2.7');
    assert.equal(await answer('reviews.default.svc.cluster.local', '+tcp'), '10.96.0.3');
    assert.ok(dns.proxy.counters.forwarded >= 1);
    assert.ok(dns.proxy.counters.answeredLocally >= 6);
  });

  test('a new service is answered once it arrives', async () => {
    loadLocalConfig(state, `${MESH}- {name: fresh, namespace: default, hostname: fresh.default.svc.cluster.local, vips: [/10.96.0.9], ports: {80: 80}}\n`);
    assert.equal(await answer('fresh'), '10.96.0.9');
  });
});
