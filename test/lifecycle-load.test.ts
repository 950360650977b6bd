// SIGTERM during a load run, the Kubernetes way (issue 12 item 2): a client sidecar and two server
// sidecars, each `skua-proxy proxy sidecar` (pilot-agent) configured by skua-controlplane --mesh
// (istiod's shapes, STRICT mTLS with certificates from the local CA, capture none), h2load as the
// client app at a fixed rate through the client sidecar. Mid-run server-a's pod terminates: its
// sidecar gets SIGTERM and, at the same moment, the endpoint leaves EDS (EndpointSlice
// `terminating`; istiod leaves server-a's own sidecar config as it was). Every request must
// succeed with all its bytes, server-b must take over, server-a's sidecar must exit 0 after its
// terminationDrainDuration. Once between the sidecars with HTTP/1.1, once with HTTP/2.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startControlPlane, type RunningControlPlane } from './lib/controlplane.ts';
import { cleanup, freePort, type Json } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { have, request, run, sleep } from './lib/client.ts';
import { startLocalCa, workload, type LocalCa, type Workload } from './lib/mesh.ts';
import { exitWithin, startAgent, type RunningAgent } from './lib/agent.ts';
import { parseH2load } from './lib/h2load.ts';

const CLIENT = { name: 'client', ip: '127.0.0.61', out: '127.0.1.61', sa: 'client' };
const SERVERS = [
  { name: 'server-a', ip: '127.0.0.62', out: '127.0.1.62', sa: 'echo' },
  { name: 'server-b', ip: '127.0.0.63', out: '127.0.1.63', sa: 'echo' },
] as const;
const BODY = 1024;
/** The apps take 40 ms per answer: at 320 requests/s about a dozen are in flight when SIGTERM lands. */
const APP_DELAY_MS = 40;
/** h2load: 8 connections, 40 requests/s each, 240 requests each (6 s). */
const LOAD = { connections: 8, rpsPerConnection: 40, requests: 1920 };
const TERMINATION_DRAIN = 3;

const skip = (await have('h2load')) ? false : 'h2load (nghttp2-client) is not installed';

for (const protocol of ['http', 'http2'] as const) {
  describe(`SIGTERM to a server sidecar under load, endpoint removed from EDS at once (${protocol === 'http' ? 'HTTP/1.1' : 'HTTP/2'} between the sidecars)`, { skip, timeout: 180_000 }, () => {
    let ca: LocalCa, cp: RunningControlPlane;
    let servicePort: number;
    const apps: Backend[] = [];
    const workloads: Workload[] = [];
    const agents: Record<string, RunningAgent> = {};

    // `terminating`: the pod is being deleted — out of EDS, while its own sidecar's config stays as it was.
    const mesh = (terminating?: (typeof SERVERS)[number]): Json => ({
      mesh: { mtls: 'STRICT', capture: 'none' },
      services: [{ name: 'echo', vip: '10.96.0.60', ports: [{ port: servicePort, protocol }] }],
      workloads: [
        { name: CLIENT.name, service_account: CLIENT.sa, ip: CLIENT.ip, outbound_ip: CLIENT.out, labels: { app: 'client' } },
        ...SERVERS.map((s) => ({
          name: s.name, service_account: s.sa, ip: s.ip, outbound_ip: s.out, labels: { app: 'echo' }, services: ['echo'],
          app: { [servicePort]: `127.0.0.1:${apps[SERVERS.indexOf(s)].port}` }, terminating: s === terminating,
        })),
      ],
    });

    before(async () => {
      servicePort = await freePort();
      for (const s of SERVERS) apps.push(await startHttpBackend(s.name));
      ca = await startLocalCa();
      cp = await startControlPlane({}, { mesh: mesh() });
      for (const w of [CLIENT, ...SERVERS]) {
        const wl = workload(ca, 'default', w.sa);
        workloads.push(wl);
        agents[w.name] = await startAgent({
          xdsPort: cp.port, cwd: wl.dir, env: wl.env, podName: w.name, podIp: w.ip, logLevel: 'warning',
          proxyConfig: { terminationDrainDuration: `${TERMINATION_DRAIN}s` },
        });
      }
      for (const a of Object.values(agents)) await a.ready(30_000);
    });
    after(() => cleanup(...Object.values(agents).map((a) => () => a.stop(500)), () => cp?.stop(), () => ca?.close(),
      ...workloads.map((w) => () => w.remove()), ...apps.map((b) => () => b.close())));

    test('h2load through the pair: zero failed requests, every byte, server-b takes over, server-a\'s sidecar exits 0 after its drain', async () => {
      const url = `http://${CLIENT.out}:${servicePort}/stream?bytes=${BODY}&delay=${APP_DELAY_MS}`;
      const authority = `echo:${servicePort}`;
      // Both servers answer through mTLS before the run (certificates issued, EDS in).
      const seen = new Set<string>();
      for (let i = 0; i < 40 && seen.size < 2; i++) {
        const r = await request(`http://${CLIENT.out}:${servicePort}/warm`, { headers: { host: authority } });
        assert.equal(r.status, 200, r.text);
        seen.add(String(r.headers['x-backend']));
      }
      assert.equal(seen.size, 2, `both servers answer: ${[...seen].join(',')}`);

      const load = run('h2load', ['--h1', '-n', String(LOAD.requests), '-c', String(LOAD.connections), '--rps', String(LOAD.rpsPerConnection),
        '-H', `:authority: ${authority}`, url], 60_000);
      await sleep(2000);
      // The pod is deleted: the kubelet sends SIGTERM while the endpoint controller removes it from EDS.
      const a = agents['server-a'];
      const exitedAt = a.exited.then(() => Date.now());
      const t0 = Date.now();
      process.kill(a.pid, 'SIGTERM');
      cp.writeMesh(mesh(SERVERS[0]));
      const out = await load;
      const r = parseH2load(out.stdout);
      assert.deepEqual({ failed: r.failed, errored: r.errored, timeout: r.timeout, non2xx: r.status['3xx'] + r.status['4xx'] + r.status['5xx'] },
        { failed: 0, errored: 0, timeout: 0, non2xx: 0 }, out.stdout);
      assert.equal(r.succeeded, LOAD.requests);
      assert.equal(r.status['2xx'], LOAD.requests);
      assert.equal(r.dataBytes, LOAD.requests * BODY, 'response bytes lost');

      const exit = await exitWithin(a, TERMINATION_DRAIN * 1000 + 5000);
      assert.deepEqual(exit, { code: 0, signal: null }, `server-a's sidecar: ${a.stderr().slice(-2000)}`);
      assert.ok(await exitedAt - t0 >= TERMINATION_DRAIN * 1000 - 100, `exited ${await exitedAt - t0} ms after SIGTERM, before terminationDrainDuration`);
      const served = apps.map((b) => b.requests.filter((q) => q.url.startsWith('/stream')).length);
      assert.equal(served[0] + served[1], LOAD.requests, `the apps saw ${served.join(' + ')} requests`);
      assert.ok(served[0] > 0 && served[1] > served[0], `server-a served ${served[0]}, server-b ${served[1]}`);
      // After the run the client still reaches the service (server-b only).
      for (let i = 0; i < 5; i++) assert.equal((await request(`http://${CLIENT.out}:${servicePort}/after`, { headers: { host: authority } })).headers['x-backend'], 'server-b');
    });
  });
}
