// `skua-proxy proxy sidecar` as the istio-proxy container runs it: env and flags in, the
// bootstrap rendered to ./etc/istio/proxy/envoy-rev.json, Delta ADS straight to a real gRPC
// server (plaintext like istiod:15010, TLS like istiod:15012 with an openssl-made root), and
// the node, Bearer token and ClusterID checked on the server side.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cleanup, freePort, proxyMain, runProxyCli, type Json } from './lib/proxy.ts';
import { startHttpBackend, type Backend, type EchoReply } from './lib/backends.ts';
import { startTestAds, type TestAds } from './lib/ads-server.ts';
import { TYPE_URL } from '../packages/proxy/src/api/xds.ts';

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';

function appCluster(port: number): Json {
  return {
    '@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', name: 'app', type: 'STATIC', connect_timeout: '1s',
    load_assignment: { cluster_name: 'app', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
  };
}

function appListener(port: number): Json {
  return {
    '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener', name: 'app_inbound',
    address: { socket_address: { address: '127.0.0.1', port_value: port } },
    filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: {
      '@type': HCM, stat_prefix: 'app',
      route_config: { name: 'app', virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'app' } }] }] },
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }],
    } }] }],
  };
}

/** An istiod-like chain made with openssl: a root CA and a server certificate for istiod's SAN. */
function makeIstiodCerts(dir: string, san: string): { root: string; cert: string; key: string } {
  const f = (n: string): string => path.join(dir, n);
  const run = (args: string[]): void => { execFileSync('openssl', args, { stdio: 'ignore', timeout: 15_000 }); };
  run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/O=cluster.local/CN=Test Root CA',
    '-keyout', f('root-key.pem'), '-out', f('root-cert.pem')]);
  run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/O=istiod', '-keyout', f('istiod-key.pem'), '-out', f('istiod.csr')]);
  writeFileSync(f('ext.cnf'), `subjectAltName=DNS:${san},DNS:istiod.istio-system.svc.cluster.local\nextendedKeyUsage=serverAuth\n`);
  run(['x509', '-req', '-in', f('istiod.csr'), '-CA', f('root-cert.pem'), '-CAkey', f('root-key.pem'), '-CAcreateserial', '-days', '2',
    '-extfile', f('ext.cnf'), '-out', f('istiod-cert.pem')]);
  return { root: readFileSync(f('root-cert.pem'), 'utf8'), cert: readFileSync(f('istiod-cert.pem'), 'utf8'), key: readFileSync(f('istiod-key.pem'), 'utf8') };
}

interface Agent {
  readonly child: ChildProcess;
  readonly dir: string;
  readonly ports: { admin: number; status: number; envoyStatus: number; envoyPrometheus: number };
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `skua-proxy proxy sidecar` in a fresh pod-like working directory. */
async function startAgent(env: Record<string, string>, setup: (dir: string) => void, proxyConfig: Json): Promise<Agent> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-agent-e2e-'));
  setup(dir);
  const ports = { admin: await freePort(), status: await freePort(), envoyStatus: await freePort(), envoyPrometheus: await freePort() };
  const child = spawn(process.execPath, [proxyMain, 'proxy', 'sidecar', '--concurrency', '1', '--proxyLogLevel', 'info', '--log_output_level=default:info'], {
    cwd: dir, stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', POD_NAME: 'productpage-v1-5f9d', POD_NAMESPACE: 'bookinfo', INSTANCE_IP: '127.0.0.1',
      SERVICE_ACCOUNT: 'bookinfo-productpage', ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local',
      ISTIO_META_WORKLOAD_NAME: 'productpage-v1', ISTIO_META_INTERCEPTION_MODE: 'REDIRECT', ISTIO_META_APP_CONTAINERS: 'productpage',
      ISTIO_META_POD_PORTS: '[{"name":"http","containerPort":9080,"protocol":"TCP"}]',
      ISTIO_METAJSON_LABELS: '{"app":"productpage","version":"v1"}', TRUST_DOMAIN: 'cluster.local',
      ENVOY_STATUS_PORT: String(ports.envoyStatus), ENVOY_PROMETHEUS_PORT: String(ports.envoyPrometheus),
      PROXY_CONFIG: JSON.stringify({ proxyAdminPort: ports.admin, statusPort: ports.status, ...proxyConfig }),
      ...env,
    },
  });
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => { err += d; if (process.env.SKUA_TEST_DEBUG) process.stderr.write(d); });
  child.stdout?.resume();
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child, dir, ports, stderr: () => err,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function getJson(url: string): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: await res.json() as Json };
}

describe('skua-proxy proxy sidecar against a real gRPC Delta ADS server', () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend('productpage'); });
  after(() => cleanup(() => backend?.close()));

  for (const mode of ['plaintext', 'tls'] as const) {
    test(`${mode}: node, Bearer token and ClusterID reach the server; a pushed Listener is served`, async () => {
      const certDir = mkdtempSync(path.join(tmpdir(), 'skua-istiod-'));
      let ads: TestAds | undefined;
      let agent: Agent | undefined;
      try {
        const certs = mode === 'tls' ? makeIstiodCerts(certDir, 'istiod.istio-system.svc') : undefined;
        ads = await startTestAds({ tls: certs });
        ads.set(TYPE_URL.cluster, [appCluster(backend.port)]);
        ads.set(TYPE_URL.listener, []);
        // 15012-style: TLS to "localhost", which pilot-agent verifies as istiod.istio-system.svc; 15010-style: plaintext.
        const proxyConfig = mode === 'tls'
          ? { discoveryAddress: `localhost:${ads.port}` }
          : { discoveryAddress: `127.0.0.1:${ads.port}`, controlPlaneAuthPolicy: 'NONE' };
        agent = await startAgent({}, (dir) => {
          mkdirSync(path.join(dir, 'var/run/secrets/tokens'), { recursive: true });
          writeFileSync(path.join(dir, 'var/run/secrets/tokens/istio-token'), `jwt-${mode}-1\n`);
          if (certs) {
            mkdirSync(path.join(dir, 'var/run/secrets/istio'), { recursive: true });
            writeFileSync(path.join(dir, 'var/run/secrets/istio/root-cert.pem'), certs.root);
          }
        }, proxyConfig);
        const a = agent;
        const server = ads;

        // pilot-agent's `wait` polls the 15021 listener, which routes to the status port: ready once CDS+LDS arrived.
        const wait = await runProxyCli(['wait', '--url', `http://127.0.0.1:${a.ports.envoyStatus}/healthz/ready`, '--timeoutSeconds', '20', '--periodMillis', '100']);
        assert.equal(wait.code, 0, `wait failed: ${wait.stderr}\nproxy stderr:\n${a.stderr()}`);
        assert.match(wait.stdout, /Envoy is ready!/);

        const stream = server.streams[0];
        assert.ok(stream, 'the proxy opened a Delta ADS stream');
        assert.equal(stream.metadata.authorization, `Bearer jwt-${mode}-1`);
        assert.equal(stream.metadata.clusterid, 'Kubernetes');
        const first = stream.requests[0];
        assert.equal(first.type_url, TYPE_URL.cluster);
        assert.ok(stream.requests.slice(1).every((r) => r.node === undefined), 'set_node_on_first_message_only');
        const node = first.node as Json & { metadata: Json };
        assert.equal(node.id, 'sidecar~127.0.0.1~productpage-v1-5f9d.bookinfo~bookinfo.svc.cluster.local');
        assert.equal(node.cluster, 'productpage.bookinfo');
        const bootstrap = JSON.parse(readFileSync(path.join(a.dir, 'etc/istio/proxy/envoy-rev.json'), 'utf8')) as { node: Json & { metadata: Json } };
        assert.deepEqual(node.metadata, bootstrap.node.metadata, 'the metadata istiod sees is the bootstrap node metadata');
        assert.equal(node.metadata.CLUSTER_ID, 'Kubernetes');
        assert.equal(node.metadata.NAMESPACE, 'bookinfo');
        assert.equal(node.metadata.ENVOY_STATUS_PORT, a.ports.envoyStatus);
        assert.deepEqual(node.metadata.LABELS, { app: 'productpage', version: 'v1' });
        assert.equal(node.metadata.POD_PORTS, '[{"name":"http","containerPort":9080,"protocol":"TCP"}]');
        assert.equal(String(node.metadata.INSTANCE_IPS).split(',')[0], '127.0.0.1');
        assert.deepEqual(node.metadata.PILOT_SAN, mode === 'tls' ? ['istiod.istio-system.svc'] : undefined);

        // /config_dump shows the bootstrap the agent wrote.
        const dump = await getJson(`http://127.0.0.1:${a.ports.admin}/config_dump`);
        const bs = (dump.body.configs as Json[]).find((c) => String(c['@type']).endsWith('BootstrapConfigDump')) as { bootstrap: { node: Json } };
        assert.equal(bs.bootstrap.node.id, node.id);

        // A Listener pushed over the stream is served.
        const appPort = await freePort();
        server.set(TYPE_URL.listener, [appListener(appPort)]);
        const reply = await server.waitFor(async () => {
          try {
            const r = await fetch(`http://127.0.0.1:${appPort}/productpage`, { signal: AbortSignal.timeout(2000) });
            return r.status === 200 ? await r.json() as EchoReply : undefined;
          } catch { return undefined; }
        }, 'the pushed listener to serve');
        assert.equal(reply.backend, 'productpage');
        assert.ok(stream.requests.some((r) => r.type_url === TYPE_URL.listener && r.response_nonce !== '' && !r.error_detail), 'LDS ACKed');

        if (mode === 'plaintext') {
          // Prometheus: Envoy's 15090 listener routes to admin; the agent's status port serves the same stats.
          for (const port of [a.ports.envoyPrometheus, a.ports.status]) {
            const prom = await fetch(`http://127.0.0.1:${port}/stats/prometheus`, { signal: AbortSignal.timeout(5000) });
            assert.equal(prom.status, 200);
            assert.match(await prom.text(), /^envoy_cluster_manager_active_clusters\{?.*\}? \d+$/m);
          }
          // The token is read again when the stream reconnects (the kubelet rotates it in place).
          writeFileSync(path.join(a.dir, 'var/run/secrets/tokens/istio-token'), 'jwt-plaintext-2');
          stream.end();
          const second = await server.waitFor(() => server.streams[1], 'a reconnected stream');
          assert.equal(second.metadata.authorization, 'Bearer jwt-plaintext-2');
          assert.equal(second.metadata.clusterid, 'Kubernetes');
        }
      } finally {
        await cleanup(() => agent?.stop(), () => ads?.close(), () => rmSync(certDir, { recursive: true, force: true }));
      }
    });
  }

  test('tls: a server certificate without istiod\'s SAN is refused; the proxy stays not ready', async () => {
    const certDir = mkdtempSync(path.join(tmpdir(), 'skua-istiod-'));
    let ads: TestAds | undefined;
    let agent: Agent | undefined;
    try {
      const certs = makeIstiodCerts(certDir, 'not-istiod.example');
      ads = await startTestAds({ tls: certs });
      ads.set(TYPE_URL.cluster, []);
      ads.set(TYPE_URL.listener, []);
      writeFileSync(path.join(certDir, 'root.pem'), certs.root);
      agent = await startAgent({ XDS_ROOT_CA: path.join(certDir, 'root.pem') }, () => {}, { discoveryAddress: `localhost:${ads.port}` });
      const a = agent;
      const status = await ads.waitFor(async () => {
        try { return (await fetch(`http://127.0.0.1:${a.ports.status}/healthz/ready`)).status; } catch { return undefined; }
      }, 'the status port');
      assert.equal(status, 503);
      // The client's SAN check fails the handshake (logged when the stream breaks); no stream reaches the server.
      await ads.waitFor(() => /match none of istiod\.istio-system\.svc/.test(a.stderr()), 'the SAN mismatch to be logged', 15_000);
      assert.equal(ads.streams.length, 0, 'no ADS stream over a TLS session with the wrong SAN');
      assert.equal((await fetch(`http://127.0.0.1:${a.ports.status}/healthz/ready`)).status, 503);
    } finally {
      await cleanup(() => agent?.stop(), () => ads?.close(), () => rmSync(certDir, { recursive: true, force: true }));
    }
  });
});
