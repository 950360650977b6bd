// The images and compose.yaml for real: the Dockerfile's images built with podman on the debootstrap
// stand-in base (no registry here), the compose mesh brought up with Debian's podman-compose under a
// project of its own, `./dev demo`'s checks run against it (requests across the sidecars with mTLS,
// plaintext refused, an AuthorizationPolicy denial, a live edit of the Istio YAML), then everything
// taken down: the test fails if a container, volume, network or image of its own is left.
// Skips (saying why) only where podman cannot run: not root, or no podman and no Docker engine.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { pickEngine, engineEnv, run } from '../containers/lib/engine.ts';
import { meshDown, meshReady, meshUp, type ComposeMesh } from '../containers/lib/compose-mesh.ts';
import { MESH_CHECKS } from '../containers/lib/mesh-checks.ts';
import { freePort } from './lib/proxy.ts';

const picked = pickEngine();
const skip = 'reason' in picked ? picked.reason : false;
if (skip) console.log(`# skipping container tests: ${skip}`);
const engine = 'engine' in picked ? picked.engine : 'podman';

describe('compose.yaml: the mesh in containers', { skip, timeout: 30 * 60_000 }, () => {
  const project = `skuatest${process.pid}`;
  const tag = `test${process.pid}`;
  let mesh: ComposeMesh | undefined;

  before(async () => {
    mesh = await meshUp({ engine, project, tag, ingressPort: await freePort(), standin: engine === 'podman', log: (l) => console.log(`# ${l}`) });
    try {
      await meshReady(mesh);
    } catch (err) {
      // The checks report the details; the mesh must still come down.
      console.log(`# not ready: ${(err as Error).message}`);
      throw err;
    }
  });

  after(async () => {
    if (!mesh) return;
    const problems = await meshDown(mesh);
    assert.deepEqual(problems, [], 'teardown');
    const env = engineEnv(engine);
    const left = await run(engine, ['ps', '-a', '--filter', `label=com.docker.compose.project=${project}`, '--format', '{{.Names}}'], { env });
    assert.equal(left.stdout.trim(), '', 'containers left behind');
    const vols = await run(engine, ['volume', 'ls', '--format', '{{.Name}}'], { env });
    assert.deepEqual(vols.stdout.split('\n').filter((v) => v.startsWith(project)), [], 'volumes left behind');
    const nets = await run(engine, ['network', 'ls', '--format', '{{.Name}}'], { env });
    assert.deepEqual(nets.stdout.split('\n').filter((n) => n.startsWith(project)), [], 'networks left behind');
    const images = await run(engine, ['images', '--format', '{{.Repository}}:{{.Tag}}'], { env });
    assert.deepEqual(images.stdout.split('\n').filter((i) => i.endsWith(`:${tag}`)), [], 'images left behind');
  });

  test('the images: sizes, user, entrypoint, working directory (proxyv2\'s shape)', async () => {
    const env = engineEnv(engine);
    const lines: string[] = [];
    for (const name of ['proxy', 'controlplane', 'demo-apps']) {
      const r = await run(engine, ['image', 'inspect', `skua/${name}:${tag}`, '--format', '{{.Size}} {{.Config.User}} {{json .Config.Entrypoint}} {{.Config.WorkingDir}}'], { env });
      assert.equal(r.code, 0, r.stderr);
      const [size, user, entrypoint, workdir] = r.stdout.trim().split(' ');
      lines.push(`skua/${name}: ${(Number(size) / 1e6).toFixed(0)} MB, user ${user}, entrypoint ${entrypoint}, workdir ${workdir}`);
      if (name === 'proxy') {
        assert.equal(user, '1337:1337');
        assert.equal(entrypoint, '["/usr/local/bin/pilot-agent"]');
        assert.equal(workdir, '/');
      }
    }
    const t0 = performance.now();
    const v = await run(engine, ['run', '--rm', `skua/proxy:${tag}`, '--version'], { env });
    const runMs = performance.now() - t0;
    assert.match(v.stdout, /skua-proxy version/);
    console.log(`# ${lines.join('\n# ')}\n# podman run --rm skua/proxy --version: ${runMs.toFixed(0)} ms`);
  });

  for (const check of MESH_CHECKS) {
    test(check.name, async () => {
      assert.ok(mesh, 'the mesh did not start');
      console.log(`# ${await check.run(mesh)}`);
    });
  }
});
