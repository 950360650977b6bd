/**
 * `./dev demo --containers`: compose.yaml's mesh in containers (podman as root with this repository's
 * CONTAINERS_CONF and Debian's podman-compose, or Docker with `docker compose`): build the images,
 * bring the mesh up, run the demo's checks against it (mTLS between sidecars, plaintext refused, an
 * AuthorizationPolicy denial, a live edit of the Istio YAML), send some load through the ingress
 * gateway, print a summary and take it all down again. With --keep it stays up until Ctrl-C.
 * `--profile ambient` adds compose.yaml's ambient profile (ztunnel, the CNI stand-in, a waypoint,
 * ambient Bookinfo pods) and its checks (HBONE with mTLS between ztunnels, plaintext refused, an L7
 * denial at the waypoint, a live route edit at the waypoint).
 */
import { pickEngine, type EngineName } from '../containers/lib/engine.ts';
import { buildImages, logsOf, meshDown, meshReady, meshUp, removeImages, type ComposeMesh, type MeshOptions, type Profile } from '../containers/lib/compose-mesh.ts';
import { MESH_CHECKS, runMeshChecks } from '../containers/lib/mesh-checks.ts';
import { AMBIENT_CHECKS, ambientReady } from '../containers/lib/ambient-checks.ts';
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
  /** compose.yaml's profile: `default` (the sidecar mesh) or `ambient` (that, plus the ambient profile). */
  readonly profile: Profile;
}

export async function runContainerDemo(o: ContainerDemoOptions): Promise<number> {
  const picked = pickEngine();
  if ('reason' in picked) { console.error(`demo --containers: ${picked.reason}`); return 2; }
  const engine: EngineName = picked.engine;
  const standin = (o.base ?? (engine === 'podman' ? 'standin' : 'public')) === 'standin';
  if (standin && engine !== 'podman') { console.error('demo --containers: --base standin needs podman'); return 2; }
  const ambient = o.profile === 'ambient';
  console.log(`skua demo — the compose mesh in containers (${engine}, ${standin ? 'stand-in base images' : 'public node:24 base images'}${ambient ? ', profile ambient' : ''})\n`);
  let mesh: ComposeMesh | undefined;
  let images: string[] = [];
  let interrupted = false;
  const onSignal = (): void => { interrupted = true; };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const t0 = performance.now();
  try {
    const meshOpts: MeshOptions = {
      engine, project: `skua-demo${ambient ? '-ambient' : ''}${o.imageTag ? `-${o.imageTag}` : ''}`, tag: o.imageTag ?? 'demo', ingressPort: o.ingressPort, standin,
      profile: o.profile, log: (l) => console.log(`  ${l}`),
    };
    if (!o.imageTag) images = await buildImages(meshOpts);
    mesh = await meshUp(meshOpts);
    await meshReady(mesh);
    if (ambient) await ambientReady(mesh);
    console.log(`  the mesh serves (${((performance.now() - t0) / 1000).toFixed(0)} s after the start, building included)\n`);
    const checks = await runMeshChecks(mesh, ambient ? [...MESH_CHECKS, ...AMBIENT_CHECKS] : MESH_CHECKS);
    printChecks(checks);
    if (checks.some((c) => !c.ok)) {
      for (const s of ['istiod', ...(ambient ? ['ztunnel', 'waypoint'] : [])]) console.log(`${s}'s last lines:\n${(await logsOf(mesh, s)).split('\n').slice(-20).join('\n')}\n`);
    }
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
${ambient ? `  $EDITOR ${mesh.ambientConfigDir}/reviews.yaml   # the ambient namespace's route, applied at the waypoint
  ${engine} exec ${mesh.container('ambient-ratings-v1')} node -e "fetch('http://productpage:9080/productpage').then(r => r.text()).then(console.log)"
  ${engine} logs -f ${mesh.container('ztunnel')}     # one access log line per connection, with both SPIFFE ids
` : ''}  ${engine} ps --filter label=com.docker.compose.project=${mesh.opts.project}
  ${engine} logs ${mesh.container('istiod')}\n`);
      // A pending promise alone does not keep Node running: the timer does, until a signal comes.
      const alive = setInterval(() => {}, 1 << 30);
      await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
      clearInterval(alive);
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
