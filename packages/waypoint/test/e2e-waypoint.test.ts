// skua-waypoint end to end in network namespaces (needs root): client pod → its ztunnel → HBONE →
// the waypoint (skua-waypoint, run as Istio's waypoint Deployment runs istio-proxy) → HBONE → the
// server's ztunnel → server pod; the apps know nothing of it. Everything is configured by the real
// skua-controlplane from Istio YAML (a Namespace labelled istio.io/use-waypoint, an istio-waypoint
// Gateway, a GAMMA HTTPRoute 90/10, a VirtualService with retries, AuthorizationPolicies attached by
// targetRefs) and its CA. Shows: L7 policy (GET /ok 200, POST 403 "RBAC: access denied" from the
// waypoint, another identity 403), the split over 1,000 requests within 4σ, retries around a failing
// endpoint, a service without a waypoint skipping it, istio_requests_total with reporter="waypoint"
// and the workloads from WDS (promtool accepts the exposition), the peer principal from the HBONE
// certificate, the destination's identity checked on the way out (an impostor is refused), and
// `skua-proxy proxy waypoint` in the same pod serving the same way.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { netnsAvailable } from '../../ztunnel/src/core.ts';
import { POLICIES, SPIFFE, VIP, WaypointMesh } from './lib/mesh.ts';

const skip = process.getuid?.() !== 0 || !netnsAvailable ? 'needs root and the netns addon' : false;
const ECHO_V1 = 'echo-v1-7d9b8c6f5b-rv001', ECHO_V2 = 'echo-v2-6c5b7d8e9f-rv002';

/** The value of one istio_requests_total series whose labels include all of `want`. */
function requests(text: string, want: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('istio_requests_total{')) continue;
    if (Object.entries(want).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

function stat(text: string, name: string, cluster: string): number {
  const m = new RegExp(`^${name}\\{envoy_cluster_name="${cluster.replace(/[|.]/g, '\\$&')}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

describe('skua-waypoint end to end (two nodes, ztunnels, Istio YAML)', { skip, timeout: 300_000 }, () => {
  let mesh: WaypointMesh;
  before(async () => {
    mesh = new WaypointMesh({ subnet: 8, extraYaml: POLICIES, impostor: true });
    await mesh.start();
  });
  after(async () => {
    if (process.env.WP_DEBUG) console.log(mesh?.waypointLog.join('\n'));
    await mesh?.destroy();
  });

  test('L7 policy at the waypoint: GET /ok 200 from the server, POST 403 "RBAC: access denied" from the waypoint, another identity 403; all counted', async () => {
    const before = await mesh.metrics();
    const get = await mesh.request('cl', `http://${VIP.echo}/ok`, 10);
    assert.deepEqual(get.status, { 200: 10 });
    assert.deepEqual(Object.keys(get.peers), [mesh.pod('wp').ip], 'the server app sees the waypoint as its peer: the request went through it');
    const post = await mesh.request('cl', `http://${VIP.echo}/ok`, 5, 'POST');
    assert.deepEqual(post.status, { 403: 5 });
    assert.equal(post.bodies[403], 'RBAC: access denied');
    assert.equal(post.pods[ECHO_V1] ?? 0, 0, 'no POST reached a server');
    const other = await mesh.request('ot', `http://${VIP.echo}/ok`, 3);
    assert.deepEqual(other.status, { 403: 3 }, 'the ALLOW policy names sleep\'s SPIFFE id, as the HBONE peer presents it');
    const path = await mesh.request('cl', `http://${VIP.echo}/other`, 2);
    assert.deepEqual(path.status, { 403: 2 }, 'GET of another path is not allowed');
    const after = await mesh.metrics();
    const sleep200 = { reporter: 'waypoint', source_workload: 'sleep', response_code: '200', destination_service_namespace: 'default' };
    const sleep403 = { reporter: 'waypoint', source_workload: 'sleep', response_code: '403' };
    assert.equal(requests(after, sleep200) - requests(before, sleep200), 10);
    assert.equal(requests(after, sleep403) - requests(before, sleep403), 7);
    assert.equal(requests(after, { reporter: 'waypoint', source_workload: 'other', response_code: '403' }) - requests(before, { reporter: 'waypoint', source_workload: 'other', response_code: '403' }), 3);
  });

  test('the GAMMA 90/10 split: 1,000 requests land within 4σ of 100 on v2', async () => {
    const r = await mesh.request('cl', `http://${VIP.echo}/ok`, 1000);
    assert.deepEqual(r.status, { 200: 1000 });
    const v2 = r.pods[ECHO_V2] ?? 0;
    const sigma = Math.sqrt(1000 * 0.1 * 0.9);
    assert.ok(Math.abs(v2 - 100) <= 4 * sigma, `v2 got ${v2} (expected 100 ± ${(4 * sigma).toFixed(0)})`);
    assert.equal((r.pods[ECHO_V1] ?? 0) + v2, 1000);
  });

  test('retries around a failing endpoint: every request succeeds while the 503 endpoint was tried; the waypoint counts the retries', async () => {
    const hits = async (): Promise<number> => Number(await mesh.inPod('fb', 'curl', '-s', 'http://127.0.0.1:8080/__hits'));
    const badBefore = await hits();
    const statsBefore = await mesh.metrics(15090);
    const r = await mesh.request('cl', `http://${VIP.flaky}/ok`, 60);
    assert.deepEqual(r.status, { 200: 60 });
    assert.deepEqual(Object.keys(r.pods), ['flaky-good-5f6d7c8b9-aa001']);
    const tried = (await hits()) - badBefore;
    assert.ok(tried > 5, `the failing endpoint was tried ${tried} times`);
    const cluster = 'inbound-vip|80|http|flaky.default.svc.cluster.local';
    const statsAfter = await mesh.metrics(15090);
    assert.equal(stat(statsAfter, 'envoy_cluster_upstream_rq_retry', cluster) - stat(statsBefore, 'envoy_cluster_upstream_rq_retry', cluster), tried);
    assert.equal(stat(statsAfter, 'envoy_cluster_upstream_rq_retry_success', cluster) - stat(statsBefore, 'envoy_cluster_upstream_rq_retry_success', cluster), tried);
  });

  test('a service without a waypoint (istio.io/use-waypoint: none) skips it: the app sees the client, the waypoint counts nothing', async () => {
    const before = await mesh.metrics();
    const r = await mesh.request('cl', `http://${VIP.plain}/ok`, 5);
    assert.deepEqual(r.status, { 200: 5 });
    assert.deepEqual(Object.keys(r.peers), [mesh.pod('cl').ip]);
    const posted = await mesh.request('cl', `http://${VIP.plain}/ok`, 2, 'POST');
    assert.deepEqual(posted.status, { 200: 2 }, 'the waypoint\'s DENY POST does not apply off the waypoint');
    assert.equal(await mesh.metrics().then((t) => requests(t, { destination_service_name: 'plain' })), requests(before, { destination_service_name: 'plain' }));
  });

  test('istio_requests_total from the waypoint: reporter="waypoint", workloads from WDS, the peer principal from the HBONE certificate; promtool accepts it', async () => {
    const text = await mesh.metrics();
    const line = text.split('\n').find((l) => l.startsWith('istio_requests_total{') && l.includes('destination_workload="echo-v1"') && l.includes('response_code="200"'));
    assert.ok(line, text.split('\n').filter((l) => l.startsWith('istio_requests_total')).join('\n'));
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    assert.deepEqual({
      reporter: labels.reporter, source_workload: labels.source_workload, source_workload_namespace: labels.source_workload_namespace,
      source_principal: labels.source_principal, source_app: labels.source_app, source_version: labels.source_version,
      destination_workload: labels.destination_workload, destination_workload_namespace: labels.destination_workload_namespace,
      destination_app: labels.destination_app, destination_version: labels.destination_version, destination_service: labels.destination_service,
      destination_service_name: labels.destination_service_name, connection_security_policy: labels.connection_security_policy,
    }, {
      reporter: 'waypoint', source_workload: 'sleep', source_workload_namespace: 'default', source_principal: SPIFFE('sleep'), source_app: 'sleep', source_version: 'v1',
      destination_workload: 'echo-v1', destination_workload_namespace: 'default', destination_app: 'echo', destination_version: 'v1',
      destination_service: 'echo-v1.default.svc.cluster.local', destination_service_name: 'echo-v1', connection_security_policy: 'mutual_tls',
    });
    assert.ok(Number(line.slice(line.lastIndexOf(' ') + 1)) > 800);
    const check = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
    assert.ok(check.status === 0 || check.status === 3, `promtool exit ${check.status}: ${check.stdout}${check.stderr}`);
    // Envoy's and Istio's own naming (no HELP, counters without _total, milliseconds, the outbound clusters' `tlsMode-*` match stats) gives these lints; nothing else may.
    const problems = `${check.stdout}${check.stderr}`.split('\n').filter((l) => l.trim() && !/no help text|"_total" suffix|abbreviated units|base unit|^envoy_cluster_tlsMode_\w+_total_match_count /.test(l));
    assert.deepEqual(problems, []);
  });

  test('the waypoint is what Istio runs: node waypoint~…, istiod\'s three listeners, workload discovery and the internal listener in its bootstrap', async () => {
    const dump = JSON.parse(await mesh.inPod('wp', 'curl', '-s', 'http://127.0.0.1:15000/config_dump')) as { configs: Array<Record<string, unknown>> };
    const boot = dump.configs[0].bootstrap as { node: { id: string }; bootstrap_extensions: Array<{ name: string }> };
    assert.equal(boot.node.id, `waypoint~${mesh.pod('wp').ip}~waypoint-6f9c8d7b5-wp001.default~default.svc.cluster.local`);
    assert.deepEqual(boot.bootstrap_extensions.map((e) => e.name), ['metadata_discovery', 'envoy.bootstrap.internal_listener']);
    const listeners = dump.configs.flatMap((c) => ((c.dynamic_listeners ?? []) as Array<{ name: string }>).map((l) => l.name));
    assert.deepEqual(listeners.sort(), ['connect_originate', 'connect_terminate', 'main_internal']);
  });

  test('HBONE from the waypoint checks the destination\'s identity: a pod whose certificate is not the one WDS names is refused', async () => {
    const co = 'connect_originate';
    const before = await mesh.metrics(15090);
    const code = async (vip: string): Promise<string> => mesh.inPod('cl', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-m', '10', `http://${vip}/ok`).catch(() => 'failed');
    // pyok: WDS says pyhbone, the certificate says pyhbone: the tunnel opens (the python server then echoes, which is no HTTP).
    await code(VIP.pyok);
    const mid = await mesh.metrics(15090);
    assert.equal(stat(mid, 'envoy_cluster_ssl_handshake', co) - stat(before, 'envoy_cluster_ssl_handshake', co), 1, 'one HBONE handshake to the python server');
    assert.equal(stat(mid, 'envoy_cluster_ssl_fail_verify_san', co), stat(before, 'envoy_cluster_ssl_fail_verify_san', co));
    // pyimp: the same server and certificate at an address WDS gives to `trusted`: refused before any CONNECT.
    assert.equal(await code(VIP.pyimp), '503');
    const after = await mesh.metrics(15090);
    assert.ok(stat(after, 'envoy_cluster_ssl_fail_verify_san', co) > stat(mid, 'envoy_cluster_ssl_fail_verify_san', co), 'the SAN check failed');
    assert.equal(stat(after, 'envoy_cluster_ssl_handshake', co), stat(mid, 'envoy_cluster_ssl_handshake', co), 'no handshake completed');
  });

  test('`skua-proxy proxy waypoint` in the same pod serves the same way', async () => {
    await mesh.restartWaypoint('skua-proxy');
    const get = await mesh.request('cl', `http://${VIP.echo}/ok`, 20);
    assert.deepEqual(get.status, { 200: 20 });
    assert.deepEqual(Object.keys(get.peers), [mesh.pod('wp').ip]);
    const post = await mesh.request('cl', `http://${VIP.echo}/ok`, 2, 'POST');
    assert.deepEqual(post.status, { 403: 2 });
  });
});
