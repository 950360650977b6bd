// Two pods for real (root only): network namespaces on a bridge, each with the capture rules
// from `skua-proxy istio-iptables` (istio-init's command line plus --redirect-dns) and a skua
// sidecar run as `skua-proxy proxy sidecar` under uid 1337, configured by skua-controlplane
// --mesh (STRICT mTLS, iptables capture) with certificates from its CA. The apps know nothing
// of the proxies: the client calls the server's service name, which resolves through the DNS
// proxy and crosses both sidecars over mTLS (a capture on the client's link shows no plaintext),
// the server sidecar sees the client's SPIFFE id, the app sees 127.0.0.6. Unknown destinations
// pass through; an excluded port and uid 1337 bypass capture; the kubelet's rewritten probes
// reach the app; both reporters' istio_* metrics carry Istio's label set; promtool accepts
// 15020 and 15090.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { PodNet, eventually, type PodProcess } from './lib/pods.ts';
import { proxyMain, repoRoot } from './lib/proxy.ts';
import { controlPlaneMain } from './lib/controlplane.ts';
import { HTTP_TAGS, TCP_TAGS } from '../packages/proxy/src/filters/http/istio_stats/config.ts';

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const skip = process.getuid?.() !== 0 ? 'needs root (network namespaces, iptables)'
  : ['iptables', 'tcpdump', 'dnsmasq', 'curl', 'dig', 'setpriv'].find((c) => !has(c)) ?? false;
if (skip) console.log(`# skipping pod mesh tests: ${skip}`);

const NODE = process.execPath;
const APP_UID = 1000;
const PROXY_UID = 1337;
const SUBNET = '10.77.0';
const IP = { client: `${SUBNET}.10`, server: `${SUBNET}.20` };
const VIP = '10.96.0.20';
const SA = { client: 'sleep', server: 'echo-server' };
const MARKER = 'SKUA-PLAINTEXT-MARKER-0123456789\n';
const ISTIO_INIT = ['-p', '15001', '-z', '15006', '-u', '1337', '-m', 'REDIRECT', '-i', '*', '-x', '', '-b', '*', '-d', '15090,15021,15020', '--redirect-dns', '-o', '9998'];

const SERVER_APP = `
import http from 'node:http'; import net from 'node:net'; import { createHash } from 'node:crypto';
let healthy = true, served = 0;
http.createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(healthy ? 200 : 503).end(healthy ? 'ok' : 'sick'); return; }
  if (req.url === '/metrics') { res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end('# HELP echo_requests_total Requests served.\\n# TYPE echo_requests_total counter\\necho_requests_total ' + served + '\\n'); return; }
  if (req.url === '/sick') { healthy = false; res.end('now sick'); return; }
  const chunks = []; req.on('data', (c) => chunks.push(c));
  req.on('end', () => { const body = Buffer.concat(chunks); served++;
    res.writeHead(200, { 'x-peer': req.socket.remoteAddress, 'x-xfcc': req.headers['x-forwarded-client-cert'] ?? '', 'x-body-sha256': createHash('sha256').update(body).digest('hex') });
    res.end(body); });
}).listen(8080, '0.0.0.0');
net.createServer((s) => s.pipe(s)).listen(9000, '0.0.0.0');`;
const EXTERNAL = `import http from 'node:http'; for (const port of [9998, 9999]) http.createServer((req, res) => res.end('external ' + port + ' saw ' + req.socket.remoteAddress)).listen(port, '0.0.0.0');`;
const TCP_CLIENT = `
const net = require('node:net'); const payload = Buffer.alloc(65536, 'tcp-echo-');
const s = net.connect(9000, process.argv[2]); const got = [];
s.on('connect', () => s.end(payload)); s.on('data', (c) => got.push(c)); s.on('error', (e) => { console.log('error ' + e.code); });
s.on('end', () => console.log(Buffer.concat(got).equals(payload) ? 'echoed ' + payload.length : 'mismatch ' + Buffer.concat(got).length));`;

/** The pod's labels as the injector leaves them (it adds the canonical service labels). */
function podLabels(pod: 'client' | 'server'): Record<string, string> {
  const app = pod === 'client' ? 'sleep' : 'echo-server';
  return { app, version: 'v1', 'service.istio.io/canonical-name': app, 'service.istio.io/canonical-revision': 'v1', 'security.istio.io/tlsMode': 'istio' };
}

function meshFile(): string {
  return JSON.stringify({
    mesh: { mtls: 'STRICT', capture: 'iptables' },
    services: [{ name: 'echo-server', vip: VIP, ports: [{ port: 8080, protocol: 'http' }, { port: 9000, protocol: 'tcp' }] }],
    workloads: [
      { name: 'client', service_account: SA.client, ip: IP.client, labels: { app: 'sleep', version: 'v1' } },
      { name: 'server', service_account: SA.server, ip: IP.server, labels: { app: 'echo-server', version: 'v1' }, services: ['echo-server'] },
    ],
  });
}

/** The value and labels of the first series of `metric` whose labels include `want`. */
function series(text: string, metric: string, want: Record<string, string>): { value: number; labels: Record<string, string> } | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const labels: Record<string, string> = {};
    for (const m of line.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) return { value: Number(line.slice(line.lastIndexOf(' ') + 1)), labels };
  }
  return undefined;
}

describe('two pods in network namespaces, skua sidecars from skua-controlplane', { skip }, () => {
  let net: PodNet;
  let dir = '';
  let dnsmasq: PodProcess;
  const sidecars: Record<string, PodProcess> = {};

  const inPod = (pod: string, args: string[], uid?: number): { code: number; stdout: string; stderr: string } => net.run(net.ns(pod), args, { uid });
  const curl = (pod: string, args: string[], uid = APP_UID): string => {
    const r = inPod(pod, ['curl', '-sS', '--max-time', '10', ...args], uid);
    if (r.code !== 0) throw new Error(`curl ${args.join(' ')} in ${pod}: ${r.stderr}`);
    return r.stdout;
  };
  const scrape = (pod: string, port: number): string => curl(pod, [`http://127.0.0.1:${port}/stats/prometheus`], 0);
  const passthroughCx = (pod: string): number => series(scrape(pod, 15090), 'envoy_cluster_upstream_cx_total', { cluster_name: 'PassthroughCluster' })?.value
    ?? Number(/envoy_cluster_upstream_cx_total\{envoy_cluster_name="PassthroughCluster"\} (\d+)/.exec(scrape(pod, 15090))?.[1] ?? 0);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'skua-pods-'));
    chmodSync(dir, 0o755);
    net = new PodNet(`skua-pm${process.pid % 100000}`, SUBNET);
    const resolv = `nameserver ${net.gateway}\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n`;
    for (const pod of ['client', 'server'] as const) net.addPod(pod, IP[pod], resolv);
    writeFileSync(path.join(dir, 'server-app.mjs'), SERVER_APP);
    writeFileSync(path.join(dir, 'external.mjs'), EXTERNAL);
    writeFileSync(path.join(dir, 'tcp-client.cjs'), TCP_CLIENT);
    writeFileSync(path.join(dir, 'mesh.json'), meshFile());
    writeFileSync(path.join(dir, 'payload.bin'), MARKER.repeat(Math.ceil(262144 / MARKER.length)));
    for (const f of ['server-app.mjs', 'external.mjs', 'tcp-client.cjs', 'payload.bin']) chmodSync(path.join(dir, f), 0o644);
    mkdirSync(path.join(dir, 'app'), { mode: 0o777 });
    chmodSync(path.join(dir, 'app'), 0o777);

    // The node side: the pods' resolver, a server outside the mesh, the control plane with its CA.
    dnsmasq = net.start(net.infra, ['dnsmasq', '-k', '--conf-file=/dev/null', '--no-resolv', '--no-hosts', `--listen-address=${net.gateway}`, '--bind-interfaces',
      `--address=/external.test/${net.gateway}`, `--address=/istiod.istio-system.svc/${net.gateway}`, '--local=/test/', '--local=/cluster.local/', '--log-queries', '--log-facility=-', '--user=root', '--pid-file=']);
    net.start(net.infra, [NODE, path.join(dir, 'external.mjs')]);
    const stateDir = path.join(dir, 'cp');
    const cp = net.start(net.infra, [NODE, controlPlaneMain, '--mesh', path.join(dir, 'mesh.json'), '--xds-address', `${net.gateway}:15010`,
      '--ca-address', `${net.gateway}:15012`, '--state-dir', stateDir], { cwd: repoRoot });
    await eventually('skua-controlplane and its CA', () => /CA for cluster.local on/.test(cp.output()) || undefined);

    for (const pod of ['client', 'server'] as const) {
      // istio-init: the capture rules, as root, before anything else runs in the pod.
      const init = net.run(net.ns(pod), [NODE, proxyMain, 'istio-iptables', ...ISTIO_INIT]);
      assert.equal(init.code, 0, `istio-iptables in ${pod}: ${init.stderr}`);
      // istio-proxy's filesystem: the projected token and the root certificate, owned by the proxy's uid.
      const wd = path.join(dir, `${pod}-proxy`);
      mkdirSync(path.join(wd, 'var/run/secrets/tokens'), { recursive: true });
      mkdirSync(path.join(wd, 'var/run/secrets/istio'), { recursive: true });
      const token = spawnSync(NODE, [controlPlaneMain, 'token', '--state-dir', stateDir, '--namespace', 'default', '--service-account', SA[pod], '--ttl', '1h'], { encoding: 'utf8', cwd: repoRoot });
      writeFileSync(path.join(wd, 'var/run/secrets/tokens/istio-token'), token.stdout.trim());
      copyFileSync(path.join(stateDir, 'root-cert.pem'), path.join(wd, 'var/run/secrets/istio/root-cert.pem'));
      spawnSync('chown', ['-R', `${PROXY_UID}:${PROXY_UID}`, wd]);
      const env: Record<string, string> = {
        POD_NAME: pod, POD_NAMESPACE: 'default', INSTANCE_IP: IP[pod], SERVICE_ACCOUNT: SA[pod], CA_ADDR: 'istiod.istio-system.svc:15012',
        ISTIO_META_DNS_CAPTURE: 'true', ISTIO_META_CLUSTER_ID: 'Kubernetes', ISTIO_META_MESH_ID: 'cluster.local', ISTIO_META_WORKLOAD_NAME: pod,
        ISTIO_METAJSON_LABELS: JSON.stringify(podLabels(pod)), TRUST_DOMAIN: 'cluster.local',
        // PassthroughCluster's counters are outside Istio's default stats inclusion list: asked for, as a user would.
        PROXY_CONFIG: JSON.stringify({ discoveryAddress: `${net.gateway}:15010`, controlPlaneAuthPolicy: 'NONE', proxyStatsMatcher: { inclusionPrefixes: ['cluster.PassthroughCluster'] } }),
      };
      if (pod === 'server') {
        env.ISTIO_KUBE_APP_PROBERS = JSON.stringify({
          '/app-health/echo/livez': { httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP' }, timeoutSeconds: 2 },
          '/app-health/echo/readyz': { tcpSocket: { port: 9000 }, timeoutSeconds: 2 },
        });
        env.ISTIO_PROMETHEUS_ANNOTATIONS = JSON.stringify({ scrape: 'true', port: '8080', path: '/metrics' });
      }
      sidecars[pod] = net.start(net.ns(pod), [NODE, proxyMain, 'proxy', 'sidecar', '--concurrency', '1'], { uid: PROXY_UID, cwd: wd, env });
    }
    net.start(net.ns('server'), [NODE, path.join(dir, 'server-app.mjs')], { uid: APP_UID });
    for (const pod of ['client', 'server']) {
      await eventually(`the ${pod} sidecar to be ready:\n${sidecars[pod].output()}`,
        () => inPod(pod, ['curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', 'http://127.0.0.1:15021/healthz/ready']).stdout === '200' || undefined, 60_000);
    }
    await eventually('the server app', () => inPod('server', ['curl', '-s', 'http://127.0.0.1:8080/healthz']).stdout === 'ok' || undefined);
  });

  after(async () => {
    // SKUA_TEST_HOLD=<seconds> keeps the pods up for a look (ip netns exec ...) before teardown.
    if (process.env.SKUA_TEST_HOLD) await new Promise((r) => setTimeout(r, Number(process.env.SKUA_TEST_HOLD) * 1000));
    await net?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the service name resolves through the DNS proxy (answered locally); other names go to the pod resolver', async () => {
    assert.equal(inPod('client', ['getent', 'hosts', 'echo-server'], APP_UID).stdout.trim().split(/\s+/)[0], VIP);
    assert.equal(inPod('client', ['dig', '+short', 'echo-server.default.svc.cluster.local'], APP_UID).stdout.trim(), VIP);
    assert.doesNotMatch(dnsmasq.output(), /query\[A\] echo-server/, 'mesh names never reach the resolver');
    assert.equal(inPod('client', ['dig', '+short', 'external.test'], APP_UID).stdout.trim(), net.gateway);
    const seen = new RegExp(`query\\[A\\] external\\.test from ${IP.client.replace(/\./g, '\\.')}`);
    await eventually(`dnsmasq to log the forwarded query (uid 1337, not captured again):\n${dnsmasq.output()}`, () => seen.test(dnsmasq.output()) || undefined, 5000);
  });

  test('client → echo-server:8080 crosses both sidecars over mTLS: no plaintext on the link, SPIFFE id and 127.0.0.6 at the server, bytes intact', async () => {
    const pcap = path.join(dir, 'link.pcap');
    const dump = net.start(net.infra, ['tcpdump', '-i', net.pods.get('client')!.veth, '--immediate-mode', '-U', '-s', '0', '-w', pcap, `host ${IP.server}`]);
    await eventually('tcpdump', () => /listening on/.test(dump.output()) || undefined);
    const payload = readFileSync(path.join(dir, 'payload.bin'));
    const headers = curl('client', ['-D', '-', '-o', path.join(dir, 'app', 'reply.bin'), '--data-binary', `@${path.join(dir, 'payload.bin')}`, 'http://echo-server:8080/upload']);
    // The last packets are in tcpdump's hands a moment after curl returned.
    await new Promise((r) => setTimeout(r, 500));
    await dump.stop('SIGINT');
    assert.match(headers, /^HTTP\/1\.1 200/);
    const h = Object.fromEntries(headers.split('\r\n').slice(1).filter(Boolean).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    assert.equal(h['x-peer'], '127.0.0.6', 'the app sees the connection from 127.0.0.6');
    assert.match(h['x-xfcc'], new RegExp(`URI=spiffe://cluster\\.local/ns/default/sa/${SA.client}`), 'the server sidecar saw the client\'s SPIFFE id');
    assert.equal(h['x-body-sha256'], createHash('sha256').update(payload).digest('hex'), 'request bytes intact');
    assert.ok(readFileSync(path.join(dir, 'app', 'reply.bin')).equals(payload), 'response bytes intact');
    const wire = readFileSync(pcap);
    assert.ok(wire.length > 2 * payload.length, `both directions crossed the link (${wire.length} bytes captured)`);
    assert.equal(wire.indexOf(Buffer.from('SKUA-PLAINTEXT-MARKER')), -1, 'no plaintext payload on the wire');
    assert.ok(wire.includes(Buffer.from([0x16, 0x03, 0x01])), 'a TLS handshake on the wire');
    const flows = spawnSync('tcpdump', ['-r', pcap, '-nn'], { encoding: 'utf8' }).stdout;
    assert.match(flows, new RegExp(`${IP.client.replace(/\./g, '\\.')}\\.\\d+ > ${IP.server.replace(/\./g, '\\.')}\\.8080:`), 'to the pod IP (the VIP was resolved by the client sidecar)');
  });

  test('TCP through both sidecars (echo-server:9000): 64 KiB echoed', () => {
    assert.equal(inPod('client', [NODE, path.join(dir, 'tcp-client.cjs'), 'echo-server.default.svc.cluster.local'], APP_UID).stdout.trim(), 'echoed 65536');
  });

  test('an unknown destination passes through; the excluded port and uid 1337 are not captured', () => {
    const before = passthroughCx('client');
    assert.equal(curl('client', [`http://${net.gateway}:9999/`]), `external 9999 saw ${IP.client}`);
    assert.equal(curl('client', ['http://external.test:9999/']), `external 9999 saw ${IP.client}`);
    assert.equal(passthroughCx('client'), before + 2, 'both went through the sidecar\'s PassthroughCluster');
    assert.equal(curl('client', [`http://${net.gateway}:9998/`]), `external 9998 saw ${IP.client}`);
    assert.equal(curl('client', [`http://${net.gateway}:9999/`], PROXY_UID), `external 9999 saw ${IP.client}`);
    assert.equal(passthroughCx('client'), before + 2, 'port 9998 (-o) and uid 1337 bypassed the sidecar');
  });

  test("a kubelet-like prober on 15020 gets the app's real health", () => {
    const probe = (p: string): string => net.run(net.infra, ['curl', '-s', '-w', ' %{http_code}', '-A', 'kube-probe/1.31', `http://${IP.server}:15020${p}`]).stdout;
    assert.equal(probe('/app-health/echo/livez'), 'ok 200');
    assert.equal(probe('/app-health/echo/readyz'), ' 200');
    curl('client', ['http://echo-server:8080/sick']);
    assert.equal(probe('/app-health/echo/livez'), 'sick 503');
  });

  test("both reporters' istio_* metrics carry Istio's labels; promtool accepts 15020 and 15090", () => {
    const src = scrape('client', 15090);
    const dst = scrape('server', 15090);
    const common = { source_workload: 'client', source_principal: `spiffe://cluster.local/ns/default/sa/${SA.client}`, destination_workload: 'server',
      destination_principal: `spiffe://cluster.local/ns/default/sa/${SA.server}`, destination_service: 'echo-server.default.svc.cluster.local',
      source_canonical_service: 'sleep', destination_canonical_service: 'echo-server', connection_security_policy: 'unknown' };
    for (const [reporter, text] of [['source', src], ['destination', dst]] as const) {
      const want = { ...common, reporter, response_code: '200', request_protocol: 'http', ...(reporter === 'destination' ? { connection_security_policy: 'mutual_tls' } : {}) };
      const rq = series(text, 'istio_requests_total', want);
      assert.ok(rq && rq.value >= 1, `${reporter}: istio_requests_total ${JSON.stringify(want)} in\n${text.split('\n').filter((l) => l.startsWith('istio_requests_total')).join('\n')}`);
      assert.deepEqual(Object.keys(rq.labels), HTTP_TAGS, `${reporter}: Istio's full HTTP label set, in order`);
      assert.ok(series(text, 'istio_request_duration_milliseconds_count', want), `${reporter}: duration histogram`);
      const tcp = { ...common, reporter, ...(reporter === 'destination' ? { connection_security_policy: 'mutual_tls' } : {}) };
      for (const m of ['istio_tcp_connections_opened_total', 'istio_tcp_sent_bytes_total', 'istio_tcp_received_bytes_total']) {
        const s = series(text, m, tcp);
        assert.ok(s && s.value > 0, `${reporter}: ${m}`);
        assert.deepEqual(Object.keys(s.labels), TCP_TAGS, `${reporter}: ${m} label set`);
      }
    }
    const merged = scrape('server', 15020);
    assert.match(merged, /^echo_requests_total [1-9]/m, 'the app\'s metrics are merged in');
    assert.match(merged, /^istio_agent_process_cpu_seconds_total /m);
    assert.match(scrape('client', 15020), /^istio_agent_dns_requests_total [1-9]/m, 'the DNS proxy\'s queries are counted');
    if (!existsSync('/usr/bin/promtool')) return;
    for (const [what, text] of [['client 15090', src], ['server 15090', dst], ['server 15020', merged], ['client 15020', scrape('client', 15020)]] as const) {
      const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
      assert.notEqual(r.status, 1, `${what}: ${r.stdout}${r.stderr}`);
      // Envoy's own naming (no HELP, counters without _total, `tlsMode-istio` match stats) gives these lints; nothing else may.
      const problems = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l && !/no help text|"_total" suffix|abbreviated units|base unit|^envoy_cluster_tlsMode_istio_total_match_count /.test(l));
      assert.deepEqual(problems, [], what);
    }
  });
});


