// Readiness as pilot-agent reports it, and holdApplicationUntilProxyStarts (`skua-proxy wait` as
// the injector's postStart hook). The sidecar is not ready until istiod's first CDS and LDS are
// applied and its listeners are warmed (their RDS arrived): 15020 says which part is missing in
// istiod's words; `wait` keeps the app container from starting until 15021 answers 200, so the
// app's first call through the sidecar succeeds. A server that went LIVE without config (a custom
// bootstrap whose initial_fetch_timeout expired) is not ready; once ready, an istiod outage keeps it
// ready (the last good config serves).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cleanup, freePort, proxyMain, repoRoot, runProxyCli, type CliResult } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { request, sleep } from './lib/client.ts';
import { startTestAds, type TestAds } from './lib/ads-server.ts';
import { startAgent, type RunningAgent } from './lib/agent.ts';
import { xdsCluster, xdsHttpListener, xdsRoute } from './lib/agent-config.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { TYPE_URL } from '@skua/proxy/xds';

/** `skua-proxy wait` running in the background (as the kubelet runs a postStart hook). */
function startWait(args: readonly string[]): { done: Promise<CliResult>; exited(): boolean } {
  const child = spawn(process.execPath, [proxyMain, 'wait', ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '', finished = false;
  child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const kill = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const done = new Promise<CliResult>((resolve) => child.once('close', (code, signal) => {
    clearTimeout(kill);
    finished = true;
    resolve({ code, signal, stdout: out, stderr: err });
  }));
  return { done, exited: () => finished };
}

/** An ADS server that answers nothing yet (istiod still computing the proxy's config). */
async function heldAds(): Promise<TestAds> {
  const ads = await startTestAds();
  for (const t of [TYPE_URL.cluster, TYPE_URL.listener, TYPE_URL.route]) ads.hold(t);
  return ads;
}

function give(ads: TestAds, typeUrl: string, resources: Array<Record<string, unknown>>): void {
  ads.set(typeUrl, resources);
  ads.release(typeUrl);
}

async function statusReady(a: RunningAgent): Promise<{ status: number; body: string }> {
  return a.status('/healthz/ready');
}

/** Polls until the status port answers with `body` (the agent reaches each step asynchronously). */
async function untilReason(a: RunningAgent, body: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try { const r = await statusReady(a); last = `${r.status} ${r.body}`; if (r.body === body) { assert.equal(r.status, 503); return; } } catch (e) { last = (e as Error).message; }
    if (Date.now() > deadline) throw new Error(`readiness never said "${body}"; last: ${last}\n${a.stderr().slice(-2000)}`);
    await sleep(50);
  }
}

describe('readiness after the first CDS and LDS; skua-proxy wait (holdApplicationUntilProxyStarts)', { timeout: 120_000 }, () => {
  let backend: Backend;
  const stops: Array<() => unknown> = [];
  before(async () => { backend = await startHttpBackend('app'); });
  after(() => cleanup(...stops, () => backend?.close()));

  test('not ready until CDS, LDS and the listener\'s RDS are in; wait holds the app until then and its first call succeeds', async () => {
    const ads: TestAds = await heldAds();
    stops.push(() => ads.close());
    const a = await startAgent({ xdsPort: ads.port });
    stops.push(() => a.stop());
    const waiting = startWait(['--url', `http://127.0.0.1:${a.ports.envoyStatus}/healthz/ready`, '--timeoutSeconds', '45', '--periodMillis', '100']);

    await untilReason(a, 'config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected');
    give(ads, TYPE_URL.cluster, [xdsCluster('app', backend.port)]);
    await untilReason(a, 'config not fully received from XDS server: cds updates: 1 successful, 0 rejected; lds updates: 0 successful, 0 rejected');
    const appPort = await freePort();
    give(ads, TYPE_URL.listener, [xdsHttpListener('outbound', appPort, 'app', { direction: 'OUTBOUND', rds: 'app-routes' })]);
    // LDS applied, but the listener warms until its route table arrives: not LIVE, not ready.
    await untilReason(a, 'server is not live, current state is: INITIALIZING');
    await sleep(500);
    assert.equal(waiting.exited(), false, 'wait returned before the proxy was ready');
    assert.equal((await statusReady(a)).status, 503);

    give(ads, TYPE_URL.route, [xdsRoute('app-routes', 'app')]);
    const w = await waiting.done;
    assert.equal(w.code, 0, `wait failed: ${w.stderr}`);
    assert.match(w.stdout, /Waiting for Envoy proxy to be ready \(timeout: 45 seconds\)\.\.\.\nEnvoy is ready!/);
    // The app container starts now; its very first call through the sidecar is served.
    const first = await request(`http://127.0.0.1:${appPort}/first-call`);
    assert.equal(first.status, 200);
    assert.equal(JSON.parse(first.text).url, '/first-call');
    assert.deepEqual(await statusReady(a), { status: 200, body: '' });
  });

  test('once ready, istiod going away keeps the sidecar ready and serving', async () => {
    const ads = await startTestAds();
    stops.push(() => ads.close());
    const appPort = await freePort();
    ads.set(TYPE_URL.cluster, [xdsCluster('app', backend.port)]);
    ads.set(TYPE_URL.listener, [xdsHttpListener('outbound', appPort, 'app', { direction: 'OUTBOUND' })]);
    const a = await startAgent({ xdsPort: ads.port });
    stops.push(() => a.stop());
    await a.ready();
    ads.close();
    await sleep(1500);
    assert.deepEqual(await statusReady(a), { status: 200, body: '' });
    assert.equal((await request(`http://127.0.0.1:${appPort}/after-outage`)).status, 200);
  });

  test('a custom bootstrap that went LIVE after initial_fetch_timeout without any config is not ready', async () => {
    const ads = await heldAds();
    stops.push(() => ads.close());
    const a = await startAgent({
      xdsPort: ads.port,
      customBootstrap: (ports) => {
        const b = adsBootstrap(ads.port, true);
        for (const k of ['lds_config', 'cds_config']) (b.dynamic_resources as Record<string, Record<string, unknown>>)[k].initial_fetch_timeout = '1s';
        b.admin = { address: { socket_address: { address: '127.0.0.1', port_value: ports.admin } } };
        return b;
      },
    });
    stops.push(() => a.stop());
    // Envoy's own /ready says LIVE once the initial fetch gave up...
    const deadline = Date.now() + 15_000;
    for (;;) {
      const r = await fetch(`http://127.0.0.1:${a.ports.admin}/ready`).then(async (res) => res.text(), () => '');
      if (r.trim() === 'LIVE') break;
      if (Date.now() > deadline) throw new Error(`never LIVE: ${a.stderr().slice(-2000)}`);
      await sleep(100);
    }
    // ...but pilot-agent's probe wants CDS and LDS from istiod.
    assert.deepEqual(await statusReady(a), { status: 503, body: 'config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected' });
    const w = await runProxyCli(['wait', '--url', `http://127.0.0.1:${a.ports.status}/healthz/ready`, '--timeoutSeconds', '1', '--periodMillis', '100']);
    assert.equal(w.code, 1);
    assert.match(w.stderr, /^Error: timeout waiting for Envoy proxy to become ready\. Last error: HTTP status code 503$/m);
  });

  test('wait against nothing listening times out with the connection error', async () => {
    const port = await freePort();
    const w = await runProxyCli(['wait', '--url', `http://127.0.0.1:${port}/healthz/ready`, '--timeoutSeconds', '1', '--periodMillis', '200']);
    assert.equal(w.code, 1);
    assert.match(w.stderr, /timeout waiting for Envoy proxy to become ready\. Last error: .+/);
  });
});
