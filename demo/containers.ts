/**
 * `./dev demo --containers`: compose.yaml's mesh in containers (podman as root with this repository's
 * CONTAINERS_CONF and Debian's podman-compose, or Docker with `docker compose`): build the images,
 * bring the mesh up, run the demo's checks against it (mTLS between sidecars, plaintext refused, an
 * AuthorizationPolicy denial, a live edit of the Istio YAML), send some load through the ingress
 * gateway, print a summary and take it all down again. With --keep it stays up until Ctrl-C.
 */
import { pickEngine, type EngineName } from '../containers/lib/engine.ts';
import { buildImages, logsOf, meshDown, meshReady, meshUp, removeImages, type ComposeMesh, type MeshOptions } from '../containers/lib/compose-mesh.ts';
import { runMeshChecks } from '../containers/lib/mesh-checks.ts';
import { runLoad } from './lib/load.ts';
import { printChecks, printLoad } from './lib/report.ts';

export interface ContainerDemoOptions {
  readonly durationMs: number;
  readonly connections: number;
  readonly maxRequests: number;
  readonly keep: boolean;
  readonly ingressPort: number;
  /** Base images: `standin` builds them from debootstrap + npm (no registry needed), `public` pulls node:24. */
  readonly base: 'standin' | 'public' | undefined;
  /** Use the images already built with this tag (neither build nor remove them); the project gets the tag as its suffix. */
  readonly imageTag: string | undefined;
}

export async function runContainerDemo(o: ContainerDemoOptions): Promise<number> {
  const picked = pickEngine();
  if ('reason' in picked) { console.error(`demo --containers: ${picked.reason}`); return 2; }
  const engine: EngineName = picked.engine;
  const standin = (o.base ?? (engine === 'podman' ? 'standin' : 'public')) === 'standin';
  if (standin && engine !== 'podman') { console.error('demo --containers: --base standin needs podman'); return 2; }
  console.log(`skua demo — the compose mesh in containers (${engine}, ${standin ? 'stand-in base images' : 'public node:24 base images'})\n`);
  let mesh: ComposeMesh | undefined;
  let images: string[] = [];
  let interrupted = false;
  const onSignal = (): void => { interrupted = true; };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const t0 = performance.now();
  try {
    const meshOpts: MeshOptions = {
      engine, project: o.imageTag ? `skua-demo-${o.imageTag}` : 'skua-demo', tag: o.imageTag ?? 'demo', ingressPort: o.ingressPort, standin, log: (l) => console.log(`  ${l}`),
    };
    if (!o.imageTag) images = await buildImages(meshOpts);
    mesh = await meshUp(meshOpts);
    await meshReady(mesh);
    console.log(`  the mesh serves (${((performance.now() - t0) / 1000).toFixed(0)} s after the start, building included)\n`);
    const checks = await runMeshChecks(mesh);
    printChecks(checks);
    if (checks.some((c) => !c.ok)) console.log(`istiod's last lines:\n${(await logsOf(mesh, 'istiod')).split('\n').slice(-20).join('\n')}\n`);
    const target = { label: 'GET /productpage', port: o.ingressPort, path: '/productpage', weight: 1, expect: 200 };
    console.log(`load: ${o.connections} keep-alive connections through the ingress gateway for ${o.durationMs / 1000} s...`);
    const load = await runLoad([target], { durationMs: o.durationMs, connections: o.connections, maxRequests: o.maxRequests, stopped: () => interrupted });
    printLoad(load);
    const failed = checks.filter((c) => !c.ok).length;
    const bad = load.targets.reduce((a, t) => a + t.unexpected, 0) + [...load.errors.values()].reduce((a, b) => a + b, 0);
    const ok = failed === 0 && load.sent > 0 && bad === 0;
    console.log(ok ? `OK: ${checks.length} checks passed, ${load.sent} requests, no failures` : `FAILED: ${failed} of ${checks.length} checks failed, ${bad} of ${load.sent} requests failed`);
    if (o.keep && !interrupted) {
      console.log(`\nrunning until Ctrl-C. Try:
  curl -s http://127.0.0.1:${o.ingressPort}/productpage
  $EDITOR ${mesh.configDir}/reviews.yaml        # subset: v2, and reload the page
  ${engine} ps --filter label=com.docker.compose.project=${mesh.opts.project}
  ${engine} logs ${mesh.container('istiod')}\n`);
      await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
    }
    return interrupted && !o.keep ? 130 : ok ? 0 : 1;
  } catch (err) {
    console.error(`demo --containers failed: ${(err as Error).message}`);
    return 1;
  } finally {
    console.log('taking the mesh down...');
    const problems = [...(mesh ? await meshDown(mesh) : []), ...await removeImages(engine, images)];
    for (const p of problems) console.error(`  ${p}`);
    if (!problems.length) console.log('the mesh is down');
  }
}
