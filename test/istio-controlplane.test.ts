// skua-controlplane --istio DIR end to end (real processes): a skua-proxy sidecar gets its config
// from Istio YAML; applying a VirtualService moves live traffic; a file with a schema error is
// reported (file, resource, field) and the last good config keeps serving traffic; fixing it
// applies; deleting the route falls back to the service's default route. The sidecar's own
// /config_dump carries istiod's names (compared with the fixture dumps).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { adsBootstrap, controlPlaneMain } from './lib/controlplane.ts';
import { cleanup, fixturesDir, freePort, repoRoot, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';

const SLEEP_IP = '127.0.40.11', SLEEP_OUT = '127.0.41.11';

function platform(port: number, v1: Backend, v2: Backend): string {
  const backend = (version: string, ip: string, b: Backend): string => `apiVersion: v1
kind: Pod
metadata:
  name: reviews-${version}-abc12-x1y2z
  labels: { app: reviews, version: ${version} }
  annotations: { sidecar.istio.io/inject: "false" }
spec: { containers: [{ name: reviews, ports: [{ containerPort: ${port}, hostIP: 127.0.0.1, hostPort: ${b.port} }] }] }
status: { podIP: ${ip} }
`;
  return [
    `apiVersion: v1\nkind: Service\nmetadata: { name: reviews }\nspec: { ports: [{ port: ${port}, name: http }], selector: { app: reviews } }\n`,
    backend('v1', '127.0.40.21', v1), backend('v2', '127.0.40.22', v2),
    `apiVersion: v1
kind: Pod
metadata:
  name: sleep
  labels: { app: sleep }
  annotations: { sidecar.istio.io/interceptionMode: NONE, sidecar.skua.io/outboundIP: ${SLEEP_OUT} }
spec: { serviceAccountName: sleep, containers: [{ name: sleep }] }
status: { podIP: ${SLEEP_IP} }
`,
    readFileSync(path.join(fixturesDir, 'istio-istio/samples/bookinfo/networking/destination-rule-all.yaml'), 'utf8').split('---')[1],
  ].join('---\n');
}

const vs = (subset: string): string => `apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: { name: reviews }\nspec: { hosts: [reviews], http: [{ route: [{ destination: { host: reviews, subset: ${subset} } }] }] }\n`;

describe('skua-controlplane --istio DIR with a skua-proxy sidecar', () => {
  let dir: string, cp: ChildProcess, cpLog = '', proxy: RunningProxy, v1: Backend, v2: Backend, port: number;

  const write = (name: string, text: string): void => {
    writeFileSync(path.join(dir, `.${name}.tmp`), text);
    renameSync(path.join(dir, `.${name}.tmp`), path.join(dir, name));
  };
  const backendsOf = async (n: number): Promise<Record<string, number>> => {
    const seen: Record<string, number> = {};
    for (let i = 0; i < n; i++) {
      const r = await request(`http://${SLEEP_OUT}:${port}/reviews/${i}`, { headers: { host: `reviews:${port}` }, timeoutMs: 5000 });
      assert.equal(r.status, 200, r.text);
      const b = String(r.headers['x-backend']);
      seen[b] = (seen[b] ?? 0) + 1;
    }
    return seen;
  };
  const eventually = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
    const deadline = Date.now() + 15_000;
    while (!(await ok().catch(() => false))) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}; control plane:\n${cpLog.slice(-2000)}`);
      await sleep(100);
    }
  };

  before(async () => {
    [v1, v2] = await Promise.all([startHttpBackend('reviews-v1'), startHttpBackend('reviews-v2')]);
    port = await freePort();
    dir = mkdtempSync(path.join(tmpdir(), 'skua-istio-e2e-'));
    write('platform.yaml', platform(port, v1, v2));
    write('vs.yaml', vs('v1'));
    const xds = await freePort();
    cp = spawn(process.execPath, [controlPlaneMain, '--istio', dir, '--xds-address', `127.0.0.1:${xds}`], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
    cp.stderr!.setEncoding('utf8').on('data', (d: string) => { cpLog += d; });
    await eventually('the control plane', async () => cpLog.includes(`:${xds},`));
    const b = adsBootstrap(xds, true, `sidecar~${SLEEP_IP}~sleep.default~default.svc.cluster.local`);
    b.node = { id: `sidecar~${SLEEP_IP}~sleep.default~default.svc.cluster.local`, cluster: 'sleep.default', metadata: { NAMESPACE: 'default', LABELS: { app: 'sleep' } } };
    proxy = await startProxy(() => b as Json);
  });
  after(() => cleanup(() => proxy?.stop(), () => { cp?.kill('SIGTERM'); }, () => v1?.close(), () => v2?.close(), () => rmSync(dir, { recursive: true, force: true })));

  test('the VirtualService routes live traffic; a new one moves it', async () => {
    await eventually('traffic to v1', async () => (await backendsOf(2))['reviews-v1'] === 2);
    assert.deepEqual(await backendsOf(20), { 'reviews-v1': 20 });
    write('vs.yaml', vs('v2'));
    await eventually('traffic to v2', async () => (await backendsOf(2))['reviews-v2'] === 2);
    assert.deepEqual(await backendsOf(20), { 'reviews-v2': 20 });
  });

  test('a file with a schema error is reported and the last good config keeps serving; fixing it applies', async () => {
    const before = cpLog.length;
    write('vs.yaml', vs('v1').replace('http: [', 'http: [{ route: [{ destination: { host: reviews }, weight: -5 }] }, '));
    await eventually('the error in the log', async () => cpLog.slice(before).includes('vs.yaml: Error [IST0106] (VirtualService default/reviews) spec.http[0].route[0].weight: weight -5 < 0'));
    assert.match(cpLog.slice(before), /\(the file's last good content keeps serving\)/);
    assert.deepEqual(await backendsOf(20), { 'reviews-v2': 20 }, 'the last good VirtualService still routes');
    write('vs.yaml', vs('v1'));
    await eventually('traffic back to v1', async () => (await backendsOf(2))['reviews-v1'] === 2);
  });

  test('deleting the VirtualService falls back to the default route (both versions)', async () => {
    rmSync(path.join(dir, 'vs.yaml'));
    await eventually('both versions', async () => { const s = await backendsOf(20); return (s['reviews-v1'] ?? 0) > 0 && (s['reviews-v2'] ?? 0) > 0; });
  });

  test("the sidecar's /config_dump carries istiod's listener, route and cluster names", async () => {
    const dump = JSON.parse((await proxy.admin('/config_dump')).body) as { configs: Json[] };
    const names = (key: string, inner: string): string[] => dump.configs.flatMap((c) => ((c[key] ?? []) as Json[]).map((x) => String(((x[inner] ?? (x.active_state as Json)?.listener) as Json)?.name)));
    const listeners = names('dynamic_listeners', 'listener'), clusters = names('dynamic_active_clusters', 'cluster'), routes = names('dynamic_route_configs', 'route_config');
    const host = 'reviews.default.svc.cluster.local';
    assert.deepEqual(listeners, [`0.0.0.0_${port}`]);
    assert.deepEqual(routes, [String(port)]);
    assert.deepEqual(clusters.sort(), [`outbound|${port}||${host}`, `outbound|${port}|v1|${host}`, `outbound|${port}|v2|${host}`, `outbound|${port}|v3|${host}`].sort());
    // The same name shapes as istiod's sidecar dump.
    const theirs = JSON.parse(readFileSync(path.join(fixturesDir, 'istio-istio/istioctl/pkg/authz/testdata/configdump.yaml'), 'utf8')) as { configs: Json[] };
    const theirListeners = theirs.configs.flatMap((c) => ((c.dynamic_listeners ?? []) as Json[]).map((l) => String(((l.active_state as Json).listener as Json).name)));
    assert.ok(theirListeners.includes('0.0.0.0_9080'));
    const vh = ((dump.configs.find((c) => String(c['@type']).includes('Routes'))!.dynamic_route_configs as Json[])[0].route_config as Json).virtual_hosts as Json[];
    assert.equal(vh[0].name, `${host}:${port}`);
    assert.deepEqual(vh[0].domains, [host, `${host}:${port}`, 'reviews.default.svc', `reviews.default.svc:${port}`, 'reviews.default', `reviews.default:${port}`, 'reviews', `reviews:${port}`, (vh[0].domains as string[])[8], (vh[0].domains as string[])[9]]);
  });
});
