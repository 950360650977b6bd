// The images, compose.yaml and the kube-play pod for real: the Dockerfile's images built with podman
// on the debootstrap stand-in base (no registry here); `./dev demo --containers` on them: the compose
// mesh brought up with Debian's podman-compose under a project of its own, the demo's checks
// (requests across the sidecars with mTLS, plaintext refused, an AuthorizationPolicy denial, a live
// edit of the Istio YAML) and load run against it, and taken down; the same with `--profile ambient`
// (ztunnel, the CNI stand-in, a waypoint and ambient pods as well: HBONE with mTLS between the pods'
// ztunnel listeners, plaintext refused by ztunnel, an L7 denial at the waypoint, a live route edit
// there); then containers/kube/bookinfo-pod.yaml under `podman kube play` (istio-init's
// capture rules, istio-proxy as 1337, inbound and outbound traffic captured and served); at the end
// the test fails if a container, pod, volume, network or image of its own is left.
// Skips (saying why) only where podman cannot run: not root, or no podman and no Docker engine.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { pickEngine, engineEnv, run } from '../containers/lib/engine.ts';
import { buildImages, removeImages } from '../containers/lib/compose-mesh.ts';
import { MESH_CHECKS, type MeshCheck } from '../containers/lib/mesh-checks.ts';
import { AMBIENT_CHECKS } from '../containers/lib/ambient-checks.ts';
import { PRODUCTPAGE_IP, kubeDown, kubePlay, type KubePod } from '../containers/lib/kube-pod.ts';
import { freePort } from './lib/proxy.ts';

const picked = pickEngine();
const skip = 'reason' in picked ? picked.reason : false;
if (skip) console.log(`# skipping container tests: ${skip}`);
const engine = 'engine' in picked ? picked.engine : 'podman';
const env = engineEnv(engine);
const tag = `test${process.pid}`;
/** The compose projects `./dev demo --containers [--profile ambient] --image-tag <tag>` use. */
const projects = [`skua-demo-${tag}`, `skua-demo-ambient-${tag}`];
const BODY_BYTES = 100_000;

/** What the app in the kube pod sends to the productpage Service: a POST of BODY_BYTES, via its sidecar. */
const OUTBOUND = `const r = require('node:http').request({ host: 'productpage', port: 9080, path: '/anything', method: 'POST' },
  (res) => { let b = ''; res.on('data', (c) => b += c); res.on('end', () => console.log(res.statusCode + ' ' + b)); });
r.on('error', (e) => console.log('ERR ' + e.code)); r.end(Buffer.alloc(${BODY_BYTES}, 120));`;

/** Start time: `run -d` of the proxy image with a static bootstrap (admin only) until /ready answers 200. */
async function startToReadyMs(): Promise<number> {
  const port = await freePort();
  const bootstrap = JSON.stringify({ admin: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } });
  const name = `skua-start-${process.pid}`;
  const t0 = performance.now();
  const started = await run(engine, ['run', '-d', '--name', name, '--network', 'host', `skua/proxy:${tag}`, '--config-yaml', bootstrap], { env });
  try {
    assert.equal(started.code, 0, started.stderr);
    while (performance.now() - t0 < 60_000) {
      const status = await fetch(`http://127.0.0.1:${port}/ready`, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0);
      if (status === 200) return performance.now() - t0;
      await new Promise((r) => setTimeout(r, 50));
    }
    const logs = await run(engine, ['logs', name], { env });
    throw new Error(`the proxy container never became ready: ${logs.stdout}${logs.stderr}`);
  } finally { await run(engine, ['rm', '-f', '-t', '1', name], { env }); }
}

describe('containers', { skip, timeout: 30 * 60_000 }, () => {
  let images: string[] = [];

  before(async () => {
    const t0 = performance.now();
    images = await buildImages({ engine, project: projects[0], tag, ingressPort: 0, standin: engine === 'podman', log: (l) => console.log(`# ${l}`) });
    console.log(`# images built in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  });

  after(async () => {
    assert.deepEqual(await removeImages(engine, images), [], 'image removal');
    const ours = (name: string): boolean => projects.some((p) => name.startsWith(`${p}_`) || name.startsWith(`${p}-`));
    const left = await run(engine, ['ps', '-a', '--format', '{{.Names}}'], { env });
    assert.deepEqual(left.stdout.split('\n').filter(ours), [], 'containers left behind');
    const vols = await run(engine, ['volume', 'ls', '--format', '{{.Name}}'], { env });
    assert.deepEqual(vols.stdout.split('\n').filter(ours), [], 'volumes left behind');
    const nets = await run(engine, ['network', 'ls', '--format', '{{.Name}}'], { env });
    assert.deepEqual(nets.stdout.split('\n').filter(ours), [], 'networks left behind');
    const tagged = await run(engine, ['images', '--format', '{{.Repository}}:{{.Tag}}'], { env });
    assert.deepEqual(tagged.stdout.split('\n').filter((i) => i.endsWith(`:${tag}`)), [], 'images left behind');
  });

  test('the images: sizes, user, entrypoint, working directory (proxyv2\'s shape)', async () => {
    const lines: string[] = [];
    for (const name of ['proxy', 'controlplane', 'demo-apps', 'ztunnel']) {
      const r = await run(engine, ['image', 'inspect', `skua/${name}:${tag}`, '--format', '{{.Size}} {{.Config.User}} {{json .Config.Entrypoint}} {{.Config.WorkingDir}}'], { env });
      assert.equal(r.code, 0, r.stderr);
      const [size, user, entrypoint, workdir] = r.stdout.trim().split(' ');
      lines.push(`skua/${name}: ${(Number(size) / 1e6).toFixed(0)} MB, user ${user}, entrypoint ${entrypoint}, workdir ${workdir}`);
      if (name === 'ztunnel') assert.equal(entrypoint, '["/usr/local/bin/ztunnel"]');
      if (name === 'proxy') {
        assert.equal(user, '1337:1337');
        assert.equal(entrypoint, '["/usr/local/bin/pilot-agent"]');
        assert.equal(workdir, '/');
      }
    }
    const z = await run(engine, ['run', '--rm', `skua/ztunnel:${tag}`, 'version'], { env });
    assert.match(z.stdout, /^skua-ztunnel \d/, `${z.stdout}${z.stderr}`);
    const t0 = performance.now();
    const v = await run(engine, ['run', '--rm', `skua/proxy:${tag}`, '--version'], { env });
    const runMs = performance.now() - t0;
    assert.match(v.stdout, /skua-proxy version/);
    lines.push(`${engine} run --rm skua/proxy --version: ${runMs.toFixed(0)} ms`);
    lines.push(`${engine} run -d skua/proxy --config-yaml … → admin /ready 200: ${(await startToReadyMs()).toFixed(0)} ms`);
    console.log(`# ${lines.join('\n# ')}`);
  });

  /** `./dev demo --containers ...args` as a user runs it, on the images built above; asserts every check passed and the mesh went down. */
  async function demo(label: string, args: readonly string[], checks: readonly MeshCheck[]): Promise<string> {
    const t0 = performance.now();
    const r = await run(process.execPath, ['demo/run.ts', '--containers', '--image-tag', tag, '--ingress-port', String(await freePort()), '--duration', '3', '--connections', '4', ...args],
      { env, timeoutMs: 15 * 60_000, echo: (l) => console.log(`# ${l}`) });
    console.log(`# ${label} (images built): ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    assert.equal(r.code, 0, r.stderr.slice(-2000));
    const lines = r.stdout.split('\n');
    for (const check of checks) assert.ok(lines.some((l) => l.startsWith('  ok    ') && l.slice(8).startsWith(`${check.name} `)), `check not passed: ${check.name}`);
    assert.match(r.stdout, new RegExp(`^OK: ${checks.length} checks passed, [1-9]\\d* requests, no failures$`, 'm'));
    assert.match(r.stdout, /^the mesh is down$/m);
    return r.stdout;
  }

  // compose up (the default profile: the sidecar mesh only), every check (mTLS identity, STRICT
  // plaintext refused, AuthorizationPolicy denial, live edit), load through the ingress gateway, compose down.
  test('./dev demo --containers: the compose mesh passes the demo\'s checks and load', async () => {
    const out = await demo('./dev demo --containers', [], MESH_CHECKS);
    const containers = /^ {2}(\d+) containers \(profile default\): (.*)$/m.exec(out);
    assert.ok(containers, 'the demo names the containers it started');
    assert.equal(containers[1], '18', containers[2]);
    assert.doesNotMatch(containers[2], /ambient|ztunnel|waypoint|istio-cni/, 'the default profile is the sidecar mesh only');
  });

  // The same with the ambient profile: the sidecar mesh's checks still pass beside it, and ambient's own.
  test('./dev demo --containers --profile ambient: ztunnel, the CNI stand-in and a waypoint pass the ambient checks', async () => {
    const out = await demo('./dev demo --containers --profile ambient', ['--profile', 'ambient'], [...MESH_CHECKS, ...AMBIENT_CHECKS]);
    assert.match(out, /^ {2}32 containers \(profile ambient\): .*\bistio-cni istio-ingressgateway istiod kube kube-ambient\b.*\bwaypoint ztunnel$/m);
  });

  describe('podman kube play: an Istio-injected pod', { skip: engine !== 'podman' ? 'kube play is podman\'s' : false }, () => {
    let pod: KubePod | undefined;

    before(async () => {
      const t0 = performance.now();
      pod = await kubePlay(tag);
      const ready = await pod.exec('productpage-v1-istio-proxy', ['pilot-agent', 'wait', '--timeoutSeconds', '120']);
      if (ready.code !== 0) {
        const logs = await run('podman', ['logs', '--tail', '30', 'productpage-v1-istio-proxy'], { env });
        const istiod = await run('podman', ['pod', 'logs', '--tail', '15', 'istiod'], { env });
        assert.fail(`istio-proxy not ready: ${ready.stderr}\n--- istio-proxy:\n${logs.stdout}${logs.stderr}\n--- istiod:\n${istiod.stdout}${istiod.stderr}`);
      }
      console.log(`# kube play → istio-proxy ready: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    });

    after(async () => {
      assert.deepEqual(await kubeDown(), [], 'kube teardown');
      const pods = await run('podman', ['pod', 'ls', '--format', '{{.Name}}'], { env });
      assert.deepEqual(pods.stdout.split('\n').filter((p) => p === 'istiod' || p === 'productpage-v1'), [], 'pods left behind');
    });

    test('istio-init left its capture rules in the pod\'s network namespace', async () => {
      const pid = await pod!.infraPid();
      const r = spawnSync('nsenter', ['-t', String(pid), '-n', 'iptables-save', '-t', 'nat'], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006/);
      assert.match(r.stdout, /-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001/);
      assert.match(r.stdout, /--uid-owner 1337 -j RETURN/);
      assert.match(r.stdout, /-A ISTIO_INBOUND -p tcp -m tcp --dport 15020 -j RETURN/);
    });

    test('istio-proxy runs as 1337 with the injector\'s environment', async () => {
      const id = await pod!.exec('productpage-v1-istio-proxy', ['id', '-u']);
      assert.equal(id.stdout.trim(), '1337');
      const ps = await pod!.exec('productpage-v1-istio-proxy', ['node', '-e', 'console.log(process.cwd(), process.env.INSTANCE_IP, process.env.CA_ADDR)']);
      assert.equal(ps.stdout.trim(), `/ ${PRODUCTPAGE_IP} istiod.istio-system.svc:15012`);
    });

    test('inbound: a request to the pod IP is captured and served through the sidecar', async () => {
      const res = await fetch(`http://${PRODUCTPAGE_IP}:9080/anything`, { method: 'POST', body: Buffer.alloc(BODY_BYTES, 120), signal: AbortSignal.timeout(15_000) });
      const seen = await res.json() as { bytes: number; remote: string };
      assert.equal(res.status, 200);
      assert.equal(seen.bytes, BODY_BYTES, 'bytes the app received');
      assert.equal(seen.remote, '127.0.0.6', 'the app sees the sidecar\'s inbound source address');
      const stats = await pod!.exec('productpage-v1-istio-proxy', ['node', '-e', "fetch('http://127.0.0.1:15000/stats?filter=inbound_0.0.0.0_9080.downstream_rq_2xx').then((r) => r.text()).then(console.log)"]);
      assert.match(stats.stdout, /http\.inbound_0\.0\.0\.0_9080\.downstream_rq_2xx: [1-9]/);
    });

    test('outbound: the app\'s request to the Service is captured and sent over mTLS', async () => {
      const r = await pod!.exec('productpage-v1-productpage', ['node', '-e', OUTBOUND]);
      const out = r.stdout.trim();
      assert.match(out, /^200 /, `${out} ${r.stderr}`);
      const seen = JSON.parse(out.slice(4)) as { bytes: number; peer?: string };
      assert.equal(seen.bytes, BODY_BYTES);
      assert.match(seen.peer ?? '', /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/bookinfo-productpage/);
    });
  });
});
